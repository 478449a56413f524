package reliability

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/internal/testbin"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// Cluster test parameters. LEDGER_CLUSTER_ROUNDS sets the kill events of
// a long run (`LEDGER_CLUSTER_ROUNDS=100 go test ./reliability -run
// Cluster`); the default is a short run for CI.
const (
	clusterRoundsEnv     = "LEDGER_CLUSTER_ROUNDS"
	clusterRoundsDefault = 6
	clusterServers       = 3
	clusterClients       = 8
	clusterLease         = 5 * time.Second
	clusterJobsInterval  = time.Second
	clusterIntentTimeout = 90 * time.Second  // an intent not answered by then is lost
	clusterDeliveryWait  = 120 * time.Second // outbox leases of killed servers end in 30 s
	clusterItems         = 2
)

// Kinds of intent: a raw append, and a purchase receipt, whose stock,
// valuation, journal entries and outbox message commit in one transaction.
const (
	intentAppend = iota
	intentReceipt
)

// intent is one submit of a client: its key and body are the same on
// every attempt, whichever server it goes to.
type intent struct {
	kind int
	key  string
	path string
	body []byte
	// The first 2xx answer, and how long the intent took to get it.
	status int
	answer []byte
	took   time.Duration
}

// cluster is N `ledgerctl serve` on one PostgreSQL ledger, restarted
// when killed.
type cluster struct {
	t       *testing.T
	l       *pgLedger
	dbURL   string // l.url, naming the servers' sessions
	flags   []string
	mu      sync.Mutex
	servers []*testbin.Served
	all     []*testbin.Served // every server started, for their logs
	http    *http.Client
}

// url returns the address of a random server.
func (c *cluster) url() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.servers[rand.IntN(len(c.servers))].URL
}

// restart kills server i with SIGKILL and starts another in its place.
func (c *cluster) restart(i int) error {
	c.mu.Lock()
	old := c.servers[i]
	c.mu.Unlock()
	old.Kill()
	s, err := startServer(c.dbURL, c.flags...)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.servers[i] = s
	c.all = append(c.all, s)
	c.mu.Unlock()
	return nil
}

// failures returns the causes the servers logged of the requests they
// answered 500, at most n.
func (c *cluster) failures(n int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var lines []string
	for _, s := range c.all {
		out := strings.Split(s.Output(), "\n")
		failed := map[string]bool{} // request ids answered 500
		for _, line := range out {
			if strings.Contains(line, "msg=\"http request\"") && strings.Contains(line, " status=500 ") {
				if _, rest, ok := strings.Cut(line, "request_id="); ok {
					id, _, _ := strings.Cut(rest, " ")
					failed[id] = true
				}
			}
		}
		for _, line := range out {
			if _, rest, ok := strings.Cut(line, "request_id="); ok && strings.Contains(line, "request failed") && len(lines) < n {
				if id, _, _ := strings.Cut(rest, " "); failed[id] {
					lines = append(lines, line)
				}
			}
		}
	}
	return lines
}

// Several `ledgerctl serve` share one PostgreSQL while servers are killed
// (SIGKILL) and their database sessions terminated (pg_terminate_backend),
// and clients retry every intent with its key against random servers.
// Afterwards: every intent answered 2xx (none lost), every entry written
// once, every replay byte-identical, every outbox message delivered, no
// key left PROCESSING, and the ledger verifies.
func TestClusterSurvivesKillsAndTerminatedSessions(t *testing.T) {
	rounds := clusterRoundsDefault
	if v := os.Getenv(clusterRoundsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number of kill events", clusterRoundsEnv, v)
		}
		rounds = n
	}
	l := newPGLedger(t)
	app := "ledgercluster" + strconv.FormatInt(time.Now().UnixNano(), 36) // the sessions pg_terminate_backend ends
	receiver := newReceiver(t)
	config := filepath.Join(t.TempDir(), "serve.json")
	secret := make([]byte, 32)
	_, _ = crand.Read(secret)
	cfg := fmt.Sprintf(`{"deliveries":[{"tenant":"acme","topic":%q,"url":%q,"secret":"whsec_%s","concurrency":4,"timeout":"5s","allow_private_addresses":true}]}`,
		api.TopicDefault, receiver.URL, base64.StdEncoding.EncodeToString(secret))
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	testbin.Ledgerctl(t)
	c := &cluster{t: t, l: l, dbURL: l.url + "&application_name=" + app, http: &http.Client{Timeout: 30 * time.Second},
		flags: []string{"--config", config, "--idempotency-lease", clusterLease.String(), "--jobs-interval", clusterJobsInterval.String()}}
	for range clusterServers {
		c.servers = append(c.servers, mustStartServer(t, c.dbURL, c.flags...))
	}
	c.all = append(c.all, c.servers...)
	t.Cleanup(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, s := range c.servers {
			s.Kill()
		}
	})
	c.fixture()

	// Load: clients submit intents until the chaos is over.
	var (
		stop      atomic.Bool
		wg        sync.WaitGroup
		intentsMu sync.Mutex
		intents   []*intent
		lost      []string
		answers   sync.Map // status -> *atomic.Int64, every attempt's answer
	)
	for w := range clusterClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; !stop.Load(); n++ {
				in := newIntent(w, n)
				if err := c.submit(in, &answers); err != nil {
					intentsMu.Lock()
					lost = append(lost, err.Error())
					intentsMu.Unlock()
					continue
				}
				intentsMu.Lock()
				intents = append(intents, in)
				intentsMu.Unlock()
			}
		}()
	}

	// Chaos: kill events, alternately a server's SIGKILL (and restart) and
	// the termination of every session of the servers.
	kills, terminations := 0, 0
	for i := range rounds {
		time.Sleep(time.Duration(200+rand.IntN(600)) * time.Millisecond)
		if i%2 == 0 {
			if err := c.restart(rand.IntN(clusterServers)); err != nil {
				stop.Store(true)
				wg.Wait()
				t.Fatal(err)
			}
			kills++
			continue
		}
		n, err := terminateSessions(l, app)
		if err != nil {
			t.Errorf("pg_terminate_backend: %v", err)
		}
		if n > 0 {
			terminations++
		}
	}
	time.Sleep(time.Second) // the last event's retries
	stop.Store(true)
	wg.Wait()
	t.Logf("%d kill events (%d SIGKILLs, %d rounds of pg_terminate_backend), %d intents answered", kills+terminations, kills, terminations, len(intents))
	answers.Range(func(k, v any) bool {
		t.Logf("attempts answered %v: %d", k, v.(*atomic.Int64).Load())
		return true
	})
	if len(lost) > 0 {
		t.Fatalf("%d intents lost, the first: %s", len(lost), lost[0])
	}
	if len(intents) == 0 {
		t.Fatal("no intent answered")
	}
	var longest time.Duration
	for _, in := range intents {
		longest = max(longest, in.took)
	}
	t.Logf("the longest intent took %v (servers' lease %v)", longest.Round(time.Millisecond), clusterLease)
	if v, ok := answers.Load(http.StatusInternalServerError); ok {
		t.Errorf("%d attempts answered 500: a store failure must be 503; the servers logged:\n%s", v.(*atomic.Int64).Load(),
			strings.Join(c.failures(10), "\n"))
	}
	c.checkWrittenOnce(intents)
	c.checkReplays(intents)
	c.checkDelivered(intents, receiver)
	c.checkNoProcessing()
	if r := runLedgerctl(t, nil, "--db", l.url, "verify"); r.exitCode != 0 {
		t.Fatalf("verify: exit %d\n%s%s", r.exitCode, r.stdout, r.stderr)
	}
}

// newIntent is client w's intent n: a raw append to one of eight chains,
// or a purchase receipt of one of the items.
func newIntent(w, n int) *intent {
	in := &intent{key: fmt.Sprintf("c%d-%d-%x", w, n, rand.Uint32())}
	if n%3 == 2 {
		in.kind, in.path = intentReceipt, "/v1/purchase-receipts"
		in.body, _ = json.Marshal(api.PurchaseReceiptRequest{Item: fmt.Sprint("SKU-", n%clusterItems), Location: "WH-1",
			Quantity: "1", UnitCost: "2.50", Date: "2026-11-02", InventoryAccount: "1400", CreditAccount: "2100", Reference: in.key})
		return in
	}
	in.kind, in.path = intentAppend, fmt.Sprintf("/v1/chains/load/%d/entries", (w+n)%8)
	in.body, _ = json.Marshal(api.AppendRequest{Type: "load/v1", Payload: []byte(in.key)})
	return in
}

// fixture defines the items, location, book and accounts the receipts
// name.
func (c *cluster) fixture() {
	c.t.Helper()
	steps := []struct {
		path string
		body any
	}{
		{"/v1/stock/locations", api.StockLocationRequest{ID: "WH-1"}},
		{"/v1/fin/books/main/currencies", api.FinCurrencyRequest{Code: "EUR", Exponent: 2}},
		{"/v1/fin/books/main/accounts", api.FinAccountRequest{Code: "1400", Name: "Inventory", Type: "asset"}},
		{"/v1/fin/books/main/accounts", api.FinAccountRequest{Code: "2100", Name: "Goods received not invoiced", Type: "liability"}},
	}
	for i := range clusterItems {
		id := fmt.Sprint("SKU-", i)
		steps = append(steps, struct {
			path string
			body any
		}{"/v1/stock/items", api.StockItemRequest{ID: id, Name: id}}, struct {
			path string
			body any
		}{"/v1/val/items", api.ValItemRequest{ID: id, Method: "moving_average", Currency: "EUR", MinorUnit: 2}})
	}
	for i, st := range steps {
		body, _ := json.Marshal(st.body)
		status, answer, _, err := c.post(c.url(), st.path, fmt.Sprint("fixture-", i), body)
		if err != nil || status >= 300 {
			c.t.Fatalf("fixture %s: %d %s %v", st.path, status, answer, err)
		}
	}
}

// post sends one attempt and returns its status, body and Retry-After.
func (c *cluster) post(url, path, key string, body []byte) (int, []byte, time.Duration, error) {
	req, err := http.NewRequest(http.MethodPost, url+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.l.token)
	req.Header.Set("Content-Type", api.MediaJSON)
	req.Header.Set(api.HeaderIdempotencyKey, key)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, 0, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, 0, err
	}
	retryAfter, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	return resp.StatusCode, answer, time.Duration(retryAfter) * time.Second, nil
}

// submit sends in, with its key, to random servers until one answers 2xx
// or a final answer; an outage (no answer, 503), a key in progress (409
// REQUEST_IN_PROGRESS) or a 500 is retried.
func (c *cluster) submit(in *intent, answers *sync.Map) error {
	start := time.Now()
	deadline := start.Add(clusterIntentTimeout)
	for attempt := 1; ; attempt++ {
		status, answer, retryAfter, err := c.post(c.url(), in.path, in.key, in.body)
		v, _ := answers.LoadOrStore(status, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
		switch {
		case err == nil && status >= 200 && status < 300:
			in.status, in.answer, in.took = status, answer, time.Since(start)
			return nil
		case err == nil && status != http.StatusServiceUnavailable && status != http.StatusInternalServerError &&
			!(status == http.StatusConflict && strings.Contains(string(answer), api.CodeInProgress)):
			return fmt.Errorf("intent %s: final answer %d %s after %d attempts", in.key, status, answer, attempt)
		case time.Now().After(deadline):
			return fmt.Errorf("intent %s: no answer within %v (%d attempts; last %d %s %v)", in.key, clusterIntentTimeout, attempt, status, answer, err)
		}
		wait := time.Duration(20+rand.IntN(100)) * time.Millisecond
		time.Sleep(max(wait, min(retryAfter, time.Second))) // a random server may hold it no more
	}
}

// terminateSessions ends every database session of the servers.
func terminateSessions(l *pgLedger, app string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgtest.Connect(ctx, l.url)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1 AND pid <> pg_backend_pid()`, app).Scan(&n)
	return n, err
}

// checkWrittenOnce: the ledger holds each append's key once, and one
// entry per acknowledged append.
func (c *cluster) checkWrittenOnce(intents []*intent) {
	c.t.Helper()
	conn := c.l.conn(c.t)
	ctx := context.Background()
	var doubled int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM (SELECT idempotency_key FROM entries WHERE idempotency_key IS NOT NULL
		GROUP BY chain_id, idempotency_key HAVING count(*) > 1) d`).Scan(&doubled); err != nil {
		c.t.Fatal(err)
	}
	var loadEntries, receipts int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM entries WHERE chain_id LIKE 'acme/load/%'`).Scan(&loadEntries); err != nil {
		c.t.Fatal(err)
	}
	appends := 0
	for _, in := range intents {
		if in.kind == intentAppend {
			appends++
		} else {
			receipts++
		}
	}
	if doubled != 0 || loadEntries < appends {
		c.t.Fatalf("%d keys written twice; %d load entries for %d acknowledged appends", doubled, loadEntries, appends)
	}
	// Appends sent but not acknowledged when the load stopped do not
	// exist: every client waits for its answer before its next intent.
	if loadEntries != appends {
		c.t.Fatalf("%d load entries for %d acknowledged appends", loadEntries, appends)
	}
	c.t.Logf("%d appends and %d purchase receipts, each written once", appends, receipts)
}

// checkReplays: a retry of every intent, on a random server, is its first
// answer byte for byte.
func (c *cluster) checkReplays(intents []*intent) {
	c.t.Helper()
	for _, in := range intents {
		status, answer, _, err := c.post(c.url(), in.path, in.key, in.body)
		if err != nil || status != in.status || !bytes.Equal(answer, in.answer) {
			c.t.Fatalf("replay of %s: %d %s %v, first answer %d %s", in.key, status, answer, err, in.status, in.answer)
		}
	}
}

// checkDelivered: the receiver got every acknowledged receipt's message,
// and nothing else.
func (c *cluster) checkDelivered(intents []*intent, r *receiver) {
	c.t.Helper()
	want := map[string]bool{}
	for _, in := range intents {
		if in.kind != intentReceipt {
			continue
		}
		var ev api.BusinessEvent
		if err := json.Unmarshal(in.answer, &ev); err != nil || ev.Message.Key == "" {
			c.t.Fatalf("receipt %s answered %s: %v", in.key, in.answer, err)
		}
		want[ev.Message.Key] = true
	}
	for deadline := time.Now().Add(clusterDeliveryWait); ; time.Sleep(200 * time.Millisecond) {
		got, deliveries := r.keys()
		missing := 0
		for k := range want {
			if !got[k] {
				missing++
			}
		}
		if missing == 0 {
			if len(got) != len(want) {
				c.t.Fatalf("%d messages delivered, %d receipts acknowledged", len(got), len(want))
			}
			c.t.Logf("%d messages delivered (%d deliveries)", len(want), deliveries)
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%d of %d messages not delivered after %v", missing, len(want), clusterDeliveryWait)
		}
	}
}

// checkNoProcessing: once the lease and a jobs interval have passed, no
// key is PROCESSING.
func (c *cluster) checkNoProcessing() {
	c.t.Helper()
	time.Sleep(clusterLease + 2*clusterJobsInterval)
	var n int
	if err := c.l.conn(c.t).QueryRow(context.Background(), `SELECT count(*) FROM idempotency_records WHERE status = 'PROCESSING'`).Scan(&n); err != nil {
		c.t.Fatal(err)
	}
	if n != 0 {
		c.t.Fatalf("%d keys PROCESSING after their lease and the recovery", n)
	}
}

// receiver is the webhook endpoint of the delivered topic: it counts the
// deliveries of each message key.
type receiver struct {
	*httptest.Server
	mu  sync.Mutex
	got map[string]int
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{got: map[string]int{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		r.mu.Lock()
		r.got[req.Header.Get("Idempotency-Key")]++
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.Close)
	return r
}

// keys returns the message keys received, and the deliveries in all.
func (r *receiver) keys() (map[string]bool, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := make(map[string]bool, len(r.got))
	n := 0
	for k, c := range r.got {
		keys[k] = true
		n += c
	}
	return keys, n
}
