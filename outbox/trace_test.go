package outbox

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/ledgerworks/ledger/chain"
)

const sampleTraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// A message without a trace context encodes exactly as before the field
// existed (the hashes of existing entries hold); one with it round-trips;
// a malformed one is refused.
func TestMessageTraceParentEncoding(t *testing.T) {
	m := messageEvent{OrderingKey: "k", NotBefore: 7, Headers: []Header{{"A", "1"}}, Payload: []byte("{}")}
	// The version-1 layout: version, lp(ordering key), i64, count, headers, lp(payload).
	want := []byte{1, 0, 0, 0, 1, 'k', 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0, 1, 'A', 0, 0, 0, 1, '1', 0, 0, 0, 2, '{', '}'}
	if got := m.encode(); !bytes.Equal(got, want) {
		t.Fatalf("untraced message encodes to %x, want %x", got, want)
	}
	m.TraceParent = sampleTraceParent
	b := m.encode()
	back, err := decodeMessage(b)
	if err != nil || back.TraceParent != sampleTraceParent || !bytes.Equal(back.encode(), b) {
		t.Fatalf("traced message decoded to %+v, %v", back, err)
	}
	for _, bad := range []string{"", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736x00f067aa0ba902b7-01", "garbage"} {
		e := newEncoder(64)
		e.str("k")
		e.i64(7)
		e.count(0)
		e.bytes([]byte("{}"))
		e.str(bad)
		if _, err := decodeMessage(e.result()); !errors.Is(err, errDecode) {
			t.Errorf("trace context %q: %v, want a decode error", bad, err)
		}
	}
}

// An enqueue under a recording span is a child span of it, and the message
// keeps its traceparent; a retry from another trace, or without one,
// replays the message; another message with the key still conflicts.
func TestEnqueueTraceContext(t *testing.T) {
	db, err := chain.Open(filepath.Join(t.TempDir(), "ledger.db"), chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	req := EnqueueRequest{Tenant: "acme", Topic: "email", IdempotencyKey: "inv-1", Payload: []byte("{}")}
	enqueue := func(ctx context.Context, r EnqueueRequest) (EnqueueResult, error) {
		var res EnqueueResult
		err := db.Update(ctx, func(tx *chain.Tx) error {
			var err error
			res, err = EnqueueTx(tx, r)
			return err
		})
		return res, err
	}
	ctx, parent := tp.Tracer("test").Start(context.Background(), "caller")
	res, err := enqueue(ctx, req)
	parent.End()
	if err != nil || res.Replayed {
		t.Fatalf("enqueue: %+v, %v", res, err)
	}
	var span sdktrace.ReadOnlySpan
	for _, s := range sr.Ended() {
		if s.Name() == "outbox.enqueue email" {
			span = s
		}
	}
	if span == nil || span.Parent().SpanID() != parent.SpanContext().SpanID() || span.SpanKind() != trace.SpanKindProducer {
		t.Fatalf("enqueue span %v", span)
	}
	if !hasAttr(span, "messaging.message.id", res.ID.String()) {
		t.Fatalf("enqueue span attributes %v", span.Attributes())
	}
	m, err := messageOf("acme", "email", &res.Entry)
	if err != nil {
		t.Fatal(err)
	}
	if sc := spanContextOf(m.TraceParent); sc.SpanID() != span.SpanContext().SpanID() || sc.TraceID() != span.SpanContext().TraceID() {
		t.Fatalf("stored traceparent %q, want the enqueue span %v", m.TraceParent, span.SpanContext())
	}

	other, otherSpan := tp.Tracer("test").Start(context.Background(), "retry")
	defer otherSpan.End()
	for name, ctx := range map[string]context.Context{"another trace": other, "no trace": context.Background()} {
		again, err := enqueue(ctx, req)
		if err != nil || !again.Replayed || again.Entry.Seq != res.Entry.Seq || again.Entry.Hash != res.Entry.Hash {
			t.Fatalf("retry from %s: %+v, %v; want a replay of seq %d", name, again, err, res.Entry.Seq)
		}
	}
	changed := req
	changed.Payload = []byte(`{"x":1}`)
	if _, err := enqueue(other, changed); !errors.Is(err, chain.ErrIdempotencyConflict) {
		t.Fatalf("another message with the key: %v, want a conflict", err)
	}

	// Untraced first, traced retry: a replay too, and the stored message
	// keeps no trace context.
	plain := req
	plain.IdempotencyKey = "inv-2"
	first, err := enqueue(context.Background(), plain)
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := messageOf("acme", "email", &first.Entry); m.TraceParent != "" {
		t.Fatalf("untraced enqueue stored %q", m.TraceParent)
	}
	if again, err := enqueue(other, plain); err != nil || !again.Replayed {
		t.Fatalf("traced retry of an untraced message: %+v, %v", again, err)
	}
}

func hasAttr(s sdktrace.ReadOnlySpan, key, value string) bool {
	for _, kv := range s.Attributes() {
		if kv.Key == attribute.Key(key) && kv.Value.AsString() == value {
			return true
		}
	}
	return false
}
