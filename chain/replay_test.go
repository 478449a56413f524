package chain_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage/storagetest"
)

// TestReplay: Tx.Replay answers from the stored entry, refuses a different
// request with the same key, says false for a new or absent key, refuses a
// bad request, and writes nothing.
func TestReplay(t *testing.T) {
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		stored := mustAppend(t, db, chain.Request{Chain: "c", IdempotencyKey: "k", Type: "t/v1", Payload: []byte("p")}).Entry
		before := takeSnapshot(t, db)
		check := func(tx *chain.Tx) {
			res, found, err := tx.Replay(chain.Request{Chain: "c", IdempotencyKey: "k", Type: "t/v1", Payload: []byte("p")})
			if err != nil || !found || !res.Replayed || res.Entry.Hash != stored.Hash || res.Entry.Seq != stored.Seq {
				t.Errorf("replay of the stored request: %+v found=%v err=%v", res, found, err)
			}
			_, found, err = tx.Replay(chain.Request{Chain: "c", IdempotencyKey: "k", Type: "t/v1", Payload: []byte("other")})
			var conflict *chain.ConflictError
			if !found || !errors.Is(err, chain.ErrIdempotencyConflict) || !errors.As(err, &conflict) || conflict.ExistingSeq != stored.Seq {
				t.Errorf("replay of a different request: found=%v err=%v; want a conflict naming seq %d", found, err, stored.Seq)
			}
			for _, req := range []chain.Request{
				{Chain: "c", IdempotencyKey: "new", Type: "t/v1"},
				{Chain: "c", Type: "t/v1", Payload: []byte("p")},
				{Chain: "other", IdempotencyKey: "k", Type: "t/v1", Payload: []byte("p")},
			} {
				if res, found, err := tx.Replay(req); found || err != nil || res.Replayed {
					t.Errorf("replay of %+v: %+v found=%v err=%v; want not found", req, res, found, err)
				}
			}
			if _, found, err := tx.Replay(chain.Request{Chain: "", IdempotencyKey: "k", Type: "t/v1"}); found || !errors.Is(err, chain.ErrInvalid) {
				t.Errorf("replay of a request without a chain: found=%v err=%v; want ErrInvalid", found, err)
			}
		}
		if err := db.View(ctx, func(tx *chain.Tx) error { check(tx); return nil }); err != nil {
			t.Fatal(err)
		}
		if err := db.Update(ctx, func(tx *chain.Tx) error { check(tx); return nil }); err != nil {
			t.Fatal(err)
		}
		assertUnchanged(t, db, before)
	})
}

// TestNotFoundMessages: the misses of Head, Lookup and StateGet match
// ErrNotFound and name what was missing.
func TestNotFoundMessages(t *testing.T) {
	db, _ := openFile(t, chain.Options{})
	mustAppend(t, db, chain.Request{Chain: "c", IdempotencyKey: "k", Type: "t/v1"})
	err := db.View(context.Background(), func(tx *chain.Tx) error {
		head, err := tx.Head("missing")
		if !errors.Is(err, chain.ErrNotFound) || err.Error() != `chain "missing": not found` ||
			head.Seq != 0 || head.Hash != chain.Genesis("missing") {
			t.Errorf("Head of a missing chain: %+v, %v", head, err)
		}
		if _, err := tx.Lookup("c", "absent"); !errors.Is(err, chain.ErrNotFound) || err.Error() != `chain "c" key "absent": not found` {
			t.Errorf("Lookup of a missing key: %v", err)
		}
		if _, err := tx.StateGet([]byte("no/such/key")); !errors.Is(err, chain.ErrNotFound) || err.Error() != `state "no/such/key": not found` {
			t.Errorf("StateGet of a missing key: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// BenchmarkStateGetMiss measures a StateGet of a missing key beside the
// same miss asked of the store directly (the baseline), as a ratio.
func BenchmarkStateGetMiss(b *testing.B) {
	backend := storagetest.OpenBolt(b)
	db, err := chain.OpenBackend(backend, chain.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	key := []byte("stock/tenant/balance/missing")
	var raw time.Duration
	b.Run("raw", func(b *testing.B) {
		stx, err := backend.Begin(ctx, false)
		if err != nil {
			b.Fatal(err)
		}
		defer stx.Rollback()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := stx.StateGet(ctx, key); err == nil {
				b.Fatal("found")
			}
		}
		raw = b.Elapsed() / time.Duration(b.N)
	})
	b.Run("engine", func(b *testing.B) {
		b.ReportAllocs()
		db.View(ctx, func(tx *chain.Tx) error {
			for b.Loop() {
				if _, err := tx.StateGet(key); !errors.Is(err, chain.ErrNotFound) {
					b.Fatal(err)
				}
			}
			return nil
		})
		if engine := b.Elapsed() / time.Duration(b.N); raw > 0 {
			b.ReportMetric(engine.Seconds()/raw.Seconds(), "x-raw")
		}
	})
}
