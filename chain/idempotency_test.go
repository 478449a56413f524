package chain_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
)

// countingMetrics counts what the engine reports.
type countingMetrics struct {
	groups, requests, replays atomic.Int64
	groupSizeMax              atomic.Int64
}

func (m *countingMetrics) GroupCommitted(requests int, _ time.Duration) {
	m.groups.Add(1)
	m.requests.Add(int64(requests))
	for {
		old := m.groupSizeMax.Load()
		if int64(requests) <= old || m.groupSizeMax.CompareAndSwap(old, int64(requests)) {
			return
		}
	}
}

func (m *countingMetrics) Replayed() { m.replays.Add(1) }

// Row 1: a new key, or an empty key, appends an entry.
func TestIdempotencyNewOrEmptyKeyAppends(t *testing.T) {
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		for i, key := range []string{"", "", "k1", "k2", ""} {
			res := mustAppend(t, db, chain.Request{Chain: "c", IdempotencyKey: key, Type: "t/v1", Payload: []byte("same")})
			if res.Replayed || res.Entry.Seq != uint64(i+1) || res.Entry.IdempotencyKey != key {
				t.Fatalf("append %d key %q: %+v", i, key, res)
			}
		}
		head, err := db.Head(context.Background(), "c")
		if err != nil || head.Seq != 5 {
			t.Fatalf("head %+v %v", head, err)
		}
	})
}

// Row 2: same chain, key, type and payload returns the original entry
// unchanged, and writes nothing.
func TestIdempotencyReplayReturnsTheOriginal(t *testing.T) {
	metrics := &countingMetrics{}
	forEachBackend(t, chain.Options{Metrics: metrics}, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		req := chain.Request{Chain: "c", IdempotencyKey: "k", Type: "t/v1", Payload: []byte("p")}
		original := mustAppend(t, db, req)
		mustAppend(t, db, chain.Request{Chain: "c", Type: "t/v1", Payload: []byte("later")})
		before := takeSnapshot(t, db)
		groups, replays := metrics.groups.Load(), metrics.replays.Load()
		for range 3 {
			res := mustAppend(t, db, req)
			if !res.Replayed || !reflect.DeepEqual(res.Entry, original.Entry) {
				t.Fatalf("replay %+v, want %+v", res, original.Entry)
			}
		}
		if got := metrics.groups.Load(); got != groups {
			t.Fatalf("replays committed %d storage transactions, want none", got-groups)
		}
		if got := metrics.replays.Load() - replays; got != 3 {
			t.Fatalf("Metrics.Replayed called %d times, want 3", got)
		}
		assertUnchanged(t, db, before)

		// Inside Update the same rule holds, including for a key appended
		// earlier in the same transaction.
		err := db.Update(ctx, func(tx *chain.Tx) error {
			res, err := tx.Append(req)
			if err != nil || !res.Replayed || res.Entry.Hash != original.Entry.Hash {
				return fmt.Errorf("replay in tx: %+v %v", res, err)
			}
			fresh := chain.Request{Chain: "c", IdempotencyKey: "fresh", Type: "t/v1"}
			first, err := tx.Append(fresh)
			if err != nil || first.Replayed {
				return fmt.Errorf("fresh: %+v %v", first, err)
			}
			second, err := tx.Append(fresh)
			if err != nil || !second.Replayed || !reflect.DeepEqual(second.Entry, first.Entry) {
				return fmt.Errorf("fresh again: %+v %v", second, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if head, _ := db.Head(ctx, "c"); head.Seq != 3 {
			t.Fatalf("head seq %d, want 3", head.Seq)
		}
	})
}

// Row 3: same key with a different type or payload is a conflict that names
// the existing entry, and writes nothing.
func TestIdempotencyConflict(t *testing.T) {
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		mustAppend(t, db, chain.Request{Chain: "c", Type: "t/v1", Payload: []byte("filler")})
		original := mustAppend(t, db, chain.Request{Chain: "c", IdempotencyKey: "k", Type: "t/v1", Payload: []byte("p")})
		before := takeSnapshot(t, db)
		for name, req := range map[string]chain.Request{
			"other payload":  {Chain: "c", IdempotencyKey: "k", Type: "t/v1", Payload: []byte("q")},
			"other type":     {Chain: "c", IdempotencyKey: "k", Type: "t/v2", Payload: []byte("p")},
			"empty payload":  {Chain: "c", IdempotencyKey: "k", Type: "t/v1"},
			"shifted bytes":  {Chain: "c", IdempotencyKey: "k", Type: "t/v1p", Payload: nil},
			"payload prefix": {Chain: "c", IdempotencyKey: "k", Type: "t/v1", Payload: []byte("p\x00")},
		} {
			check := func(err error) {
				t.Helper()
				var conflict *chain.ConflictError
				if !errors.Is(err, chain.ErrIdempotencyConflict) || !errors.As(err, &conflict) {
					t.Fatalf("%s: %v, want a conflict", name, err)
				}
				want := chain.ConflictError{Chain: "c", IdempotencyKey: "k", ExistingSeq: 2,
					Expected: original.Entry.Fingerprint(), Calculated: chain.Fingerprint(req.Type, req.Payload)}
				if *conflict != want {
					t.Fatalf("%s: conflict %+v, want %+v", name, *conflict, want)
				}
				if conflict.Expected == conflict.Calculated {
					t.Fatalf("%s: fingerprints equal", name)
				}
				if errors.Is(err, chain.ErrInvalid) {
					t.Fatalf("%s: a conflict must not match ErrInvalid", name)
				}
			}
			_, err := db.Append(ctx, req)
			check(err)
			assertUnchanged(t, db, before)
			err = db.Update(ctx, func(tx *chain.Tx) error {
				if _, err := tx.Append(chain.Request{Chain: "d", Type: "t/v1"}); err != nil {
					return err
				}
				_, err := tx.Append(req)
				return err
			})
			check(err)
			assertUnchanged(t, db, before)
		}
	})
}

// Row 5: the same key on another chain is an independent operation.
func TestIdempotencyKeyIsPerChain(t *testing.T) {
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		a := mustAppend(t, db, chain.Request{Chain: "a", IdempotencyKey: "k", Type: "t/v1", Payload: []byte("p")})
		b := mustAppend(t, db, chain.Request{Chain: "b", IdempotencyKey: "k", Type: "t/v1", Payload: []byte("p")})
		c := mustAppend(t, db, chain.Request{Chain: "c", IdempotencyKey: "k", Type: "t/v2", Payload: []byte("other")})
		for _, res := range []chain.Result{a, b, c} {
			if res.Replayed || res.Entry.Seq != 1 {
				t.Fatalf("%+v: want a new first entry", res)
			}
		}
		if a.Entry.Hash == b.Entry.Hash {
			t.Fatal("entries of two chains share a hash")
		}
		for _, ch := range []string{"a", "b", "c"} {
			e, err := db.Lookup(ctx, ch, "k")
			if err != nil || e.Chain != ch || e.Seq != 1 {
				t.Fatalf("lookup %s: %+v %v", ch, e, err)
			}
		}
		if _, err := db.Lookup(ctx, "d", "k"); !errors.Is(err, chain.ErrNotFound) {
			t.Fatalf("lookup on a chain without the key: %v", err)
		}
	})
}

// A replay is answered from a read transaction, so it works on a ledger
// opened read-only, where a new append is refused.
func TestIdempotencyReplayNeedsNoWrite(t *testing.T) {
	db, path := openFile(t, chain.Options{})
	req := chain.Request{Chain: "c", IdempotencyKey: "k", Type: "t/v1", Payload: []byte("p")}
	original := mustAppend(t, db, req)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := chain.Open(path, chain.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	res, err := ro.Append(context.Background(), req)
	if err != nil || !res.Replayed || !reflect.DeepEqual(res.Entry, original.Entry) {
		t.Fatalf("replay on read-only: %+v %v", res, err)
	}
	req.IdempotencyKey = "new"
	if _, err := ro.Append(context.Background(), req); !errors.Is(err, chain.ErrReadOnly) {
		t.Fatalf("new append on read-only: %v", err)
	}
}

// Row 4: 64 goroutines hammer a few keys on a few chains; each key gets
// exactly one entry, every caller sees that entry, and exactly one caller
// created it.
func TestIdempotencyConcurrentAppendsOneEntryPerKey(t *testing.T) {
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		const goroutines = 64
		chains := []string{"x", "y"}
		keys := []string{"k0", "k1", "k2", "k3"}
		type outcome struct {
			chain, key string
			res        chain.Result
		}
		results := make(chan outcome, goroutines*len(chains)*len(keys))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				order := rand.New(rand.NewPCG(uint64(g), 1)).Perm(len(chains) * len(keys))
				for _, i := range order {
					ch, key := chains[i/len(keys)], keys[i%len(keys)]
					res, err := db.Append(context.Background(), chain.Request{Chain: ch, IdempotencyKey: key,
						Type: "t/v1", Payload: []byte(ch + "/" + key)})
					if err != nil {
						t.Errorf("append %s %s: %v", ch, key, err)
						return
					}
					results <- outcome{ch, key, res}
				}
			}()
		}
		close(start)
		wg.Wait()
		close(results)
		seen := map[[2]string]chain.Entry{}
		created := map[[2]string]int{}
		count := 0
		for o := range results {
			count++
			id := [2]string{o.chain, o.key}
			if first, ok := seen[id]; ok && !reflect.DeepEqual(first, o.res.Entry) {
				t.Fatalf("%v: callers saw different entries %+v and %+v", id, first, o.res.Entry)
			}
			seen[id] = o.res.Entry
			if !o.res.Replayed {
				created[id]++
			}
		}
		if count != goroutines*len(chains)*len(keys) {
			t.Fatalf("%d results", count)
		}
		for id := range seen {
			if created[id] != 1 {
				t.Fatalf("%v created by %d callers, want 1", id, created[id])
			}
		}
		ctx := context.Background()
		for _, ch := range chains {
			head, err := db.Head(ctx, ch)
			if err != nil || head.Seq != uint64(len(keys)) {
				t.Fatalf("chain %s head %+v %v, want seq %d", ch, head, err, len(keys))
			}
			for _, key := range keys {
				e, err := db.Lookup(ctx, ch, key)
				if err != nil || !reflect.DeepEqual(e, seen[[2]string{ch, key}]) {
					t.Fatalf("lookup %s %s: %+v %v", ch, key, e, err)
				}
			}
		}
		assertVerifies(t, db)
	})
}
