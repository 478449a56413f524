package chain_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/storagetest"
)

// wrongProber is a backend whose probe rules out every key, held or not:
// the worst a storage.KeyProber can do. The committer's own lookup must
// still answer every retry with its entry.
type wrongProber struct {
	storage.Backend
	probes atomic.Int64
}

func (w *wrongProber) MayHoldKey(chain, key string) bool {
	w.probes.Add(1)
	return false
}

// forEachWrongProber runs fn against every backend behind a wrongProber.
func forEachWrongProber(t *testing.T, opts chain.Options, fn func(t *testing.T, db *chain.DB, w *wrongProber)) {
	t.Helper()
	for _, f := range storagetest.Factories(t) {
		t.Run(f.Name, func(t *testing.T) {
			opts.Clock = testClock()
			w := &wrongProber{Backend: f.Open(t)}
			db, err := chain.OpenBackend(w, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			fn(t, db, w)
		})
	}
}

func TestWrongProbeStillReplays(t *testing.T) {
	metrics := &countingMetrics{}
	forEachWrongProber(t, chain.Options{Metrics: metrics}, func(t *testing.T, db *chain.DB, w *wrongProber) {
		req := chain.Request{Chain: "c", IdempotencyKey: "k", Type: "t/v1", Payload: []byte("p")}
		original := mustAppend(t, db, req)
		if original.Replayed || original.Entry.Seq != 1 {
			t.Fatalf("first append: %+v", original)
		}
		mustAppend(t, db, chain.Request{Chain: "c", IdempotencyKey: "other", Type: "t/v1", Payload: []byte("later")})
		before := takeSnapshot(t, db)
		probes, replays := w.probes.Load(), metrics.replays.Load()
		for range 3 {
			res := mustAppend(t, db, req)
			if !res.Replayed || !reflect.DeepEqual(res.Entry, original.Entry) {
				t.Fatalf("replay %+v, want %+v", res, original.Entry)
			}
		}
		if got := w.probes.Load() - probes; got != 3 {
			t.Fatalf("the probe was asked %d times, want 3", got)
		}
		if got := metrics.replays.Load() - replays; got != 3 {
			t.Fatalf("Metrics.Replayed called %d times, want 3", got)
		}
		assertUnchanged(t, db, before)

		_, err := db.Append(context.Background(), chain.Request{Chain: "c", IdempotencyKey: "k", Type: "t/v1", Payload: []byte("changed")})
		var conflict *chain.ConflictError
		if !errors.Is(err, chain.ErrIdempotencyConflict) || !errors.As(err, &conflict) || conflict.ExistingSeq != 1 {
			t.Fatalf("conflicting retry: %v, want ErrIdempotencyConflict at seq 1", err)
		}
		assertUnchanged(t, db, before)
		assertVerifies(t, db)
	})
}

// TestWrongProbeConcurrentRetries sends one request from many goroutines at
// once, each told by the probe that the key is new: exactly one entry is
// written and every caller gets it.
func TestWrongProbeConcurrentRetries(t *testing.T) {
	forEachWrongProber(t, chain.Options{}, func(t *testing.T, db *chain.DB, w *wrongProber) {
		const callers, rounds = 16, 5
		for round := range rounds {
			req := chain.Request{Chain: "c", IdempotencyKey: fmt.Sprintf("k%d", round), Type: "t/v1", Payload: []byte{byte(round)}}
			results := make([]chain.Result, callers)
			errs := make([]error, callers)
			var wg sync.WaitGroup
			for i := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					results[i], errs[i] = db.Append(context.Background(), req)
				}()
			}
			wg.Wait()
			fresh := 0
			for i, res := range results {
				if errs[i] != nil {
					t.Fatalf("caller %d: %v", i, errs[i])
				}
				if !res.Replayed {
					fresh++
				}
				if !reflect.DeepEqual(res.Entry, results[0].Entry) {
					t.Fatalf("caller %d got %+v, caller 0 %+v", i, res.Entry, results[0].Entry)
				}
			}
			if fresh != 1 || results[0].Entry.Seq != uint64(round+1) {
				t.Fatalf("round %d: %d callers appended, entry seq %d; want 1 and %d", round, fresh, results[0].Entry.Seq, round+1)
			}
		}
		head, err := db.Head(context.Background(), "c")
		if err != nil || head.Seq != rounds {
			t.Fatalf("head %+v %v, want seq %d", head, err, rounds)
		}
		assertVerifies(t, db)
	})
}

// readCounter counts the read transactions begun on a backend and what its
// probe answered.
type readCounter struct {
	storage.Backend
	prober       storage.KeyProber
	reads, maybe atomic.Int64
}

func (r *readCounter) Begin(ctx context.Context, writable bool) (storage.Tx, error) {
	if !writable {
		r.reads.Add(1)
	}
	return r.Backend.Begin(ctx, writable)
}

func (r *readCounter) MayHoldKey(chain, key string) bool {
	held := r.prober.MayHoldKey(chain, key)
	if held {
		r.maybe.Add(1)
	}
	return held
}

// TestProbeSkipsTheReadOfNewKeys checks that an append of a key the
// backend's probe rules out begins no read transaction, and that a retry
// (which the probe must not rule out) is answered by one, without a write.
func TestProbeSkipsTheReadOfNewKeys(t *testing.T) {
	for _, f := range storagetest.Factories(t) {
		t.Run(f.Name, func(t *testing.T) {
			backend := f.Open(t)
			prober, ok := backend.(storage.KeyProber)
			if !ok {
				t.Skipf("%T is not a storage.KeyProber", backend)
			}
			r := &readCounter{Backend: backend, prober: prober}
			metrics := &countingMetrics{}
			db, err := chain.OpenBackend(r, chain.Options{Clock: testClock(), Metrics: metrics})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			r.reads.Store(0) // Open reads the chains' trees once
			const keys = 50
			var requests []chain.Request
			for i := range keys {
				req := chain.Request{Chain: fmt.Sprintf("c%d", i%3), IdempotencyKey: fmt.Sprintf("k%d", i), Type: "t/v1", Payload: []byte{byte(i)}}
				requests = append(requests, req)
				if res := mustAppend(t, db, req); res.Replayed {
					t.Fatalf("new key %d replayed", i)
				}
			}
			if reads, maybe := r.reads.Load(), r.maybe.Load(); reads != maybe || maybe > keys/2 {
				t.Fatalf("%d new keys: %d read transactions for %d keys the probe did not rule out; want equal, and at most half", keys, reads, maybe)
			}
			reads, groups := r.reads.Load(), metrics.groups.Load()
			for i, req := range requests {
				if res := mustAppend(t, db, req); !res.Replayed {
					t.Fatalf("retry %d not replayed", i)
				}
			}
			if got := r.reads.Load() - reads; got != keys {
				t.Fatalf("%d retries began %d read transactions, want one each", keys, got)
			}
			if got := metrics.groups.Load(); got != groups {
				t.Fatalf("retries committed %d storage transactions, want none", got-groups)
			}
		})
	}
}
