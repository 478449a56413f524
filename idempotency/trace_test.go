package idempotency_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/ledgerworks/ledger/idempotency"
)

// Each guarded request is a span under the request's with its outcome —
// executed, replayed, conflict, in progress, failed — and the scope's
// digest, the same for every request of one scope; the key is never
// recorded. The handler runs within the guard's span.
func TestTraceGuardOutcomes(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	guard, err := idempotency.New(idempotency.Options{Store: idempotency.NewMemoryStore(), RequireKey: true, TracerProvider: tp,
		User: func(r *http.Request) (string, error) { return "alice", nil }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	inHandler := make(chan struct{})
	release := make(chan struct{})
	h := guard.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, span := tp.Tracer("test").Start(r.Context(), "handler")
		span.End()
		body, _ := io.ReadAll(r.Body)
		switch string(body) {
		case "slow":
			close(inHandler)
			<-release
		case "fail":
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, span := tp.Tracer("test").Start(r.Context(), "request")
		defer span.End()
		h.ServeHTTP(w, r.WithContext(ctx))
	}))
	defer srv.Close()
	send := func(key, body string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/pay", strings.NewReader(body))
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	const secret = "order-1187-secret-key"
	send(secret, "a")         // executed
	send(secret, "a")         // replayed
	send(secret, "b")         // conflict
	send("other-key", "fail") // failed_transient
	done := make(chan struct{})
	go func() { send("slow-key", "slow"); close(done) }()
	<-inHandler
	send("slow-key", "slow") // in_progress
	close(release)
	<-done

	want := []string{"executed", "replayed", "conflict", "failed_transient", "in_progress", "executed"}
	var got []string
	digests := map[string]bool{}
	byID := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range sr.Ended() {
		byID[s.SpanContext().SpanID().String()] = s
	}
	for _, s := range sr.Ended() {
		if s.Name() == "handler" {
			if p := byID[s.Parent().SpanID().String()]; p == nil || p.Name() != "idempotency.guard" {
				t.Fatalf("the handler's span is not under the guard's")
			}
		}
		if s.Name() != "idempotency.guard" {
			continue
		}
		if p := byID[s.Parent().SpanID().String()]; p == nil || p.Name() != "request" {
			t.Fatalf("guard span not under the request's")
		}
		for _, kv := range s.Attributes() {
			switch {
			case strings.Contains(kv.Value.String(), "secret-key"):
				t.Fatalf("the guard's span records the key in %s", kv.Key)
			case kv.Key == "idempotency.outcome":
				got = append(got, kv.Value.AsString())
			case kv.Key == "idempotency.scope_digest":
				digests[kv.Value.AsString()] = true
			}
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("outcomes %v, want %v", got, want)
	}
	if len(digests) != 3 { // three keys
		t.Fatalf("%d scope digests for three keys", len(digests))
	}
	if d := idempotency.ScopeDigest(idempotency.Scope{Operation: "POST /pay", User: "alice", Key: secret}); !digests[d] {
		t.Fatalf("ScopeDigest %s is not among the spans' %v", d, digests)
	}
}
