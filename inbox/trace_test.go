package inbox_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/ledgerworks/ledger/chain/chaintest"
	"github.com/ledgerworks/ledger/inbox"
	"github.com/ledgerworks/ledger/outbox/signature"
)

// Under a request's span, the handler's verification is a span with its
// verdict, and the receipt a span under the ledger transaction's, with
// whether it was a duplicate; a refused signature records nothing but
// its verify span.
func TestTraceVerifyAndRecord(t *testing.T) {
	db, tp, sr := chaintest.OpenTraced(t)
	h, err := inbox.NewHandler(inbox.HandlerOptions{DB: db, Tenant: "acme", Provider: "gh", Verifier: inbox.GitHub{Secrets: []string{"s"}},
		Apply: applyEffect, Clock: func() time.Time { return now }, TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, span := tp.Tracer("test").Start(r.Context(), "request")
		defer span.End()
		h.ServeHTTP(w, r.WithContext(ctx))
	}))
	defer srv.Close()
	body := []byte(`{"action":"opened"}`)
	send := func(sig string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
		req.Header.Set("X-GitHub-Delivery", "d-1")
		req.Header.Set("X-Hub-Signature-256", sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	good := signature.SignGitHub([]byte("s"), body)
	send(good)
	send(good)
	send(signature.SignGitHub([]byte("wrong"), body))

	attrs := func(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
		m := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			m[kv.Key] = kv.Value
		}
		return m
	}
	byID := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range sr.Ended() {
		byID[s.SpanContext().SpanID().String()] = s
	}
	var verdicts []string
	var duplicates []bool
	for _, s := range sr.Ended() {
		a := attrs(s)
		switch s.Name() {
		case "inbox.verify":
			if p := byID[s.Parent().SpanID().String()]; p == nil || p.Name() != "request" || a["inbox.provider"].AsString() != "gh" {
				t.Fatalf("verify span %v under %v", a, s.Parent())
			}
			verdicts = append(verdicts, a["inbox.verdict"].AsString())
			if a["inbox.verdict"].AsString() == "bad_signature" && s.Status().Code != codes.Error {
				t.Fatalf("refused signature's span status %v", s.Status())
			}
		case "inbox.record":
			if p := byID[s.Parent().SpanID().String()]; p == nil || p.Name() != "chain.transaction" || a["inbox.event_id"].AsString() != "d-1" {
				t.Fatalf("record span %v under %v", a, s.Parent())
			}
			duplicates = append(duplicates, a["inbox.duplicate"].AsBool())
		}
	}
	if len(verdicts) != 3 || verdicts[0] != "valid" || verdicts[1] != "valid" || verdicts[2] != "bad_signature" {
		t.Fatalf("verdicts %v", verdicts)
	}
	if len(duplicates) != 2 || duplicates[0] || !duplicates[1] {
		t.Fatalf("duplicates %v, want a receipt then a duplicate", duplicates)
	}
}
