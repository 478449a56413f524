package bolt_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/ledgerworks/ledger/storage/bolt"
)

// TestPresizedTablesThroughCheckpoints writes a large chain and a small one
// through several freezes of memory tables small enough that every new
// table is presized from the frozen one (with the checkpoint of that one
// running beside the commits), and reads every entry and key back, before
// and after a reopen.
func TestPresizedTablesThroughCheckpoints(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	opts := bolt.Options{Log: bolt.LogOn, MemtableBytesMax: 2 << 20, LogSegmentSizeBytes: 1 << 20}
	b, err := bolt.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	const perCommit, commits = 500, 40
	for c := range uint64(commits) {
		commitN(t, b, "big", c*perCommit+1, (c+1)*perCommit)
		commitN(t, b, "small", c+1, c+1)
	}
	check := func(b *bolt.Backend) {
		t.Helper()
		tx, err := b.Begin(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		for chain, last := range map[string]uint64{"big": perCommit * commits, "small": commits} {
			for seq := uint64(1); seq <= last; seq++ {
				rec := testRecord(chain, seq)
				got, err := tx.LookupKey(ctx, chain, rec.IdempotencyKey)
				if err != nil || got != seq {
					t.Fatalf("%s key %q: %d, %v", chain, rec.IdempotencyKey, got, err)
				}
				data, err := tx.Entry(ctx, chain, seq)
				if err != nil || string(data) != string(rec.Data) {
					t.Fatalf("%s seq %d: %q, %v", chain, seq, data, err)
				}
			}
			if _, err := tx.LookupKey(ctx, chain, fmt.Sprintf("%s-key-%d", chain, last+1)); err == nil {
				t.Fatalf("%s: a key never appended was found", chain)
			}
		}
	}
	check(b)
	closeAndCheck(t, b, path)
	b, err = bolt.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	check(b)
	closeAndCheck(t, b, path)
}
