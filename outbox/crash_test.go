package outbox_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/outbox"
	"github.com/ledgerworks/ledger/storage/postgres"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// receiver is the parent's HTTP endpoint that children deliver to.
type receiver struct {
	mu       sync.Mutex
	attempts map[string][]attemptSeen // enqueue key -> attempts
}

type attemptSeen struct {
	key, header string
	token       string
	pid         string
}

func newReceiver(t *testing.T) (*receiver, string) {
	r := &receiver{attempts: map[string][]attemptSeen{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		f := strings.Fields(string(body))
		if len(f) != 4 {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.attempts[f[0]] = append(r.attempts[f[0]], attemptSeen{key: f[1], header: req.Header.Get("Idempotency-Key"), token: f[2], pid: f[3]})
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return r, srv.URL
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, a := range r.attempts {
		n += len(a)
	}
	return n
}

// startChild starts a worker process and waits until it is ready.
func startChild(t *testing.T, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{childEnv + "=1"}, env...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child did not start: %q %v", line, err)
	}
	go io.Copy(io.Discard, out)
	return cmd
}

func crashRounds() int {
	if os.Getenv("OUTBOX_CRASH_LONG") != "" {
		return 20
	}
	return 3
}

// Worker processes are killed (SIGKILL) mid-delivery, again and again, and
// a last one runs to the end: every message is delivered at least once,
// every attempt carries the message's one key, none is lost, and the
// ledger verifies. OUTBOX_CRASH_LONG=1 runs 20 rounds.
func TestCrashWorkerMidDelivery(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	path := tempLedger(t)
	rec, sink := newReceiver(t)
	const n = 300
	db := openBolt(t, path, nil)
	for i := range n {
		ordering := ""
		if i%5 == 0 {
			ordering = fmt.Sprintf("cust-%d", i%3)
		}
		enqueue(t, db, outbox.EnqueueRequest{Tenant: childTenant, Topic: childTopic, IdempotencyKey: fmt.Sprintf("m-%d", i), OrderingKey: ordering})
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	env := []string{childLedger + "=" + path, childSink + "=" + sink, childDelay + "=5", childLease + "=300"}
	for round := range crashRounds() {
		before := rec.count()
		cmd := startChild(t, env...)
		deadline := time.Now().Add(10 * time.Second)
		for rec.count() < before+10+round*7 && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
	}
	cmd := startChild(t, env...)
	deadline := time.Now().Add(60 * time.Second)
	for delivered(rec, n) < n && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // the last outcomes recorded
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("last worker: %v", err)
	}
	repeats := checkDelivered(t, rec, n)
	t.Logf("%d rounds killed mid-delivery; %d messages, %d attempts repeated after a kill", crashRounds(), n, repeats)
	if repeats == 0 {
		t.Errorf("no attempt was repeated: no kill landed mid-delivery")
	}
	db = openBolt(t, path, nil)
	defer db.Close()
	waitAllDone(t, db, n)
	mustCheck(t, db)
}

func delivered(rec *receiver, n int) int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return len(rec.attempts)
}

// checkDelivered checks that every message reached the receiver, each
// attempt with the message's key in the body and the header.
func checkDelivered(t *testing.T, rec *receiver, n int) (repeats int) {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for i := range n {
		key := fmt.Sprintf("m-%d", i)
		seen := rec.attempts[key]
		if len(seen) == 0 {
			t.Errorf("%s was never delivered", key)
		}
		want := outbox.MessageID(childTenant, childTopic, key).Key()
		for _, a := range seen {
			if a.key != want || a.header != want {
				t.Errorf("%s attempted with key %s / header %s, want %s", key, a.key, a.header, want)
			}
		}
		repeats += len(seen) - 1
	}
	return repeats
}

func waitAllDone(t *testing.T, db *chain.DB, n int) {
	t.Helper()
	s, err := outbox.Stats(context.Background(), db, childTenant, childTopic)
	if err != nil || len(s) != 1 || s[0].Done != int64(n) {
		t.Fatalf("stats after the workers: %+v %v", s, err)
	}
}

// Three worker processes share one PostgreSQL database and deliver the
// same topic: with leases far longer than any handler call, a message
// handed to two holders would show as a second attempt; there is none.
func TestPostgresSeveralProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	if !pgtest.Available(t) {
		t.Skip("no PostgreSQL (LEDGER_TEST_POSTGRES_URL)")
	}
	url := pgtest.URL(t)
	schema := pgtest.NewSchema(t, url)
	backend, err := postgres.Open(context.Background(), url, postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	db, err := chain.OpenBackend(backend, chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rec, sink := newReceiver(t)
	env := []string{childPGURL + "=" + pgtest.URL(t), childPGSchema + "=" + schema, childSink + "=" + sink, childDelay + "=1", childLease + "=60000"}
	var cmds []*exec.Cmd
	for range 3 {
		cmds = append(cmds, startChild(t, env...))
	}
	const n = 300
	for i := range n {
		ordering := ""
		if i%4 == 0 {
			ordering = fmt.Sprintf("cust-%d", i%3)
		}
		enqueue(t, db, outbox.EnqueueRequest{Tenant: childTenant, Topic: childTopic, IdempotencyKey: fmt.Sprintf("m-%d", i), OrderingKey: ordering})
	}
	deadline := time.Now().Add(60 * time.Second)
	for delivered(rec, n) < n && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	for _, cmd := range cmds {
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("worker: %v", err)
		}
	}
	if repeats := checkDelivered(t, rec, n); repeats != 0 {
		t.Errorf("%d messages were delivered more than once with leases of a minute", repeats)
	}
	pids := map[string]bool{}
	rec.mu.Lock()
	for _, a := range rec.attempts {
		pids[a[0].pid] = true
	}
	rec.mu.Unlock()
	t.Logf("%d messages delivered by %d processes", n, len(pids))
	waitAllDone(t, db, n)
	mustCheck(t, db)
}
