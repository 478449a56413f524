package postgres_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage/postgres"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// With a TracerProvider, the statements of a traced transaction are spans
// under the ledger's span or the caller's (pgx's tracer hook), each naming its operation
// and its parameterised text; an untraced transaction makes none.
func TestTraceStatements(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	backend := pgtest.OpenWith(t, postgres.Options{TracerProvider: tp})
	db, err := chain.OpenBackend(backend, chain.Options{TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Append(context.Background(), chain.Request{Chain: "untraced", IdempotencyKey: "k0", Type: "t"}); err != nil {
		t.Fatal(err)
	}
	for _, s := range sr.Ended() {
		t.Fatalf("an untraced append made span %q", s.Name())
	}
	ctx, parent := tp.Tracer("test").Start(context.Background(), "request")
	if _, err := db.Append(ctx, chain.Request{Chain: "traced", IdempotencyKey: "k1", Type: "t", Payload: []byte("secret-value")}); err != nil {
		t.Fatal(err)
	}
	parent.End()
	var appendSpan sdktrace.ReadOnlySpan
	for _, s := range sr.Ended() {
		if s.Name() == "chain.append" {
			appendSpan = s
		}
	}
	if appendSpan == nil {
		t.Fatal("no chain.append span")
	}
	statements := 0
	for _, s := range sr.Ended() {
		if !strings.HasPrefix(s.Name(), "postgres ") {
			continue
		}
		switch s.Parent().SpanID() {
		case appendSpan.SpanContext().SpanID(): // the committer's transaction
			statements++
		case parent.SpanContext().SpanID(): // the key's look-up before it queues
		default:
			t.Fatalf("statement span %q under %v, want the append's or the request's", s.Name(), s.Parent().SpanID())
		}
		attrs := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			attrs[kv.Key] = kv.Value
			if strings.Contains(kv.Value.String(), "secret-value") {
				t.Fatalf("statement span %q records an argument in %s", s.Name(), kv.Key)
			}
		}
		if attrs["db.system.name"].AsString() != "postgresql" || "postgres "+attrs["db.operation.name"].AsString() != s.Name() {
			t.Fatalf("statement span %q attributes %v", s.Name(), s.Attributes())
		}
	}
	if statements == 0 {
		t.Fatal("no statement span under the traced append")
	}
	db.Close()
}
