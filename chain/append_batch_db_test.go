package chain_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage"
)

// batchRequests returns n requests with keys, on two chains.
func batchRequests(prefix string, n int) []chain.Request {
	reqs := make([]chain.Request, n)
	for i := range reqs {
		reqs[i] = chain.Request{Chain: fmt.Sprintf("c%d", i%2), IdempotencyKey: fmt.Sprintf("%s-%d", prefix, i),
			Type: "stock/moved", Payload: fmt.Appendf(nil, `{"line":%d}`, i)}
	}
	return reqs
}

// TestDBAppendBatchRetriedWithoutTheWriter appends a batch, then retries
// it while an Update holds the writer: the retry is answered, with the
// original entries as replays, before the Update ends, and writes nothing.
func TestDBAppendBatchRetriedWithoutTheWriter(t *testing.T) {
	metrics := &countingMetrics{}
	forEachBackend(t, chain.Options{Metrics: metrics}, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		reqs := batchRequests("k", 300)
		first, err := db.AppendBatch(ctx, reqs, nil)
		if err != nil || len(first) != len(reqs) {
			t.Fatalf("first AppendBatch: %d results, %v", len(first), err)
		}
		for i, res := range first {
			if res.Replayed || res.Entry.IdempotencyKey != reqs[i].IdempotencyKey {
				t.Fatalf("result %d of the first batch: %+v", i, res)
			}
		}
		before := takeSnapshot(t, db)
		replaysBefore := metrics.replays.Load()

		entered, release := make(chan struct{}), make(chan struct{})
		updated := make(chan error, 1)
		go func() {
			updated <- db.Update(ctx, func(tx *chain.Tx) error {
				close(entered)
				<-release
				return nil
			})
		}()
		<-entered
		type answer struct {
			results []chain.Result
			err     error
		}
		answered := make(chan answer, 1)
		go func() {
			results, err := db.AppendBatch(ctx, reqs, nil)
			answered <- answer{results, err}
		}()
		var retry answer
		select {
		case retry = <-answered:
		case <-time.After(time.Minute):
			t.Fatal("the retried batch waited for the writer")
		}
		close(release)
		if err := <-updated; err != nil {
			t.Fatal(err)
		}
		if retry.err != nil {
			t.Fatal(retry.err)
		}
		for i := range first {
			first[i].Replayed = true
		}
		if diff := cmp.Diff(first, retry.results); diff != "" {
			t.Fatalf("retried batch (-want +got):\n%s", diff)
		}
		if got := metrics.replays.Load() - replaysBefore; got != int64(len(reqs)) {
			t.Fatalf("%d replays counted, want %d", got, len(reqs))
		}
		assertUnchanged(t, db, before)
	})
}

// TestDBAppendBatchRetriedWithNewRequests retries a batch with new
// requests among the old ones: the old ones are replays, the new ones are
// appended, in one transaction.
func TestDBAppendBatchRetriedWithNewRequests(t *testing.T) {
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		old := batchRequests("old", 10)
		if _, err := db.AppendBatch(ctx, old, nil); err != nil {
			t.Fatal(err)
		}
		fresh := batchRequests("new", 4)
		reqs := append(append([]chain.Request{}, old[:5]...), fresh...)
		reqs = append(reqs, old[5:]...)
		results, err := db.AppendBatch(ctx, reqs, nil)
		if err != nil || len(results) != len(reqs) {
			t.Fatalf("AppendBatch: %d results, %v", len(results), err)
		}
		for i, res := range results {
			isNew := i >= 5 && i < 9
			if res.Replayed == isNew || res.Entry.IdempotencyKey != reqs[i].IdempotencyKey {
				t.Fatalf("result %d: %+v, want new %v", i, res, isNew)
			}
		}
		for _, ch := range []string{"c0", "c1"} {
			head, err := db.Head(ctx, ch)
			if err != nil || head.Seq != 7 { // 5 old and 2 new entries a chain
				t.Fatalf("head of %s: %+v, %v, want seq 7", ch, head, err)
			}
		}
		assertVerifies(t, db)
	})
}

// TestDBAppendBatchConflictWritesNothing fails a batch on a key stored
// with another payload: first in the batch (answered without the writer),
// and after a new request (in the transaction). Neither writes anything,
// and the results given come back as they were.
func TestDBAppendBatchConflictWritesNothing(t *testing.T) {
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		stored := mustAppend(t, db, chain.Request{Chain: "c0", IdempotencyKey: "k", Type: "stock/moved", Payload: []byte("10")})
		changed := chain.Request{Chain: "c0", IdempotencyKey: "k", Type: "stock/moved", Payload: []byte("11")}
		for name, reqs := range map[string][]chain.Request{
			"conflict first":     {changed, batchRequests("a", 1)[0]},
			"conflict after new": {batchRequests("b", 1)[0], changed},
			"conflict after old": {{Chain: "c0", IdempotencyKey: "k", Type: "stock/moved", Payload: []byte("10")}, changed},
		} {
			before := takeSnapshot(t, db)
			given := []chain.Result{{Replayed: true}}
			results, err := db.AppendBatch(ctx, reqs, given)
			var conflict *chain.ConflictError
			if !errors.As(err, &conflict) || !errors.Is(err, chain.ErrIdempotencyConflict) || conflict.ExistingSeq != stored.Entry.Seq ||
				conflict.Expected != stored.Entry.Fingerprint() || conflict.Calculated != chain.Fingerprint(changed.Type, changed.Payload) {
				t.Fatalf("%s: %v, want a conflict with seq %d", name, err, stored.Entry.Seq)
			}
			if len(results) != 1 || !results[0].Replayed {
				t.Fatalf("%s: results %+v, want the one given", name, results)
			}
			assertUnchanged(t, db, before)
		}
	})
}

// TestDBAppendBatchInvalidWritesNothing refuses a batch with an invalid
// request before anything is read or written.
func TestDBAppendBatchInvalidWritesNothing(t *testing.T) {
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		reqs := batchRequests("k", 3)
		reqs[2].IdempotencyKey = string(make([]byte, chain.IdempotencyKeyLengthMax+1))
		before := takeSnapshot(t, db)
		results, err := db.AppendBatch(ctx, reqs, nil)
		assertInvalid(t, err, chain.ErrInvalidKey, "idempotency_key")
		if len(results) != 0 {
			t.Fatalf("results %+v after an invalid request", results)
		}
		assertUnchanged(t, db, before)
	})
}

// TestDBAppendBatchLargerThanOneRead retries a batch of more keys than one
// storage read takes (storage.ReadKeysMax), with and without keys missing
// at its end.
func TestDBAppendBatchLargerThanOneRead(t *testing.T) {
	if testing.Short() {
		t.Skip("appends over 4,000 entries")
	}
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		reqs := batchRequests("k", storage.ReadKeysMax+7)
		first, err := db.AppendBatch(ctx, reqs, nil)
		if err != nil {
			t.Fatal(err)
		}
		retry, err := db.AppendBatch(ctx, reqs, nil)
		if err != nil || len(retry) != len(reqs) {
			t.Fatalf("retry: %d results, %v", len(retry), err)
		}
		for i := range retry {
			if !retry[i].Replayed || retry[i].Entry.Seq != first[i].Entry.Seq || retry[i].Entry.Hash != first[i].Entry.Hash {
				t.Fatalf("result %d of the retry: %+v, want a replay of %+v", i, retry[i], first[i])
			}
		}
		more := append(reqs, batchRequests("more", 2)...)
		results, err := db.AppendBatch(ctx, more, nil)
		if err != nil || len(results) != len(more) || results[len(reqs)].Replayed || !results[len(reqs)-1].Replayed {
			t.Fatalf("retry with 2 new requests at its end: %d results, %v", len(results), err)
		}
	})
}

// TestDBAppendBatchEndedCallsWriteNothing calls AppendBatch with an ended
// context and on a closed ledger.
func TestDBAppendBatchEndedCallsWriteNothing(t *testing.T) {
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		reqs := batchRequests("k", 2)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := db.AppendBatch(ctx, reqs, nil); !errors.Is(err, context.Canceled) {
			t.Fatalf("AppendBatch with an ended context: %v", err)
		}
		if _, err := db.AppendBatch(context.Background(), reqs, nil); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		for _, batch := range [][]chain.Request{reqs, batchRequests("new", 2)} {
			if _, err := db.AppendBatch(context.Background(), batch, nil); !errors.Is(err, chain.ErrClosed) {
				t.Fatalf("AppendBatch after Close: %v, want ErrClosed", err)
			}
		}
	})
}
