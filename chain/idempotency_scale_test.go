package chain_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// Thousands of keys, written in large and small transactions, so that a
// store that tiers its key index (recent keys, then sorted runs merged by
// size) holds them in every tier: each key still replays, conflicts and
// stays independent per chain exactly as the design table says, also after
// a reopen.
func TestIdempotencyAtScale(t *testing.T) {
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		random := rand.New(rand.NewPCG(2, 9))
		newKey := func() string {
			var b [16]byte
			for i := range b {
				b[i] = byte(random.IntN(256))
			}
			return hex.EncodeToString(b[:])
		}
		chains := []string{"acme/fin/book-1", "acme/stock/SKU-1", "acme/val/SKU-1"}
		type written struct {
			req   chain.Request
			entry chain.Entry
		}
		var all []written
		appendBatch := func(size int) {
			t.Helper()
			reqs := make([]chain.Request, size)
			for i := range reqs {
				key := newKey()
				reqs[i] = chain.Request{Chain: chains[random.IntN(len(chains))], IdempotencyKey: key, Type: "t/v1", Payload: []byte("p-" + key)}
			}
			var results []chain.Result
			err := db.Update(ctx, func(tx *chain.Tx) error {
				results = results[:0]
				for _, req := range reqs {
					res, err := tx.Append(req)
					if err != nil {
						return err
					}
					results = append(results, res)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for i, res := range results {
				if res.Replayed {
					t.Fatalf("fresh key %q replayed", reqs[i].IdempotencyKey)
				}
				all = append(all, written{reqs[i], res.Entry})
			}
		}
		// bbolt tiers its key index (recent keys up to bolt.KeyRecentMax,
		// then sorted runs merged bolt.KeyRunFanout at a time): enough keys
		// to fill every tier there; other stores get a tenth.
		// Small transactions hold fewer new keys than bolt.KeyRunDirectMin, so
		// their keys go through the recent keys; enough of them to write the
		// recent keys out as a run once.
		smallSize := bolt.KeyRunDirectMin - 1
		large, small := 12, bolt.KeyRecentMax/smallSize+24
		if _, tiered := db.Backend().(*bolt.Backend); !tiered {
			large, small = 2, 3
		}
		for range large {
			appendBatch(400) // large transactions
		}
		for range small {
			appendBatch(smallSize) // small transactions, through the recent keys
		}
		for range 5 {
			appendBatch(1) // single appends
		}

		check := func(stage string) {
			t.Helper()
			err := db.View(ctx, func(tx *chain.Tx) error {
				for i, w := range all {
					e, err := tx.Lookup(w.req.Chain, w.req.IdempotencyKey)
					if err != nil || e.Hash != w.entry.Hash {
						return fmt.Errorf("lookup %s %s: %+v %v", w.req.Chain, w.req.IdempotencyKey, e, err)
					}
					for _, other := range chains {
						if other == w.req.Chain || i%5 != 0 {
							continue
						}
						if _, err := tx.Lookup(other, w.req.IdempotencyKey); !errors.Is(err, chain.ErrNotFound) {
							return fmt.Errorf("key %s of %s found on %s: %v", w.req.IdempotencyKey, w.req.Chain, other, err)
						}
					}
				}
				for range 500 {
					if e, err := tx.Lookup(chains[0], newKey()); !errors.Is(err, chain.ErrNotFound) {
						return fmt.Errorf("unused key found: %+v %v", e, err)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatalf("%s: %v", stage, err)
			}
			// Replays and conflicts through Append, on a sample from every
			// batch, oldest first.
			before := chainHeads(t, db)
			for i := 0; i < len(all); i += 37 {
				w := all[i]
				res, err := db.Append(ctx, w.req)
				if err != nil || !res.Replayed || res.Entry.Hash != w.entry.Hash {
					t.Fatalf("%s: replay of %s: %+v %v", stage, w.req.IdempotencyKey, res, err)
				}
				conflicting := w.req
				conflicting.Payload = []byte("other")
				_, err = db.Append(ctx, conflicting)
				var conflict *chain.ConflictError
				if !errors.As(err, &conflict) || conflict.ExistingSeq != w.entry.Seq || conflict.Chain != w.req.Chain {
					t.Fatalf("%s: conflict of %s: %v", stage, w.req.IdempotencyKey, err)
				}
			}
			if after := chainHeads(t, db); !slices.Equal(after, before) {
				t.Fatalf("%s: replays and conflicts changed the heads:\n%v\n%v", stage, before, after)
			}
		}
		check("after writing")

		// The same key on another chain is a new operation.
		moved := all[0].req
		for _, other := range chains {
			if other != moved.Chain {
				moved.Chain = other
				break
			}
		}
		if res := mustAppend(t, db, moved); res.Replayed {
			t.Fatalf("key of another chain replayed: %+v", res)
		} else {
			all = append(all, written{moved, res.Entry})
		}
		assertVerifies(t, db)
	})
}

// The same after the file is closed and opened again (bbolt only: the other
// backends' stores outlive a DB by construction).
func TestIdempotencyAtScaleAfterReopen(t *testing.T) {
	db, path := openFile(t, chain.Options{})
	ctx := context.Background()
	var reqs []chain.Request
	var hashes []chain.Hash
	for batch := range 12 {
		err := db.Update(ctx, func(tx *chain.Tx) error {
			for i := range 500 {
				req := chain.Request{Chain: "c", IdempotencyKey: fmt.Sprintf("op-%d-%d", batch, i), Type: "t", Payload: []byte{byte(i)}}
				if _, err := tx.Append(req); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for e, err := range db.Entries(ctx, "c", 1) {
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, chain.Request{Chain: "c", IdempotencyKey: e.IdempotencyKey, Type: e.Type, Payload: e.Payload})
		hashes = append(hashes, e.Hash)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// The keys reached the file's sorted runs, not only its recent keys.
	bdb, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	bdb.View(func(btx *bbolt.Tx) error {
		if b := btx.Bucket(bolt.BucketKeyRuns); b != nil {
			runs = b.Stats().BucketN - 1
		}
		return nil
	})
	bdb.Close()
	t.Logf("%d key runs in the file", runs)
	if runs == 0 {
		t.Fatal("no key runs in the file: the test does not reach the tiered index")
	}
	reopened, err := chain.Open(path, chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	for i := 0; i < len(reqs); i += 11 {
		res, err := reopened.Append(ctx, reqs[i])
		if err != nil || !res.Replayed || res.Entry.Hash != hashes[i] {
			t.Fatalf("replay %d after reopen: %+v %v", i, res, err)
		}
	}
	if head, _ := reopened.Head(ctx, "c"); head.Seq != uint64(len(reqs)) || len(reqs) != 6000 {
		t.Fatalf("head %d, %d entries", head.Seq, len(reqs))
	}
}

// chainHeads lists every chain's head.
func chainHeads(t *testing.T, db *chain.DB) []chain.Head {
	t.Helper()
	var heads []chain.Head
	for h, err := range db.Chains(context.Background(), "") {
		if err != nil {
			t.Fatal(err)
		}
		heads = append(heads, h)
	}
	return heads
}
