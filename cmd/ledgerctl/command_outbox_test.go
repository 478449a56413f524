package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/outbox"
)

const outboxTestSecret = "whsec_Y2xpLXRlc3Qtc2VjcmV0"

// runConcurrent is run with a clock that the worker's goroutines may read
// at once.
func (l *testLedger) runConcurrent(args ...string) cliResult {
	l.t.Helper()
	var mu sync.Mutex
	a := &app{
		clock: func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			now := l.next
			l.next = l.next.Add(time.Millisecond)
			return now
		},
		environment: func(string) string { return "" },
	}
	var stdout, stderr bytes.Buffer
	code := execute(context.Background(), a, append([]string{"--db", l.name}, args...), strings.NewReader(""), &stdout, &stderr)
	return cliResult{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

func (l *testLedger) outboxJSON(value any, args ...string) {
	l.t.Helper()
	out := l.must(append([]string{"-o", "json", "outbox", "--tenant", "acme"}, args...)...)
	if err := json.Unmarshal([]byte(out), value); err != nil {
		l.t.Fatalf("outbox %v: %v in %q", args, err, out)
	}
}

func TestOutboxCommands(t *testing.T) {
	for _, l := range testLedgers(t) {
		t.Run(l.backend, func(t *testing.T) {
			l.t = t
			l.must("init")
			a := &app{database: l.name, lockTimeout: time.Second, clock: func() time.Time { return clockStart }}
			db, err := a.openDB(context.Background(), false)
			if err != nil {
				t.Fatal(err)
			}
			var ids []outbox.ID
			for _, key := range []string{"inv-1", "inv-2", "inv-404"} {
				res, err := outbox.Enqueue(context.Background(), db, outbox.EnqueueRequest{Tenant: "acme", Topic: "invoices",
					IdempotencyKey: key, Payload: []byte(`{"invoice":"` + key + `"}`)})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, res.ID)
			}
			db.Close()

			var list outboxListJSON
			l.outboxJSON(&list, "list")
			if len(list.Messages) != 3 || list.Messages[0].Status != "pending" || list.Messages[0].Key != "outbox:"+ids[0].String() {
				t.Fatalf("list %+v", list)
			}
			var got sync.Map
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got.Store(r.Header.Get("Idempotency-Key"), true)
				if r.Header.Get("Idempotency-Key") == "outbox:"+ids[2].String() {
					http.Error(w, "no such customer", http.StatusNotFound)
					return
				}
				w.WriteHeader(http.StatusAccepted)
			}))
			defer srv.Close()
			r := l.runConcurrent("-o", "json", "outbox", "--tenant", "acme", "work", "--webhook", "invoices="+srv.URL, "--secret", outboxTestSecret,
				"--until-idle", "--worker", "cli-worker", "--allow-private-addresses")
			if r.code != 0 {
				t.Fatalf("work: exit %d: %s", r.code, r.stderr)
			}
			var work outboxWorkJSON
			if err := json.Unmarshal([]byte(r.stdout), &work); err != nil || work.Delivered != 2 || work.Dead != 1 || work.Worker != "cli-worker" {
				t.Fatalf("work %q %v", r.stdout, err)
			}
			var dead outboxListJSON
			l.outboxJSON(&dead, "dead")
			if len(dead.Messages) != 1 || dead.Messages[0].ID != ids[2].String() {
				t.Fatalf("dead %+v", dead)
			}
			var show outboxShowJSON
			l.outboxJSON(&show, "show", ids[2].String())
			if len(show.History) != 3 || show.History[0].Worker != "cli-worker" || show.History[1].Outcome != "rejected" ||
				!strings.Contains(show.History[1].Detail, "HTTP 404 no such customer") || show.History[2].DeadReason != "rejected" {
				t.Fatalf("show %+v", show)
			}
			text := l.must("outbox", "--tenant", "acme", "show", "outbox:"+ids[2].String())
			for _, part := range []string{"lease: attempt 1 leased to cli-worker", "rejected after", "dead: rejected"} {
				if !strings.Contains(text, part) {
					t.Fatalf("show text lacks %q:\n%s", part, text)
				}
			}
			// Loopback needs the allowance; a timeout needs a lease that
			// covers it.
			l.run("outbox", "--tenant", "acme", "work", "--webhook", "invoices="+srv.URL, "--secret", outboxTestSecret, "--until-idle").
				expect(t, exitUsage, "address refused")
			l.run("outbox", "--tenant", "acme", "work", "--webhook", "invoices="+srv.URL, "--secret", outboxTestSecret, "--until-idle",
				"--allow-private-addresses", "--timeout", "40s", "--lease", "30s").expect(t, exitUsage, "needs a lease of at least 1m0s")
			l.run("outbox", "--tenant", "acme", "requeue", ids[2].String()).expect(t, exitUsage, "--operator is required")
			l.run("outbox", "--tenant", "acme", "requeue", ids[0].String(), "--operator", "ops").expect(t, exitUsage, "not dead")
			l.run("outbox", "--tenant", "acme", "show", strings.Repeat("0", 32)).expect(t, exitNotFound, "no message")
			l.run("outbox", "--tenant", "acme", "show", "nope").expect(t, exitUsage, "not a message id")
			l.must("outbox", "--tenant", "acme", "requeue", ids[2].String(), "--operator", "ops@acme", "--reason", "customer created")
			var stats outboxStatsJSON
			l.outboxJSON(&stats, "stats")
			if len(stats.Topics) != 1 || stats.Topics[0].Done != 2 || stats.Topics[0].Pending != 1 || stats.Topics[0].Dead != 0 {
				t.Fatalf("stats %+v", stats)
			}
			l.outboxJSON(&show, "show", ids[2].String())
			if last := show.History[len(show.History)-1]; last.Type != outbox.TypeRequeue || last.Worker != "ops@acme" || last.Detail != "customer created" {
				t.Fatalf("requeue not recorded: %+v", last)
			}
			if out := l.must("verify"); !strings.HasPrefix(out, "intact") {
				t.Fatalf("verify: %s", out)
			}
			if out := l.must("rebuild-state", "--domain", "outbox"); !strings.Contains(out, "rebuilt outbox state") {
				t.Fatalf("rebuild-state: %s", out)
			}
			l.must("verify")
			// Stored state that the chains do not give is found by verify.
			db, err = a.openDB(context.Background(), false)
			if err != nil {
				t.Fatal(err)
			}
			err = db.Update(context.Background(), func(tx *chain.Tx) error { return tx.StatePut([]byte("outbox/acme/d/invoices/x"), []byte("x")) })
			db.Close()
			if err != nil {
				t.Fatal(err)
			}
			l.run("verify").expect(t, exitVerification, "")
			l.must("rebuild-state")
			l.must("verify")
		})
	}
}
