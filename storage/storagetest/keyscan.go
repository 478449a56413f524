package storagetest

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// The ScanKeys tests, run by Run: one KeyRef per keyed entry with the key's
// digest and the entry's seq, none for unkeyed entries or other chains, the
// transaction's own writes included, and a snapshot like every read.
var keyScanTests = []struct {
	name string
	fn   func(t *testing.T, b storage.Backend)
}{
	{"ScanKeysUnknownChain", testScanKeysUnknownChain},
	{"ScanKeysKeyedOnly", testScanKeysKeyedOnly},
	{"ScanKeysOwnWrites", testScanKeysOwnWrites},
	{"ScanKeysSnapshot", testScanKeysSnapshot},
	{"ScanKeysManyKeys", testScanKeysManyKeys},
	{"ScanKeysStopEarly", testScanKeysStopEarly},
}

// keyedChain is what a test appended to one chain: key digest -> seq, and
// the next seq.
type keyedChain struct {
	name string
	keys map[[storage.KeyDigestSize]byte]uint64
	next uint64
}

func newKeyedChain(name string) *keyedChain {
	return &keyedChain{name: name, keys: map[[storage.KeyDigestSize]byte]uint64{}, next: 1}
}

// appendKeys appends keyed entries, each unkeyedEvery-th one without a key
// (0: all keyed), in tx.
func (c *keyedChain) appendKeys(tx storage.Tx, n, unkeyedEvery int) error {
	for i := range n {
		key := ""
		if unkeyedEvery == 0 || (i+1)%unkeyedEvery != 0 {
			key = fmt.Sprintf("%s-key-%d", c.name, c.next)
		}
		if err := tx.Append(ctx, c.name, record(c.next, key), head(c.next)); err != nil {
			return err
		}
		if key != "" {
			c.keys[storage.KeyDigest(key)] = c.next
		}
		c.next++
	}
	return nil
}

// scannedKeys collects ScanKeys; a digest seen twice fails the test.
func scannedKeys(t *testing.T, tx storage.Tx, chain string) map[[storage.KeyDigestSize]byte]uint64 {
	t.Helper()
	got := map[[storage.KeyDigestSize]byte]uint64{}
	for ref, err := range tx.ScanKeys(ctx, chain) {
		if err != nil {
			t.Fatalf("ScanKeys(%q): %v", chain, err)
		}
		if seq, ok := got[ref.Digest]; ok {
			t.Fatalf("ScanKeys(%q) yields digest %x twice (seq %d and %d)", chain, ref.Digest, seq, ref.Seq)
		}
		got[ref.Digest] = ref.Seq
	}
	return got
}

// assertScannedKeys compares ScanKeys with what the test appended.
func assertScannedKeys(t *testing.T, tx storage.Tx, c *keyedChain) {
	t.Helper()
	got := scannedKeys(t, tx, c.name)
	if maps.Equal(got, c.keys) {
		return
	}
	missing, wrong, extra := 0, 0, 0
	for d, seq := range c.keys {
		switch g, ok := got[d]; {
		case !ok:
			missing++
		case g != seq:
			wrong++
		}
	}
	for d := range got {
		if _, ok := c.keys[d]; !ok {
			extra++
		}
	}
	t.Fatalf("ScanKeys(%q): %d refs for %d keys: %d missing, %d with another seq, %d extra",
		c.name, len(got), len(c.keys), missing, wrong, extra)
}

func testScanKeysUnknownChain(t *testing.T, b storage.Backend) {
	a := newKeyedChain("a")
	if err := update(t, b, func(tx storage.Tx) error { return a.appendKeys(tx, 5, 0) }); err != nil {
		t.Fatal(err)
	}
	view(t, b, func(tx storage.Tx) {
		for _, chain := range []string{"", "b", "a\x00", "aa"} {
			if got := scannedKeys(t, tx, chain); len(got) != 0 {
				t.Errorf("ScanKeys(%q) yields %d refs; the chain has no entries", chain, len(got))
			}
		}
	})
}

func testScanKeysKeyedOnly(t *testing.T, b storage.Backend) {
	a, other, unkeyed := newKeyedChain("a"), newKeyedChain("b"), newKeyedChain("c")
	err := update(t, b, func(tx storage.Tx) error {
		if err := a.appendKeys(tx, 30, 3); err != nil {
			return err
		}
		if err := other.appendKeys(tx, 7, 0); err != nil {
			return err
		}
		return unkeyed.appendKeys(tx, 4, 1)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.keys) != 20 || len(unkeyed.keys) != 0 {
		t.Fatalf("test setup: %d keys in a, %d in c", len(a.keys), len(unkeyed.keys))
	}
	view(t, b, func(tx storage.Tx) {
		assertScannedKeys(t, tx, a)
		assertScannedKeys(t, tx, other)
		assertScannedKeys(t, tx, unkeyed)
	})
}

// testScanKeysOwnWrites: a writable transaction's scan holds its own
// appends on top of the committed ones, and a rollback takes them away.
func testScanKeysOwnWrites(t *testing.T, b storage.Backend) {
	a := newKeyedChain("a")
	if err := update(t, b, func(tx storage.Tx) error { return a.appendKeys(tx, 10, 4) }); err != nil {
		t.Fatal(err)
	}
	committed := *a
	committed.keys = maps.Clone(a.keys)
	fresh := newKeyedChain("fresh")
	tx, err := b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.appendKeys(tx, 600, 5); err != nil { // enough for a run of its own
		tx.Rollback()
		t.Fatal(err)
	}
	if err := fresh.appendKeys(tx, 3, 0); err != nil {
		tx.Rollback()
		t.Fatal(err)
	}
	assertScannedKeys(t, tx, a)
	assertScannedKeys(t, tx, fresh)
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	view(t, b, func(tx storage.Tx) {
		assertScannedKeys(t, tx, &committed)
		assertScannedKeys(t, tx, newKeyedChain("fresh"))
	})
}

// testScanKeysSnapshot: a read transaction does not see keys committed
// after it began. The writer runs on its own goroutine: bbolt's writer may
// have to grow the map, which waits for the open reader.
func testScanKeysSnapshot(t *testing.T, b storage.Backend) {
	a := newKeyedChain("a")
	if err := update(t, b, func(tx storage.Tx) error { return a.appendKeys(tx, 8, 0) }); err != nil {
		t.Fatal(err)
	}
	before := *a
	before.keys = maps.Clone(a.keys)
	rtx, err := b.Begin(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	assertScannedKeys(t, rtx, &before) // the snapshot is taken by now on every backend
	written := make(chan error, 1)
	go func() {
		wtx, err := b.Begin(ctx, true)
		if err == nil {
			if err = a.appendKeys(wtx, 300, 0); err == nil {
				err = wtx.Commit()
			} else {
				wtx.Rollback()
			}
		}
		written <- err
	}()
	var writeErr error
	select { // a writer that cannot commit yet is fine: the snapshot holds either way
	case writeErr = <-written:
		written <- writeErr
	case <-time.After(time.Second):
	}
	assertScannedKeys(t, rtx, &before)
	rtx.Rollback()
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	view(t, b, func(tx storage.Tx) { assertScannedKeys(t, tx, a) })
}

// testScanKeysManyKeys writes thousands of keys to two interleaved chains
// in large transactions (each written as a run of its own on bbolt, and
// merged when a level fills) and in small ones (bbolt's recent keys,
// written out as a run when full), and checks the scan after each phase.
func testScanKeysManyKeys(t *testing.T, b storage.Backend) {
	a, c := newKeyedChain("a"), newKeyedChain("c")
	// bbolt's sizes decide which transactions are small; other backends
	// store every key alike.
	small := max(bolt.KeyRunDirectMin/2-1, 1)
	phases := []struct {
		transactions, keysPerChain int
	}{
		{9, 300},                                 // 600 keys a transaction: nine runs, eight of them merged
		{bolt.KeyRecentMax/(2*small) + 2, small}, // past the recent keys' capacity
		{3, small},                               // what stays recent
	}
	for _, phase := range phases {
		for range phase.transactions {
			err := update(t, b, func(tx storage.Tx) error {
				if err := a.appendKeys(tx, phase.keysPerChain, 7); err != nil {
					return err
				}
				return c.appendKeys(tx, phase.keysPerChain, 0)
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		view(t, b, func(tx storage.Tx) {
			assertScannedKeys(t, tx, a)
			assertScannedKeys(t, tx, c)
		})
	}
	if len(a.keys)+len(c.keys) < 8_000 {
		t.Fatalf("test setup: %d keys", len(a.keys)+len(c.keys))
	}
}

// testScanKeysStopEarly: a consumer that stops is not called again.
func testScanKeysStopEarly(t *testing.T, b storage.Backend) {
	a := newKeyedChain("a")
	if err := update(t, b, func(tx storage.Tx) error { return a.appendKeys(tx, 700, 0) }); err != nil {
		t.Fatal(err)
	}
	if err := update(t, b, func(tx storage.Tx) error { return a.appendKeys(tx, 5, 0) }); err != nil {
		t.Fatal(err)
	}
	view(t, b, func(tx storage.Tx) {
		n := 0
		for _, err := range tx.ScanKeys(ctx, "a") {
			if err != nil {
				t.Fatal(err)
			}
			if n++; n == 3 {
				break
			}
		}
		if n != 3 {
			t.Fatalf("stopped after %d refs, want 3", n)
		}
		assertScannedKeys(t, tx, a) // the transaction is still usable
	})
}
