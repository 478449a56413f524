package server_test

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/outbox"
	"github.com/ledgerworks/ledger/outbox/signature"
	"github.com/ledgerworks/ledger/server"
)

// receiver is a webhook endpoint that records what it gets and answers
// with the status its answer function picks.
type receiver struct {
	mu     sync.Mutex
	keys   []string
	got    chan string
	answer func(n int) int
}

func newReceiver(t *testing.T, answer func(n int) int) (*receiver, string) {
	rc := &receiver{got: make(chan string, 100), answer: answer}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		rc.mu.Lock()
		rc.keys = append(rc.keys, r.Header.Get("Idempotency-Key"))
		n := len(rc.keys)
		rc.mu.Unlock()
		status := rc.answer(n)
		w.WriteHeader(status)
		if status < 300 {
			rc.got <- r.Header.Get("Idempotency-Key")
		}
	}))
	t.Cleanup(hs.Close)
	return rc, hs.URL
}

func (rc *receiver) wait(t *testing.T, within time.Duration) string {
	t.Helper()
	select {
	case k := <-rc.got:
		return k
	case <-time.After(within):
		t.Fatalf("no delivery within %v", within)
		return ""
	}
}

var whsec = "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))

// A lease held by a process that died is released when the server starts
// on the embedded ledger, so the message is delivered at once, not when the
// lease (an hour here) would have expired.
func TestOrphanLeasesReleasedAtStart(t *testing.T) {
	db := openBolt(t)
	first := startServer(t, db, server.Options{})
	token := first.key("acme", allScopes...)
	fixture(t, first, token) // one purchase receipt: one message on business-events
	err := db.Update(context.Background(), func(tx *chain.Tx) error {
		c, err := outbox.ClaimTx(tx, "acme", api.TopicDefault, outbox.ClaimOptions{Worker: "died", LeaseDuration: time.Hour})
		if err == nil && len(c.Leases) != 1 {
			t.Errorf("claimed %d", len(c.Leases))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	first.Close()

	// Without the release, the orphan waits for its lease.
	rc, url := newReceiver(t, func(int) int { return http.StatusOK })
	kept := startServer(t, db, server.Options{ReleaseOrphans: false,
		Deliveries: []server.Delivery{{Tenant: "acme", Topic: api.TopicDefault, URL: url, Secret: whsec, AllowPrivateAddresses: true}}})
	select {
	case <-rc.got:
		t.Fatal("delivered while another process's lease held the message")
	case <-time.After(time.Second):
	}
	kept.Close()

	ts := startServer(t, db, server.Options{ReleaseOrphans: true,
		Deliveries: []server.Delivery{{Tenant: "acme", Topic: api.TopicDefault, URL: url, Secret: whsec, AllowPrivateAddresses: true}}})
	key := rc.wait(t, 10*time.Second)
	var msgs api.OutboxMessageList
	deadline := time.Now().Add(10 * time.Second)
	for {
		ts.do(http.MethodGet, "/v1/outbox/messages?status=done", token, "", nil).decode(t, http.StatusOK, &msgs)
		if len(msgs.Messages) == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(msgs.Messages) != 1 || msgs.Messages[0].Key != key || msgs.Messages[0].Attempts != 2 {
		t.Fatalf("done %+v, delivered with key %q", msgs, key)
	}
}

// A message the receiver refuses is dead; an admin lists and requeues it
// over the API, and the next attempt delivers it.
func TestDeadLettersAndRequeue(t *testing.T) {
	db := openBolt(t)
	rc, url := newReceiver(t, func(n int) int {
		if n == 1 {
			return http.StatusBadRequest // permanent: dead at once
		}
		return http.StatusOK
	})
	ts := startServer(t, db, server.Options{Deliveries: []server.Delivery{{Tenant: "acme", Topic: api.TopicDefault, URL: url, Secret: whsec, AllowPrivateAddresses: true}}})
	token := ts.key("acme", allScopes...)
	fixture(t, ts, token)
	dead, ok := ts.deadLetters(t, token)
	if !ok {
		t.Fatal("no dead letter")
	}
	if dead.Messages[0].Payload == "" {
		t.Fatalf("dead letter without its payload: %+v", dead)
	}
	var req api.OutboxRequeueResponse
	ts.do(http.MethodPost, "/v1/outbox/requeue", token, "rq-1", api.OutboxRequeueRequest{IDs: []string{dead.Messages[0].ID}, Reason: "fixed"}).
		decode(t, http.StatusOK, &req)
	if len(req.Requeued) != 1 || req.Operator == "" {
		t.Fatalf("requeue %+v", req)
	}
	if key := rc.wait(t, 10*time.Second); key != dead.Messages[0].Key {
		t.Fatalf("delivered %q, want %q", key, dead.Messages[0].Key)
	}
	ts.do(http.MethodPost, "/v1/outbox/requeue", token, "rq-2", api.OutboxRequeueRequest{IDs: []string{dead.Messages[0].ID}}).
		wantProblem(t, http.StatusConflict, api.CodeNotDead)
	if m := scrape(t, ts); !strings.Contains(m, "outbox_attempts_total") {
		t.Fatalf("/metrics lacks the outbox's series")
	}
	var hist api.OutboxMessageHistory
	ts.do(http.MethodGet, "/v1/outbox/messages/"+dead.Messages[0].ID, token, "", nil).decode(t, http.StatusOK, &hist)
	types := map[string]int{}
	for _, ev := range hist.History {
		types[ev.Type]++
	}
	if hist.Message.ID != dead.Messages[0].ID || len(hist.History) < 5 || types[outbox.TypeRequeue] != 1 {
		t.Fatalf("history %+v (types %v): want two leases, two outcomes, a dead letter and a requeue", hist, types)
	}
	var stats api.OutboxStats
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ts.do(http.MethodGet, "/v1/outbox/stats", token, "", nil).decode(t, http.StatusOK, &stats)
		if len(stats.Topics) == 1 && stats.Topics[0].Done == 1 || time.Now().After(deadline) {
			break
		}
	}
	if len(stats.Topics) != 1 || stats.Topics[0].Done != 1 || stats.Topics[0].Dead != 0 {
		t.Fatalf("stats %+v", stats)
	}
}

// A webhook is verified before anything is written, recorded once per
// event id, and forwarded once through the outbox.
func TestWebhooks(t *testing.T) {
	db := openBolt(t)
	ts := startServer(t, db, server.Options{Providers: []server.Provider{{Name: "gh", Kind: server.ProviderGitHub,
		Tenant: "acme", Secrets: []string{"s3cret"}, Topic: "incoming"}}})
	token := ts.key("acme", allScopes...)
	send := func(id, body, sig string) response {
		req, _ := http.NewRequest(http.MethodPost, ts.url+"/v1/webhooks/gh", stringsReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Delivery", id)
		req.Header.Set("X-Hub-Signature-256", sig)
		resp, err := ts.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return response{status: resp.StatusCode, header: resp.Header, body: b}
	}
	body := `{"action":"opened"}`
	sig := signature.SignGitHub([]byte("s3cret"), []byte(body))
	before := ledgerSnapshot(t, ts)
	send("d-1", body, signature.SignGitHub([]byte("wrong"), []byte(body))).wantProblem(t, http.StatusUnauthorized, api.CodeBadSignature)
	send("d-1", body, "").wantProblem(t, http.StatusUnauthorized, api.CodeBadSignature)
	if diff := diffSnapshots(before, ledgerSnapshot(t, ts)); diff != "" {
		t.Fatalf("a refused signature wrote: %s", diff)
	}
	var rec api.WebhookReceipt
	send("d-1", body, sig).decode(t, http.StatusOK, &rec)
	if rec.Status != "received" || rec.Chain != "inbox/gh" || rec.Seq != 1 {
		t.Fatalf("receipt %+v", rec)
	}
	send("d-1", body, sig).decode(t, http.StatusOK, &rec)
	if rec.Status != "duplicate" || rec.Seq != 1 {
		t.Fatalf("redelivery %+v", rec)
	}
	other := `{"action":"closed"}`
	send("d-1", other, signature.SignGitHub([]byte("s3cret"), []byte(other))).wantProblem(t, http.StatusConflict, api.CodeEventIDReused)
	ts.do(http.MethodPost, "/v1/webhooks/nobody", "", "", body).wantProblem(t, http.StatusNotFound, api.CodeNotFound)
	var msgs api.OutboxMessageList
	ts.do(http.MethodGet, "/v1/outbox/messages?topic=incoming", token, "", nil).decode(t, http.StatusOK, &msgs)
	if len(msgs.Messages) != 1 {
		t.Fatalf("forwarded %+v", msgs)
	}
}

// A delivery's max_age dead-letters a message older than it, unattempted;
// a longer one delivers the same message.
func TestDeliveryMaxAge(t *testing.T) {
	db := openBolt(t)
	rc, url := newReceiver(t, func(int) int { return http.StatusOK })
	later := func() time.Time { return time.Now().Add(2 * time.Hour) }
	ts := startServer(t, db, server.Options{Clock: later,
		Deliveries: []server.Delivery{{Tenant: "acme", Topic: api.TopicDefault, URL: url, Secret: whsec, AllowPrivateAddresses: true, MaxAge: server.Duration(time.Hour)}}})
	token := ts.key("acme", allScopes...)
	fixture(t, ts, token)
	dead, ok := ts.deadLetters(t, token)
	if !ok {
		t.Fatal("no dead letter")
	}
	var hist api.OutboxMessageHistory
	ts.do(http.MethodGet, "/v1/outbox/messages/"+dead.Messages[0].ID, token, "", nil).decode(t, http.StatusOK, &hist)
	reasons := ""
	for _, ev := range hist.History {
		reasons += ev.DeadReason
	}
	if reasons != "max_age" {
		t.Fatalf("dead reasons %q, want max_age: %+v", reasons, hist)
	}
	select {
	case key := <-rc.got:
		t.Fatalf("a message past its max_age was delivered (%s)", key)
	default:
	}
	ts.Close()

	ts = startServer(t, db, server.Options{Clock: later,
		Deliveries: []server.Delivery{{Tenant: "acme", Topic: api.TopicDefault, URL: url, Secret: whsec, AllowPrivateAddresses: true, MaxAge: server.Duration(3 * time.Hour)}}})
	ts.do(http.MethodPost, "/v1/outbox/requeue", token, "rq-age", api.OutboxRequeueRequest{IDs: []string{dead.Messages[0].ID}}).
		decode(t, http.StatusOK, &api.OutboxRequeueResponse{})
	if key := rc.wait(t, 10*time.Second); key != dead.Messages[0].Key {
		t.Fatalf("delivered %q, want %q", key, dead.Messages[0].Key)
	}
}

// Negative delivery settings are refused when the server is built.
func TestDeliveryNegativeSettings(t *testing.T) {
	db := openBolt(t)
	for _, d := range []server.Delivery{{MaxAge: server.Duration(-time.Second)}, {MaxAttempts: -1}, {Concurrency: -1}, {Timeout: server.Duration(-time.Second)}} {
		d.Tenant, d.Topic, d.URL, d.Secret = "acme", api.TopicDefault, "http://127.0.0.1:1/hook", whsec
		if _, err := server.New(server.Options{DB: db, Deliveries: []server.Delivery{d}}); err == nil || !strings.Contains(err.Error(), "negative") {
			t.Errorf("%+v: got %v, want a refusal of the negative setting", d, err)
		}
	}
}
