package storagetest

import (
	"errors"
	"maps"
	"testing"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// RunKeyBatches checks storage.KeyBatchScanner for the backends returned
// by open: ScanKeyBatches yields exactly the records ScanKeys yields (each
// as often), in batches of 1 to storage.KeyBatchSizeMax records, through
// every piece of the index (large commits, small ones, a write
// transaction's own appends, a fork), stops when its consumer stops, and
// fails as ScanKeys does on an ended transaction. A backend whose
// transactions are not KeyBatchScanners skips every test.
func RunKeyBatches(t *testing.T, open func(t testing.TB) storage.Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, b storage.Backend)
	}{
		{"KeyBatchesMatchScanKeys", testKeyBatchesMatchScanKeys},
		{"KeyBatchesOwnWrites", testKeyBatchesOwnWrites},
		{"KeyBatchesOfAFork", testKeyBatchesOfAFork},
		{"KeyBatchesStopEarly", testKeyBatchesStopEarly},
		{"KeyBatchesEndedTx", testKeyBatchesEndedTx},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) { test.fn(t, open(t)) })
	}
}

// refCounts counts each record a scan yields.
type refCounts map[storage.KeyRef]int

// batchedRefs collects ScanKeyBatches, failing on an error or on a batch
// of a size outside 1..KeyBatchSizeMax. It returns the records and the
// number of batches.
func batchedRefs(t *testing.T, tx storage.Tx, chain string) (refCounts, int) {
	t.Helper()
	got, batches := refCounts{}, 0
	for refs, err := range implementation[storage.KeyBatchScanner](t, tx).ScanKeyBatches(ctx, chain) {
		if err != nil {
			t.Fatalf("ScanKeyBatches(%q): %v", chain, err)
		}
		if len(refs) == 0 || len(refs) > storage.KeyBatchSizeMax {
			t.Fatalf("ScanKeyBatches(%q): a batch of %d records, want 1 to %d", chain, len(refs), storage.KeyBatchSizeMax)
		}
		for _, ref := range refs {
			got[ref]++
		}
		batches++
	}
	return got, batches
}

// scannedRefs collects ScanKeys.
func scannedRefs(t *testing.T, tx storage.Tx, chain string) refCounts {
	t.Helper()
	got := refCounts{}
	for ref, err := range tx.ScanKeys(ctx, chain) {
		if err != nil {
			t.Fatalf("ScanKeys(%q): %v", chain, err)
		}
		got[ref]++
	}
	return got
}

// assertBatchesMatch compares ScanKeyBatches with ScanKeys, and both with
// what the test appended to c.
func assertBatchesMatch(t *testing.T, tx storage.Tx, c *keyedChain) {
	t.Helper()
	assertScannedKeys(t, tx, c)
	want := scannedRefs(t, tx, c.name)
	got, batches := batchedRefs(t, tx, c.name)
	if !maps.Equal(got, want) {
		missing, extra := 0, 0
		for ref, n := range want {
			missing += max(n-got[ref], 0)
		}
		for ref, n := range got {
			extra += max(n-want[ref], 0)
		}
		t.Fatalf("ScanKeyBatches(%q) in %d batches: %d records of ScanKeys missing, %d extra", c.name, batches, missing, extra)
	}
	if records := len(c.keys); batches < (records+storage.KeyBatchSizeMax-1)/storage.KeyBatchSizeMax {
		t.Fatalf("ScanKeyBatches(%q): %d records in %d batches", c.name, records, batches)
	}
}

// testKeyBatchesMatchScanKeys writes keys in large transactions and small
// ones to interleaved chains (on bbolt: runs, merged runs and the recent
// keys) and compares the batches with ScanKeys after each phase; chains
// without keys or without entries yield nothing.
func testKeyBatchesMatchScanKeys(t *testing.T, b storage.Backend) {
	a, c, unkeyed := newKeyedChain("a"), newKeyedChain("c"), newKeyedChain("u")
	small := max(bolt.KeyRunDirectMin/2-1, 1)
	phases := []struct {
		transactions, keysPerChain int
	}{
		{3, storage.KeyBatchSizeMax + 300}, // runs of their own, merged
		{4, small},                         // the recent keys
	}
	for _, phase := range phases {
		for range phase.transactions {
			err := update(t, b, func(tx storage.Tx) error {
				if err := a.appendKeys(tx, phase.keysPerChain, 7); err != nil {
					return err
				}
				if err := unkeyed.appendKeys(tx, 2, 1); err != nil {
					return err
				}
				return c.appendKeys(tx, phase.keysPerChain, 0)
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		view(t, b, func(tx storage.Tx) {
			assertBatchesMatch(t, tx, a)
			assertBatchesMatch(t, tx, c)
			for _, chain := range []string{"u", "", "b", "a\x00", "aa"} {
				if got, batches := batchedRefs(t, tx, chain); len(got) != 0 || batches != 0 {
					t.Errorf("ScanKeyBatches(%q) yields %d records in %d batches; the chain has no keys", chain, len(got), batches)
				}
			}
		})
	}
	if len(a.keys) < 3*storage.KeyBatchSizeMax {
		t.Fatalf("test setup: %d keys in a", len(a.keys))
	}
}

// testKeyBatchesOwnWrites: a write transaction's batches hold its own
// appends on top of the committed keys.
func testKeyBatchesOwnWrites(t *testing.T, b storage.Backend) {
	a := newKeyedChain("a")
	if err := update(t, b, func(tx storage.Tx) error { return a.appendKeys(tx, 700, 4) }); err != nil {
		t.Fatal(err)
	}
	fresh := newKeyedChain("fresh")
	tx, err := b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := a.appendKeys(tx, storage.KeyBatchSizeMax+5, 5); err != nil {
		t.Fatal(err)
	}
	if err := fresh.appendKeys(tx, 3, 0); err != nil {
		t.Fatal(err)
	}
	assertBatchesMatch(t, tx, a)
	assertBatchesMatch(t, tx, fresh)
}

// testKeyBatchesOfAFork: a fork's batches are the receiver's records.
func testKeyBatchesOfAFork(t *testing.T, b storage.Backend) {
	a := newKeyedChain("a")
	for range 3 {
		if err := update(t, b, func(tx storage.Tx) error { return a.appendKeys(tx, 400, 3) }); err != nil {
			t.Fatal(err)
		}
	}
	view(t, b, func(tx storage.Tx) {
		fork := forkOf(t, tx)
		defer fork.Rollback()
		got, _ := batchedRefs(t, fork, "a")
		if want := scannedRefs(t, tx, "a"); !maps.Equal(got, want) {
			t.Fatalf("a fork's batches hold %d records, the receiver's ScanKeys %d", len(got), len(want))
		}
		assertBatchesMatch(t, fork, a)
	})
}

// testKeyBatchesStopEarly: a consumer that stops after any batch is not
// called again (range over a function panics if it is), and the
// transaction stays usable.
func testKeyBatchesStopEarly(t *testing.T, b storage.Backend) {
	a := newKeyedChain("a")
	if err := update(t, b, func(tx storage.Tx) error { return a.appendKeys(tx, 3*storage.KeyBatchSizeMax, 0) }); err != nil {
		t.Fatal(err)
	}
	if err := update(t, b, func(tx storage.Tx) error { return a.appendKeys(tx, 5, 0) }); err != nil {
		t.Fatal(err)
	}
	view(t, b, func(tx storage.Tx) {
		_, batches := batchedRefs(t, tx, "a")
		for stopAt := range batches {
			seen := 0
			for _, err := range implementation[storage.KeyBatchScanner](t, tx).ScanKeyBatches(ctx, "a") {
				if err != nil {
					t.Fatal(err)
				}
				if seen++; seen > stopAt {
					break
				}
			}
			if seen != stopAt+1 {
				t.Fatalf("stopped after %d batches, want %d", seen, stopAt+1)
			}
		}
		assertBatchesMatch(t, tx, a)
	})
}

// testKeyBatchesEndedTx: on an ended transaction ScanKeyBatches yields an
// error and no records, as ScanKeys does.
func testKeyBatchesEndedTx(t *testing.T, b storage.Backend) {
	a := newKeyedChain("a")
	if err := update(t, b, func(tx storage.Tx) error { return a.appendKeys(tx, 10, 0) }); err != nil {
		t.Fatal(err)
	}
	tx, err := b.Begin(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	s := implementation[storage.KeyBatchScanner](t, tx)
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	var scanErr error
	for _, err := range tx.ScanKeys(ctx, "a") {
		scanErr = err
		break
	}
	records, errs := 0, 0
	var batchErr error
	for refs, err := range s.ScanKeyBatches(ctx, "a") {
		records += len(refs)
		if err != nil {
			errs++
			batchErr = err
		}
	}
	if records != 0 || errs != 1 || batchErr == nil {
		t.Fatalf("ScanKeyBatches on an ended transaction: %d records, %d errors (%v)", records, errs, batchErr)
	}
	if scanErr == nil || !errors.Is(batchErr, storage.ErrTxDone) != !errors.Is(scanErr, storage.ErrTxDone) {
		t.Fatalf("on an ended transaction ScanKeyBatches fails with %v, ScanKeys with %v", batchErr, scanErr)
	}
}
