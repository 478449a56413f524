package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// TestStateGetBatchMatchesModel: puts and deletes, some committed, some
// flushed to the server by a scan, some still buffered, then a batch read
// of a random set of keys (present, deleted, never written, empty
// values) answers exactly what the model holds, in a writable and in a
// read-only transaction.
func TestStateGetBatchMatchesModel(t *testing.T) {
	b := pgtest.Open(t)
	ctx := context.Background()
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		prefix := fmt.Sprintf("g%05d/", run)
		key := func(i int) []byte { return []byte(fmt.Sprintf("%s%02d", prefix, i)) }
		model := map[int][]byte{}
		tx, err := b.Begin(ctx, true)
		if err != nil {
			rt.Fatal(err)
		}
		defer tx.Rollback()
		steps := rapid.IntRange(1, 60).Draw(rt, "steps")
		for range steps {
			i := rapid.IntRange(0, 30).Draw(rt, "key")
			switch rapid.IntRange(0, 5).Draw(rt, "op") {
			case 0:
				if err := tx.StateDelete(ctx, key(i)); err != nil {
					rt.Fatal(err)
				}
				delete(model, i)
			case 1: // a scan sends the buffered writes to the server
				for _, err := range tx.StateScan(ctx, []byte(prefix), nil, false) {
					if err != nil {
						rt.Fatal(err)
					}
				}
			case 2: // commit, and go on in a new transaction
				if err := tx.Commit(); err != nil {
					rt.Fatal(err)
				}
				if tx, err = b.Begin(ctx, true); err != nil {
					rt.Fatal(err)
				}
				defer tx.Rollback()
			default:
				v := []byte(rapid.StringMatching(`[a-z]{0,3}`).Draw(rt, "value"))
				if err := tx.StatePut(ctx, key(i), v); err != nil {
					rt.Fatal(err)
				}
				model[i] = v
			}
		}
		ask := rapid.SliceOfDistinct(rapid.IntRange(0, 40), func(i int) int { return i }).Draw(rt, "ask")
		check := func(tx storage.Tx, what string) {
			keys := make([][]byte, len(ask))
			for j, i := range ask {
				keys[j] = key(i)
			}
			got := map[int][]byte{}
			err := tx.(storage.StateBatchGetter).StateGetBatch(ctx, keys, func(j int, v []byte) {
				if _, twice := got[ask[j]]; twice {
					rt.Fatalf("%s: key %d reported twice", what, ask[j])
				}
				got[ask[j]] = append([]byte{}, v...)
			})
			if err != nil {
				rt.Fatalf("%s: %v", what, err)
			}
			for _, i := range ask {
				want, ok := model[i]
				v, found := got[i]
				if ok != found || string(v) != string(want) {
					rt.Fatalf("%s: key %d = %q (found %v), want %q (found %v)", what, i, v, found, want, ok)
				}
			}
		}
		check(tx, "writable")
		if err := tx.Commit(); err != nil {
			rt.Fatal(err)
		}
		ro, err := b.Begin(ctx, false)
		if err != nil {
			rt.Fatal(err)
		}
		defer ro.Rollback()
		check(ro, "read-only")
	})
}

// TestStateGetBatchBound: more keys than StateGetBatchMax are refused,
// and the transaction stays usable.
func TestStateGetBatchBound(t *testing.T) {
	b := pgtest.Open(t)
	ctx := context.Background()
	tx, err := b.Begin(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	keys := make([][]byte, storage.StateGetBatchMax+1)
	for i := range keys {
		keys[i] = []byte(fmt.Sprint(i))
	}
	err = tx.(storage.StateBatchGetter).StateGetBatch(ctx, keys, func(int, []byte) {})
	if err == nil {
		t.Fatal("no error for too many keys")
	}
	if err := tx.(storage.StateBatchGetter).StateGetBatch(ctx, keys[:3], func(int, []byte) {}); err != nil {
		t.Fatalf("after the refusal: %v", err)
	}
}
