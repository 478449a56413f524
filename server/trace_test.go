package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/chain/chaintest"
	"github.com/ledgerworks/ledger/server"
)

// The incoming trace context of the traced purchase receipt.
const (
	callerTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpanID  = "00f067aa0ba902b7"
)

// spansOf are the ended spans of one trace, by name.
func spansOf(sr *tracetest.SpanRecorder, traceID trace.TraceID) map[string][]sdktrace.ReadOnlySpan {
	out := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range sr.Ended() {
		if s.SpanContext().TraceID() == traceID {
			out[s.Name()] = append(out[s.Name()], s)
		}
	}
	return out
}

// one is the only span of a name, or fails.
func one(t *testing.T, spans map[string][]sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	if len(spans[name]) != 1 {
		names := []string{}
		for n, s := range spans {
			names = append(names, n+"×"+itoa(len(s)))
		}
		t.Fatalf("%d spans named %q; the trace holds %v", len(spans[name]), name, names)
	}
	return spans[name][0]
}

func attr(s sdktrace.ReadOnlySpan, key string) attribute.Value {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

func childOf(t *testing.T, child, parent sdktrace.ReadOnlySpan) {
	t.Helper()
	if child.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Fatalf("span %q has parent %s, want %q (%s)", child.Name(), child.Parent().SpanID(), parent.Name(), parent.SpanContext().SpanID())
	}
}

// A purchase receipt sent with a traceparent is one trace under the
// caller's span: the request, the guard's decision, the ledger
// transaction with its group commit, the outbox enqueue. Its webhook
// delivery is a trace of its own, linked to the enqueue, whose traceparent
// the receiver gets. The idempotency key is never recorded; a replay is a
// guard span with outcome replayed.
func TestTracePurchaseReceipt(t *testing.T) {
	db, tp, sr := chaintest.OpenTraced(t)

	parents := make(chan string, 10)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		parents <- r.Header.Get("Traceparent")
	}))
	t.Cleanup(hs.Close)
	ts := startServer(t, db, server.Options{TracerProvider: tp,
		Deliveries: []server.Delivery{{Tenant: "acme", Topic: api.TopicDefault, URL: hs.URL, Secret: whsec, AllowPrivateAddresses: true}}})
	token := ts.key("acme", allScopes...)
	fixture(t, ts, token) // one purchase receipt already: its message is delivered first
	select {
	case <-parents:
	case <-time.After(10 * time.Second):
		t.Fatal("the fixture's message was not delivered")
	}

	const secretKey = "receipt-key-that-must-not-leak"
	send := func() *http.Response {
		body, _ := json.Marshal(api.PurchaseReceiptRequest{Item: "SKU-1", Location: "WH-1", Quantity: "3", UnitCost: "8.25",
			Date: "2026-11-03", InventoryAccount: "1400", CreditAccount: "2100", Reference: "po-2"})
		req, _ := http.NewRequest(http.MethodPost, ts.url+"/v1/purchase-receipts", bytes.NewReader(body))
		req.Header.Set("Content-Type", api.MediaJSON)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set(api.HeaderIdempotencyKey, secretKey)
		req.Header.Set("Traceparent", "00-"+callerTraceID+"-"+callerSpanID+"-01")
		resp, err := ts.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	if resp := send(); resp.StatusCode != http.StatusCreated {
		t.Fatalf("purchase receipt: %d", resp.StatusCode)
	}
	var receiverParent string
	select {
	case receiverParent = <-parents:
	case <-time.After(10 * time.Second):
		t.Fatal("the receipt's message was not delivered")
	}

	traceID, _ := trace.TraceIDFromHex(callerTraceID)
	spans := spansOf(sr, traceID)
	req := one(t, spans, "POST /v1/purchase-receipts")
	if req.Parent().SpanID().String() != callerSpanID || !req.Parent().IsRemote() || req.SpanKind() != trace.SpanKindServer {
		t.Fatalf("request span's parent %v (remote %v), kind %v: want the caller's %s", req.Parent().SpanID(), req.Parent().IsRemote(), req.SpanKind(), callerSpanID)
	}
	if attr(req, "http.route").AsString() != "/v1/purchase-receipts" || attr(req, "http.response.status_code").AsInt64() != http.StatusCreated ||
		attr(req, "http.request.method").AsString() != http.MethodPost {
		t.Fatalf("request span attributes %v", req.Attributes())
	}
	guard := one(t, spans, "idempotency.guard")
	childOf(t, guard, req)
	if attr(guard, "idempotency.outcome").AsString() != "executed" || len(attr(guard, "idempotency.scope_digest").AsString()) != 32 {
		t.Fatalf("guard span attributes %v", guard.Attributes())
	}
	commit := one(t, spans, "chain.transaction")
	childOf(t, commit, guard)
	if attr(commit, "ledger.group_commit.size").AsInt64() < 1 || attr(commit, "ledger.group_commit.id").AsInt64() < 1 ||
		attr(commit, "ledger.group_commit.commit_ns").AsInt64() <= 0 || attr(commit, "ledger.group_commit.wait_ns").Type() != attribute.INT64 {
		t.Fatalf("transaction span attributes %v", commit.Attributes())
	}
	enqueue := one(t, spans, "outbox.enqueue "+api.TopicDefault)
	childOf(t, enqueue, commit)
	if attr(enqueue, "outbox.replayed").AsBool() || attr(enqueue, "messaging.message.id").AsString() == "" {
		t.Fatalf("enqueue span attributes %v", enqueue.Attributes())
	}
	for _, s := range sr.Ended() {
		for _, kv := range s.Attributes() {
			if strings.Contains(kv.Value.String(), secretKey) {
				t.Fatalf("span %q records the idempotency key in %s", s.Name(), kv.Key)
			}
		}
	}

	// The delivery: its own trace, linked to the enqueue.
	var delivery sdktrace.ReadOnlySpan
	for deadline := time.Now().Add(10 * time.Second); delivery == nil; time.Sleep(10 * time.Millisecond) {
		for _, s := range sr.Ended() {
			if s.Name() == "outbox.deliver "+api.TopicDefault && attr(s, "messaging.message.id") == attr(enqueue, "messaging.message.id") {
				delivery = s
			}
		}
		if delivery == nil && time.Now().After(deadline) {
			t.Fatal("no delivery span for the receipt's message")
		}
	}
	if delivery.SpanContext().TraceID() == traceID || delivery.Parent().IsValid() {
		t.Fatalf("the delivery span is not the root of its own trace: parent %v", delivery.Parent())
	}
	if links := delivery.Links(); len(links) != 1 || links[0].SpanContext.TraceID() != traceID ||
		links[0].SpanContext.SpanID() != enqueue.SpanContext().SpanID() {
		t.Fatalf("delivery links %+v, want the enqueue %v", delivery.Links(), enqueue.SpanContext())
	}
	if attr(delivery, "outbox.outcome").AsString() != "delivered" || attr(delivery, "outbox.attempt").AsInt64() != 1 ||
		attr(delivery, "http.response.status_code").AsInt64() != http.StatusOK || attr(delivery, "outbox.tenant").AsString() != "acme" {
		t.Fatalf("delivery span attributes %v", delivery.Attributes())
	}
	want := "00-" + delivery.SpanContext().TraceID().String() + "-" + delivery.SpanContext().SpanID().String() + "-01"
	if receiverParent != want {
		t.Fatalf("the webhook carried traceparent %q, want %q", receiverParent, want)
	}

	// A retry: the guard replays, nothing is committed.
	if resp := send(); resp.StatusCode != http.StatusCreated || resp.Header.Get(api.HeaderReplayed) != "true" {
		t.Fatalf("retry: %d, replayed %q", resp.StatusCode, resp.Header.Get(api.HeaderReplayed))
	}
	spans = spansOf(sr, traceID)
	if g := spans["idempotency.guard"]; len(g) != 2 || attr(g[1], "idempotency.outcome").AsString() != "replayed" ||
		attr(g[1], "idempotency.scope_digest") != attr(guard, "idempotency.scope_digest") {
		t.Fatalf("guard spans after the retry: %d", len(g))
	}
	if n := len(spans["chain.transaction"]); n != 1 {
		t.Fatalf("%d transactions after a replay, want 1", n)
	}
}
