package chain_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/chain/chaintest"
)

func int64Attr(s sdktrace.ReadOnlySpan, key string) (int64, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == attribute.Key(key) {
			return kv.Value.AsInt64(), true
		}
	}
	return 0, false
}

// Callers that share a group commit each get a span, a child of their own,
// carrying the same group id and the group's size; the transaction's
// context carries the span. A failed transaction's span is an error; an
// unsampled caller gets no span.
func TestTraceGroupCommit(t *testing.T) {
	db, tp, sr := chaintest.OpenTraced(t)
	tracer := tp.Tracer("test")

	release := blockCommitter(t, db)
	const callers = 8
	var started atomic.Int64
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, span := tracer.Start(context.Background(), "caller")
			defer span.End()
			started.Add(1)
			err := db.Update(ctx, func(tx *chain.Tx) error {
				if !trace.SpanContextFromContext(tx.Context()).IsValid() {
					t.Error("the transaction's context carries no span")
				}
				_, err := tx.Append(chain.Request{Chain: "c" + string(rune('a'+i)), Type: "t"})
				return err
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	waitQueued(&started, callers)
	release()
	wg.Wait()

	groups := map[int64][]sdktrace.ReadOnlySpan{}
	parents := map[string]bool{}
	for _, s := range sr.Ended() {
		if s.Name() == "caller" {
			parents[s.SpanContext().SpanID().String()] = true
		}
	}
	for _, s := range sr.Ended() {
		if s.Name() != "chain.transaction" {
			continue
		}
		if !parents[s.Parent().SpanID().String()] {
			t.Fatalf("transaction span %v is not a child of a caller's span", s.Parent().SpanID())
		}
		id, ok := int64Attr(s, "ledger.group_commit.id")
		if !ok {
			t.Fatalf("transaction span without a group: %v", s.Attributes())
		}
		groups[id] = append(groups[id], s)
	}
	total := 0
	shared := false
	for id, spans := range groups {
		for _, s := range spans {
			size, _ := int64Attr(s, "ledger.group_commit.size")
			commit, _ := int64Attr(s, "ledger.group_commit.commit_ns")
			if size < int64(len(spans)) || commit <= 0 {
				t.Fatalf("group %d: span says size %d, commit %d ns; %d traced callers shared it", id, size, commit, len(spans))
			}
		}
		total += len(spans)
		shared = shared || len(spans) > 1
	}
	if total != callers || !shared {
		t.Fatalf("%d transaction spans in %d groups; want %d, some shared", total, len(groups), callers)
	}

	// A failed transaction: an error span. An unsampled caller: none.
	refused := errors.New("refused")
	ctx, span := tracer.Start(context.Background(), "failing")
	if err := db.Update(ctx, func(tx *chain.Tx) error { return refused }); !errors.Is(err, refused) {
		t.Fatal(err)
	}
	span.End()
	before := len(sr.Ended())
	off := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()), sdktrace.WithSpanProcessor(sr))
	octx, ospan := off.Tracer("test").Start(context.Background(), "unsampled")
	if _, err := db.Append(octx, chain.Request{Chain: "u", Type: "t"}); err != nil {
		t.Fatal(err)
	}
	ospan.End()
	ended := sr.Ended()
	failing := ended[before-2] // the failing transaction's span ends before its caller's
	if failing.Name() != "chain.transaction" || failing.Status().Code != codes.Error {
		t.Fatalf("failed transaction span %q status %v", failing.Name(), failing.Status())
	}
	if len(ended) != before {
		t.Fatalf("an unsampled caller made %d spans", len(ended)-before)
	}
}
