package bolt

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage"
)

// upgradeChains are the chains of the upgrade tests' file.
var upgradeChains = []string{"a", "b/long-chain", "c"}

// appendRaw appends n entries of varied sizes round the chains in one
// transaction and records them in want.
func appendRaw(t *testing.T, b *Backend, want map[string][][]byte, n int, tag string) {
	t.Helper()
	ctx := context.Background()
	stx, err := b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer stx.Rollback() // after a failure: Close waits for the writer
	for i := range n {
		name := upgradeChains[i%len(upgradeChains)]
		seq := uint64(len(want[name]) + 1)
		data := fmt.Appendf(nil, "%s-%s-%d-%s", tag, name, seq, bytes.Repeat([]byte("p"), (i*37)%700))
		if err := stx.Append(ctx, name, storage.Record{Seq: seq, Data: data}, storage.Head{Seq: seq}); err != nil {
			t.Fatal(err)
		}
		want[name] = append(want[name], data)
	}
	if err := stx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// checkEntries reads every chain's entries by scan and by seq.
func checkEntries(t *testing.T, b *Backend, want map[string][][]byte) {
	t.Helper()
	ctx := context.Background()
	stx, err := b.Begin(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	defer stx.Rollback()
	for name, entries := range want {
		seq := uint64(0)
		for rec, err := range stx.Entries(ctx, name, 2) {
			if err != nil {
				t.Fatal(err)
			}
			seq++
			if rec.Seq != seq+1 || !bytes.Equal(rec.Data, entries[seq]) {
				t.Fatalf("%s: scan yields seq %d %q, want seq %d %q", name, rec.Seq, rec.Data, seq+1, entries[seq])
			}
		}
		if int(seq)+1 != len(entries) {
			t.Fatalf("%s: scan from seq 2 yields %d entries, want %d", name, seq, len(entries)-1)
		}
		for i, e := range entries {
			got, err := stx.Entry(ctx, name, uint64(i+1))
			if err != nil || !bytes.Equal(got, e) {
				t.Fatalf("%s seq %d: %q, %v; want %q", name, i+1, got, err, e)
			}
		}
		if _, err := stx.Entry(ctx, name, uint64(len(entries)+1)); err != storage.ErrNotFound {
			t.Fatalf("%s seq past the head: %v, want storage.ErrNotFound", name, err)
		}
	}
}

// writeFormatV2File writes a file of FormatV2 at path: transactions of
// entriesEach entries round upgradeChains, which it returns.
func writeFormatV2File(t *testing.T, path string, transactions, entriesEach int) map[string][][]byte {
	t.Helper()
	b, err := Open(path, Options{Log: LogOff})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][][]byte{}
	for i := range transactions {
		appendRaw(t, b, want, entriesEach, fmt.Sprint("old", i))
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := bbolt.Open(path, FileMode, BboltOptions(Options{}))
	if err != nil {
		t.Fatal(err)
	}
	err = raw.Update(DowngradeToFormatV2)
	if closeErr := raw.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		t.Fatal(err)
	}
	return want
}

// openLogOff opens a new file without the log, closed at the test's end,
// and the model of its entries.
func openLogOff(t *testing.T) (*Backend, map[string][][]byte) {
	t.Helper()
	b, err := Open(filepath.Join(t.TempDir(), "l.db"), Options{Log: LogOff})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, map[string][][]byte{}
}

// segmentCount returns how many segments the file holds.
func segmentCount(b *Backend) int {
	n := 0
	b.View(func(btx *bbolt.Tx) error { n = btx.Bucket(BucketSegments).Stats().KeyN; return nil })
	return n
}

func fileFormat(t *testing.T, b *Backend) string {
	t.Helper()
	var format string
	b.View(func(btx *bbolt.Tx) error {
		format = string(btx.Bucket(BucketMeta).Get(metaFormat))
		return nil
	})
	return format
}

// TestUpgradeEntriesToSegments downgrades a file to FormatV2, runs the
// first transaction of the upgrade only (a process killed in between),
// reads the file read-only (the entries bucket answers), then opens it for
// writing: the upgrade goes on from where it stopped, every entry reads
// back, the entries bucket is gone, and new entries extend the chains.
func TestUpgradeEntriesToSegments(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	want := writeFormatV2File(t, path, 4, 700)
	defer func(old int) { upgradeBatchBytes = old }(upgradeBatchBytes)
	upgradeBatchBytes = 50_000
	raw, err := bbolt.Open(path, FileMode, BboltOptions(Options{}))
	if err != nil {
		t.Fatal(err)
	}
	err = raw.Update(func(btx *bbolt.Tx) error {
		done, err := upgradeEntriesBatch(btx)
		if err == nil && done {
			err = fmt.Errorf("the upgrade finished in one transaction of %d bytes", upgradeBatchBytes)
		}
		return err
	})
	raw.Close()
	if err != nil {
		t.Fatal(err)
	}

	ro, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := fileFormat(t, ro); got != FormatV2 {
		t.Fatalf("format %q halfway through the upgrade, want %q", got, FormatV2)
	}
	checkEntries(t, ro, want)
	ro.Close()

	b, err := Open(path, Options{Log: LogOff})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got := fileFormat(t, b); got != Format {
		t.Fatalf("format %q after a writable open, want %q", got, Format)
	}
	b.View(func(btx *bbolt.Tx) error {
		if btx.Bucket(BucketEntries) != nil || btx.Bucket(bucketUpgrade) != nil {
			t.Error("the entries or upgrade bucket is left after the upgrade")
		}
		if n := btx.Bucket(BucketSegments).Stats().KeyN; n*10 > 2800 {
			t.Errorf("%d segments for 2800 entries: the upgrade did not fill them", n)
		}
		return nil
	})
	checkEntries(t, b, want)
	appendRaw(t, b, want, 500, "new")
	checkEntries(t, b, want)
	if err := b.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestSegmentsFillAcrossTransactions: entries appended a few per
// transaction extend the chain's last segment instead of starting one per
// transaction, a write transaction reads its own entries before they fill
// a segment, and a rolled-back transaction leaves the segment as it was.
func TestSegmentsFillAcrossTransactions(t *testing.T) {
	b, want := openLogOff(t)
	for i := range 300 {
		appendRaw(t, b, want, 3, fmt.Sprint("t", i))
	}
	checkEntries(t, b, want)
	if segments := segmentCount(b); segments*10 > 900 {
		t.Fatalf("%d segments for 900 entries appended 3 per transaction", segments)
	}

	ctx := context.Background()
	stx, err := b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer stx.Rollback() // after a failure: Close waits for the writer
	seq := uint64(len(want["a"]) + 1)
	if err := stx.Append(ctx, "a", storage.Record{Seq: seq, Data: []byte("rolled back")}, storage.Head{Seq: seq}); err != nil {
		t.Fatal(err)
	}
	if got, err := stx.Entry(ctx, "a", seq); err != nil || string(got) != "rolled back" {
		t.Fatalf("own entry: %q, %v", got, err)
	}
	if got, err := stx.Entry(ctx, "a", seq-1); err != nil || !bytes.Equal(got, want["a"][seq-2]) {
		t.Fatalf("entry before it: %q, %v", got, err)
	}
	if err := stx.Rollback(); err != nil {
		t.Fatal(err)
	}
	checkEntries(t, b, want)
	if err := b.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestSegmentsReadMidTransaction: a write transaction that scans a chain
// between its appends writes the chain's unfilled segment for the scan and
// replaces it when it appends again, so that the file holds each entry
// once.
func TestSegmentsReadMidTransaction(t *testing.T) {
	b, want := openLogOff(t)
	appendRaw(t, b, want, 30, "first")
	ctx := context.Background()
	stx, err := b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer stx.Rollback() // after a failure: Close waits for the writer
	for round := range 3 {
		for range 4 {
			seq := uint64(len(want["a"]) + 1)
			data := fmt.Appendf(nil, "round %d seq %d", round, seq)
			if err := stx.Append(ctx, "a", storage.Record{Seq: seq, Data: data}, storage.Head{Seq: seq}); err != nil {
				t.Fatal(err)
			}
			want["a"] = append(want["a"], data)
		}
		n := 0
		for rec, err := range stx.Entries(ctx, "a", 1) {
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(rec.Data, want["a"][n]) {
				t.Fatalf("round %d: seq %d holds %q, want %q", round, rec.Seq, rec.Data, want["a"][n])
			}
			n++
		}
		if n != len(want["a"]) {
			t.Fatalf("round %d: the scan yields %d entries, want %d", round, n, len(want["a"]))
		}
	}
	if err := stx.Commit(); err != nil {
		t.Fatal(err)
	}
	checkEntries(t, b, want)
	if n := segmentCount(b); n != len(upgradeChains) {
		t.Errorf("%d segments for %d short chains", n, len(upgradeChains))
	}
	if err := b.Check(); err != nil {
		t.Fatal(err)
	}
}
