package bolt

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt/internal/keyindex"
	"github.com/ledgerworks/ledger/storage/bolt/internal/keyrun"
)

// writeKeyRunsLedger writes chain "c" with keys keyed entries in 10
// commits (a run each, merged as levels fill), and chain "d" with one keyed
// entry in each.
func writeKeyRunsLedger(t *testing.T, keys int) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	b, err := Open(path, Options{Log: LogOff})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	seq := map[string]uint64{}
	for range 10 {
		tx, err := b.Begin(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, chain := range []string{"c", "c", "c", "d"} {
			seq[chain]++
			rec := storage.Record{Seq: seq[chain], IdempotencyKey: fmt.Sprintf("%s-%d", chain, seq[chain]), Data: []byte("x")}
			if err := tx.Append(ctx, chain, rec, storage.Head{Seq: seq[chain]}); err != nil {
				t.Fatal(err)
			}
		}
		for range keys/10 - 3 {
			seq["c"]++
			rec := storage.Record{Seq: seq["c"], IdempotencyKey: fmt.Sprintf("c-%d", seq["c"]), Data: []byte("x")}
			if err := tx.Append(ctx, "c", rec, storage.Head{Seq: seq["c"]}); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// scanKeysOf reads the chain's index through a read transaction of the
// file; load has the transaction load the runs (filters and all) first. It
// returns the seqs in order and whether the transaction had the runs
// loaded after the scan.
func scanKeysOf(t *testing.T, path, chain string, load bool) ([]uint64, bool, error) {
	t.Helper()
	ctx := context.Background()
	b, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	stx, err := b.Begin(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	defer stx.Rollback()
	g, ok := stx.(*guardedTx)
	if !ok {
		t.Fatalf("a read-only backend's transaction is a %T", stx)
	}
	if load {
		if err := g.t.loadRuns(); err != nil {
			return nil, false, err
		}
	}
	var seqs []uint64
	for ref, err := range stx.ScanKeys(ctx, chain) {
		if err != nil {
			return seqs, g.t.index.runs.Loaded(), err
		}
		if ref.Digest != KeyDigest(fmt.Sprintf("%s-%d", chain, ref.Seq)) {
			t.Fatalf("seq %d: digest %x, not its key's", ref.Seq, ref.Digest)
		}
		seqs = append(seqs, ref.Seq)
	}
	slices.Sort(seqs)
	return seqs, g.t.index.runs.Loaded(), nil
}

// A read transaction that has not loaded the runs scans a chain's keys
// without loading them (a run's filter is not read), and yields what a
// transaction that loaded them yields.
func TestScanKeysWithoutFilters(t *testing.T) {
	const keys = 2000
	path := writeKeyRunsLedger(t, keys)
	got, loaded, err := scanKeysOf(t, path, "c", false)
	if err != nil {
		t.Fatal(err)
	}
	if loaded {
		t.Fatal("ScanKeys loaded the runs")
	}
	if len(got) != keys || got[0] != 1 || got[len(got)-1] != keys {
		t.Fatalf("%d keys (%v...), want seqs 1..%d", len(got), got[:min(len(got), 5)], keys)
	}
	want, _, err := scanKeysOf(t, path, "c", true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("without the runs loaded: %d keys, with them: %d", len(got), len(want))
	}
	d, _, err := scanKeysOf(t, path, "d", false)
	if err != nil || len(d) != 10 {
		t.Fatalf("chain d: %d keys, %v; want 10", len(d), err)
	}
}

// A run whose count or filter has the wrong size is ErrCorrupt to a scan
// that does not load the runs, as to one that does.
func TestScanKeysDamagedRunHeader(t *testing.T) {
	for _, damage := range []struct {
		name  string
		key   []byte
		value []byte
	}{
		{"count", keyrun.CountKey, []byte{1, 2, 3}},
		{"filter", keyrun.FilterKey, make([]byte, keyindex.FilterBlockWords*8+1)},
		{"no filter", keyrun.FilterKey, nil},
	} {
		t.Run(damage.name, func(t *testing.T) {
			path := writeKeyRunsLedger(t, 1000)
			db, err := bbolt.Open(path, FileMode, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = db.Update(func(btx *bbolt.Tx) error {
				runs := btx.Bucket(BucketKeyRuns)
				name, _ := runs.Cursor().Last()
				if damage.value == nil {
					return runs.Bucket(name).Delete(damage.key)
				}
				return runs.Bucket(name).Put(damage.key, damage.value)
			})
			if cerr := db.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, load := range []bool{false, true} {
				if _, _, err := scanKeysOf(t, path, "c", load); !errors.Is(err, storage.ErrCorrupt) {
					t.Fatalf("runs loaded first %v: %v, want ErrCorrupt", load, err)
				}
			}
		})
	}
}
