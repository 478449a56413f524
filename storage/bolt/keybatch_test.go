package bolt_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt"
	"github.com/ledgerworks/ledger/storage/storagetest"
)

// ScanKeyBatches against ScanKeys on every way the backend commits: the
// file alone, and the file under memory tables.
func TestKeyBatchesConformance(t *testing.T) {
	for _, c := range logConfigurations {
		t.Run(c.name, func(t *testing.T) { storagetest.RunKeyBatches(t, opener(c.opts)) })
	}
	t.Run("Default", func(t *testing.T) { storagetest.RunKeyBatches(t, storagetest.OpenBolt) })
}

const keyBatchChain = "batch/chain"

// keyBatchLedger writes keys keyed entries of keyBatchChain in one commit
// of a file without the log (a run of their own) and returns its path.
func keyBatchLedger(t *testing.T, keys int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger.db")
	b, err := bolt.Open(path, bolt.Options{Log: bolt.LogOff})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= uint64(keys); seq++ {
		rec := storage.Record{Seq: seq, IdempotencyKey: fmt.Sprintf("key-%d", seq), Data: []byte("x")}
		if err := tx.Append(ctx, keyBatchChain, rec, storage.Head{Seq: seq}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// lastRunChunk returns a copy of the last chunk of the last run, and
// edits it with edit (nil: leaves it) in the file.
func lastRunChunk(t *testing.T, path string, edit func(chunk []byte) []byte) []byte {
	t.Helper()
	db, err := bbolt.Open(path, bolt.FileMode, nil)
	if err != nil {
		t.Fatal(err)
	}
	var chunk []byte
	err = db.Update(func(btx *bbolt.Tx) error {
		runs := btx.Bucket(bolt.BucketKeyRuns)
		name, _ := runs.Cursor().Last()
		if name == nil {
			return errors.New("no key run")
		}
		run := runs.Bucket(name)
		cur := run.Cursor()
		for k, v := cur.First(); k != nil; k, v = cur.Next() {
			if len(k) == 24 && len(v) > 0 {
				chunk = bytes.Clone(v)
			}
		}
		if chunk == nil {
			return errors.New("no chunk in the last run")
		}
		if edit == nil {
			return nil
		}
		last, _ := cur.Last()
		for ; last != nil && len(last) != 24; last, _ = cur.Prev() {
		}
		return run.Put(bytes.Clone(last), edit(bytes.Clone(chunk)))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return chunk
}

// readBatches reads keyBatchChain's batches through a read-only open of
// path, and returns the records read before the first error, and the error.
func readBatches(t *testing.T, path string) (int, error) {
	t.Helper()
	b, err := bolt.Open(path, bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	stx, err := b.Begin(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer stx.Rollback()
	s, ok := stx.(storage.KeyBatchScanner)
	if !ok {
		t.Fatalf("a read transaction is a %T, not a storage.KeyBatchScanner", stx)
	}
	records := 0
	for refs, err := range s.ScanKeyBatches(ctx, keyBatchChain) {
		if err != nil {
			return records, err
		}
		for _, ref := range refs {
			if ref.Digest != storage.KeyDigest(fmt.Sprintf("key-%d", ref.Seq)) {
				t.Fatalf("seq %d: digest %x, not its key's", ref.Seq, ref.Digest)
			}
		}
		records += len(refs)
	}
	return records, nil
}

// A clean run is read whole; a run chunk whose size is not a whole number
// of records is storage.ErrCorrupt to the batches as to ScanKeys.
func TestKeyBatchesDamagedChunk(t *testing.T) {
	const keys = 3000
	path := keyBatchLedger(t, keys)
	if n, err := readBatches(t, path); err != nil || n != keys {
		t.Fatalf("clean file: %d records, %v; want %d", n, err, keys)
	}
	lastRunChunk(t, path, func(chunk []byte) []byte { return chunk[:len(chunk)-1] })
	if _, err := readBatches(t, path); !errors.Is(err, storage.ErrCorrupt) {
		t.Fatalf("a chunk one byte short: %v, want storage.ErrCorrupt", err)
	}
}

// A damaged page under a run's chunk is storage.ErrCorrupt naming the
// file, not a panic: the guarded transaction recovers once per iteration.
func TestKeyBatchesDamagedPage(t *testing.T) {
	const keys = 3000
	path := keyBatchLedger(t, keys)
	chunk := lastRunChunk(t, path, nil)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(data, chunk)
	if at < 0 {
		t.Fatal("the chunk is not in the file")
	}
	b, err := bolt.Open(path, bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	pageSize := 0
	b.View(func(btx *bbolt.Tx) error { pageSize = btx.DB().Info().PageSize; return nil })
	b.Close()
	page := pageOf(t, data, pageSize, at)
	data[page+8], data[page+9] = 0x00, 0x40 // page flags no page type has
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = readBatches(t, path)
	if !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Fatalf("batches over a damaged page: %v, want storage.ErrCorrupt naming the file", err)
	}
}

// The keys of memory tables, digested a batch at a time, have the digests
// storage.KeyDigest gives them one by one: keys short enough for one
// BLAKE3 block and longer ones, alone and mixed in a batch.
func TestKeyBatchesDigestMemoryKeys(t *testing.T) {
	b := opener(bolt.Options{Log: bolt.LogOn, InitialMmapSize: 64 << 20, MemtableBytesMax: 1 << 40})(t)
	keys := map[uint64]string{}
	chains := []struct {
		name    string
		entries int
		key     func(seq uint64) string
	}{
		{"short", 2*storage.KeyBatchSizeMax + 3, func(seq uint64) string { return fmt.Sprintf("s-%d", seq) }},
		{"mixed", 2*storage.KeyBatchSizeMax + 3, func(seq uint64) string { return strings.Repeat("m", int(seq%120)+1) + fmt.Sprint(seq) }},
	}
	for _, c := range chains {
		tx, err := b.Begin(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		for seq := uint64(1); seq <= uint64(c.entries); seq++ {
			keys[seq] = c.key(seq)
			if err := tx.Append(ctx, c.name, storage.Record{Seq: seq, IdempotencyKey: keys[seq], Data: []byte("x")}, storage.Head{Seq: seq}); err != nil {
				tx.Rollback()
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		seen := digestedRecords(t, b, c.name, c.key)
		if seen != c.entries {
			t.Fatalf("chain %s: %d records, want %d", c.name, seen, c.entries)
		}
	}
}

// digestedRecords reads the chain's batches, checks each digest against
// storage.KeyDigest of key(seq), and returns how many records it read.
func digestedRecords(t *testing.T, b storage.Backend, chain string, key func(seq uint64) string) int {
	t.Helper()
	rtx, err := b.Begin(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	defer rtx.Rollback() // before the Fatal's cleanup closes the backend
	seen := 0
	for refs, err := range rtx.(storage.KeyBatchScanner).ScanKeyBatches(ctx, chain) {
		if err != nil {
			t.Fatal(err)
		}
		for _, ref := range refs {
			if want := storage.KeyDigest(key(ref.Seq)); ref.Digest != want {
				t.Fatalf("chain %s seq %d: digest %x, want %x", chain, ref.Seq, ref.Digest, want)
			}
			seen++
		}
	}
	return seen
}
