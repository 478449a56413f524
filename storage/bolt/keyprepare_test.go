package bolt_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// TestPrepareKeysAcrossLayers prepares keys that the memory table, the
// file and neither hold, of two chains, in an order where a key the memory
// table answers comes between keys of its chain the file must answer, and
// checks every LookupKey that follows, in order and out of it.
func TestPrepareKeysAcrossLayers(t *testing.T) {
	b, err := bolt.Open(filepath.Join(t.TempDir(), "ledger.db"), bolt.Options{Log: bolt.LogOn, MemtableBytesMax: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	commit := func(chain string, seq uint64, key string) {
		t.Helper()
		tx, err := b.Begin(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Append(ctx, chain, storage.Record{Seq: seq, IdempotencyKey: key, Data: []byte(key)}, testHead(seq)); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	commit("a", 1, "in-file-1")
	commit("b", 1, "in-file-b")
	commit("a", 2, "in-file-2")
	if err := bolt.Checkpoint(b); err != nil {
		t.Fatal(err)
	}
	commit("a", 3, "in-memory")

	want := map[storage.ChainKey]uint64{
		{Chain: "a", Key: "in-file-1"}: 1, {Chain: "a", Key: "in-file-2"}: 2, {Chain: "a", Key: "in-memory"}: 3,
		{Chain: "b", Key: "in-file-b"}: 1,
	}
	prepared := []storage.ChainKey{
		{Chain: "b", Key: "in-file-b"}, {Chain: "a", Key: "in-memory"}, {Chain: "a", Key: "in-file-1"},
		{Chain: "a", Key: "nowhere"}, {Chain: "a", Key: "in-memory"}, {Chain: "a", Key: "in-file-2"},
		{Chain: "c", Key: "in-file-1"}, {Chain: "b", Key: "in-file-b"},
	}
	for _, order := range [][]int{{0, 1, 2, 3, 4, 5, 6, 7}, {2, 1, 0, 5, 7, 3}, {1, 2, 6, 5}} {
		tx, err := b.Begin(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		tx.(storage.KeyPreparer).PrepareKeys(ctx, prepared)
		for _, i := range order {
			k := prepared[i]
			seq, err := tx.LookupKey(ctx, k.Chain, k.Key)
			w, ok := want[k]
			if (ok && (err != nil || seq != w)) || (!ok && !errors.Is(err, storage.ErrNotFound)) {
				t.Errorf("order %v: lookup of %q in %q: %d, %v; want %d (present %v)", order, k.Key, k.Chain, seq, err, w, ok)
			}
		}
		tx.Rollback()
	}
}
