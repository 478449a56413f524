package outbox_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/inbox"
	"github.com/ledgerworks/ledger/outbox"
)

const webhookSecret = "whsec_d2ViaG9vay1zaWduaW5nLWtleQ=="

// The deliverer's requests are verified by the inbox's Standard Webhooks
// handler on a real server: a message redelivered after a lost answer is
// recorded once by the receiver, which dedupes on webhook-id.
func TestWebhookIntoInbox(t *testing.T) {
	sender := openBolt(t, tempLedger(t), nil)
	defer sender.Close()
	receiver := openBolt(t, tempLedger(t), nil)
	defer receiver.Close()
	var mu sync.Mutex
	applied := map[string]int{}
	h, err := inbox.NewHandler(inbox.HandlerOptions{DB: receiver, Tenant: "partner", Provider: "acme",
		Verifier: inbox.StandardWebhooks{Secrets: []string{webhookSecret}},
		Apply: func(tx *chain.Tx, e inbox.Event) error {
			mu.Lock()
			applied[e.ID]++
			mu.Unlock()
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	var calls sync.Map
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		n, _ := calls.LoadOrStore(key, new(int))
		*n.(*int)++
		if r.Header.Get("Webhook-Id") != key || r.Header.Get("X-Event") != "invoice.issued" {
			http.Error(w, "headers", http.StatusBadRequest)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if *n.(*int) == 1 {
			// The receiver recorded the event, but its answer is lost.
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	}))
	defer srv.Close()
	deliver, err := outbox.Webhook(outbox.WebhookOptions{URL: srv.URL, Secret: webhookSecret, Timeout: 2 * time.Second,
		AllowPrivateAddresses: true})
	if err != nil {
		t.Fatal(err)
	}
	res := enqueue(t, sender, outbox.EnqueueRequest{Tenant: "acme", Topic: "partner-hooks", IdempotencyKey: "inv-1",
		Headers: []outbox.Header{{Name: "X-Event", Value: "invoice.issued"}}, Payload: []byte(`{"invoice":"INV-1"}`)})
	startWorker(t, sender, outbox.WorkerOptions{Tenant: "acme", Topics: map[string]outbox.Topic{"partner-hooks": {Handler: deliver,
		Policy: outbox.Policy{BackoffMin: 5 * time.Millisecond, BackoffMax: 10 * time.Millisecond}}}})
	waitFor(t, func() bool {
		info, err := outbox.Get(context.Background(), sender, "acme", res.ID)
		return err == nil && info.Status == outbox.Done
	})
	mu.Lock()
	defer mu.Unlock()
	if len(applied) != 1 || applied[res.Key] != 1 {
		t.Fatalf("effects applied %v, want once under %s", applied, res.Key)
	}
	var details []string
	for ev, err := range outbox.History(context.Background(), sender, "acme", res.ID) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == outbox.TypeOutcome {
			details = append(details, ev.Outcome.String()+": "+ev.Detail)
		}
	}
	if len(details) != 2 || details[0] != "failed: HTTP 502" || details[1] != `delivered: HTTP 200 {"status":"duplicate"}` {
		t.Fatalf("recorded outcomes %q", details)
	}
}

func TestWebhookClassifiesAnswers(t *testing.T) {
	for code, want := range map[int]string{200: "delivered", 204: "delivered", 400: "permanent", 404: "permanent", 410: "permanent",
		408: "transient", 429: "transient", 500: "transient", 503: "transient", 301: "permanent", 302: "permanent", 307: "permanent"} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(code) }))
		deliver, err := outbox.Webhook(outbox.WebhookOptions{URL: srv.URL, Secret: webhookSecret, AllowPrivateAddresses: true})
		if err != nil {
			t.Fatal(err)
		}
		d := &outbox.Delivery{Lease: outbox.Lease{Message: outbox.Message{Key: "outbox:00", Payload: []byte("{}")}}}
		err = deliver(context.Background(), d)
		got := "delivered"
		switch {
		case errors.Is(err, outbox.ErrPermanent):
			got = "permanent"
		case err != nil:
			got = "transient"
		}
		if got != want {
			t.Errorf("HTTP %d: %s (%v), want %s", code, got, err, want)
		}
		srv.Close()
	}
	// A receiver slower than the timeout is a transient failure.
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { time.Sleep(200 * time.Millisecond) }))
	defer slow.Close()
	deliver, _ := outbox.Webhook(outbox.WebhookOptions{URL: slow.URL, Secret: webhookSecret, Timeout: 20 * time.Millisecond,
		AllowPrivateAddresses: true})
	if err := deliver(context.Background(), &outbox.Delivery{}); err == nil || errors.Is(err, outbox.ErrPermanent) {
		t.Fatalf("timeout: %v, want a transient error", err)
	}
	if _, err := outbox.Webhook(outbox.WebhookOptions{URL: "ftp://x", Secret: webhookSecret}); !errors.Is(err, outbox.ErrInvalidOptions) {
		t.Fatalf("bad URL: %v", err)
	}
}
