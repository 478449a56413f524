package bolt

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt/internal/keyindex"
)

// filterLedger is a bbolt file with what a test appended to it.
type filterLedger struct {
	t     *testing.T
	path  string
	b     *Backend
	heads map[string]uint64
	keys  int // committed keys
	opts  Options
}

func newFilterLedger(t *testing.T) *filterLedger {
	return newFilterLedgerWith(t, Options{Log: LogOff})
}

func newFilterLedgerWith(t *testing.T, opts Options) *filterLedger {
	l := &filterLedger{t: t, path: filepath.Join(t.TempDir(), "l.db"), heads: map[string]uint64{}, opts: opts}
	l.reopen()
	t.Cleanup(func() {
		if err := l.b.Check(); err != nil {
			t.Error(err)
		}
		l.b.Close()
	})
	return l
}

func (l *filterLedger) reopen() {
	l.t.Helper()
	if l.b != nil {
		if err := l.b.Close(); err != nil {
			l.t.Fatal(err)
		}
	}
	b, err := Open(l.path, l.opts)
	if err != nil {
		l.t.Fatal(err)
	}
	l.b = b
}

// appendKeys appends n keys named prefix-i over the chains in one write
// transaction, and commits it or rolls it back.
func (l *filterLedger) appendKeys(chains []string, n int, prefix string, commit bool) {
	l.t.Helper()
	ctx := context.Background()
	stx, err := l.b.Begin(ctx, true)
	if err != nil {
		l.t.Fatal(err)
	}
	defer stx.Rollback()
	heads := map[string]uint64{}
	for i := range n {
		ch := chains[i%len(chains)]
		if _, ok := heads[ch]; !ok {
			heads[ch] = l.heads[ch]
		}
		seq := heads[ch] + 1
		key := fmt.Sprintf("%s-%d", prefix, i)
		if err := stx.Append(ctx, ch, storage.Record{Seq: seq, IdempotencyKey: key, Data: []byte(key)}, storage.Head{Seq: seq}); err != nil {
			l.t.Fatalf("append %q: %v", key, err)
		}
		heads[ch] = seq
	}
	if !commit {
		return
	}
	if err := stx.Commit(); err != nil {
		l.t.Fatal(err)
	}
	for ch, h := range heads {
		l.heads[ch] = h
	}
	l.keys += n
}

// lookupOnce runs a write transaction that looks one new key up, which is
// what builds the filter of a handle opened for writing.
func (l *filterLedger) lookupOnce(chain string) {
	l.t.Helper()
	ctx := context.Background()
	stx, err := l.b.Begin(ctx, true)
	if err != nil {
		l.t.Fatal(err)
	}
	defer stx.Rollback()
	if _, err := stx.LookupKey(ctx, chain, "never-appended"); !errors.Is(err, storage.ErrNotFound) {
		l.t.Fatalf("lookup of a new key: %v", err)
	}
}

// checkFilterCovers reads every key of the file's index, wherever it is,
// and fails unless the handle's filter is current and may contain each one:
// a filter that said "new" for a key the file holds would let a key be
// appended twice.
func (l *filterLedger) checkFilterCovers() *keyindex.Filter {
	l.t.Helper()
	f := l.b.cache.filter.Load()
	if f == nil {
		l.t.Fatal("no filter on a handle that wrote")
	}
	n := 0
	err := l.b.View(func(btx *bbolt.Tx) error {
		if f.AsOf() != uint64(btx.ID()) {
			return fmt.Errorf("filter as of commit %d, file at %d", f.AsOf(), btx.ID())
		}
		if err := btx.Bucket(BucketKeys).ForEach(func(k, v []byte) error {
			n++
			if d := KeyDigest(string(k[8:])); !f.MayContain(binary.BigEndian.Uint64(k), d[:]) {
				return fmt.Errorf("recent key %q: false negative", k[8:])
			}
			return nil
		}); err != nil {
			return err
		}
		return btx.Bucket(BucketKeyRuns).ForEach(func(name, _ []byte) error {
			return btx.Bucket(BucketKeyRuns).Bucket(name).ForEach(func(k, v []byte) error {
				if len(k) != keyindex.RecordPrefixSize {
					return nil
				}
				for o := 0; o < len(v); o += keyindex.RecordSize {
					n++
					if !f.MayContain(binary.BigEndian.Uint64(v[o:]), v[o+8:o+keyindex.RecordPrefixSize]) {
						return fmt.Errorf("run %x record %x: false negative", name, v[o:o+keyindex.RecordPrefixSize])
					}
				}
				return nil
			})
		})
	})
	if err != nil {
		l.t.Fatal(err)
	}
	if n != l.keys || f.Count() != uint64(l.keys) {
		l.t.Fatalf("the index holds %d keys, the filter counted %d, the test appended %d", n, f.Count(), l.keys)
	}
	return f
}

// TestKeyFilterHasNoFalseNegatives drives the filter through every way the
// index changes: keys into the recent B-tree and out as a run, direct runs,
// merges, a rolled-back transaction, a reopen (which builds it at Open),
// growth past its capacity,
// and a file of the first layout opened for writing.
func TestKeyFilterHasNoFalseNegatives(t *testing.T) {
	l := newFilterLedger(t)
	chains := []string{"a", "b", "c"}
	l.appendKeys(chains, 3, "first", true) // builds it: the index was empty
	l.checkFilterCovers()
	for i := range KeyRunFanout + 2 { // direct runs, one level merged
		l.appendKeys(chains, KeyRunDirectMin+i, fmt.Sprintf("direct%d", i), true)
		l.checkFilterCovers()
	}
	small := KeyRunDirectMin - 1
	for i := range KeyRecentMax/small + 1 { // the recent keys fill and are written out
		l.appendKeys(chains, small, fmt.Sprintf("small%d", i), true)
	}
	before := l.checkFilterCovers()
	asOf, count := before.AsOf(), before.Count()
	l.appendKeys(chains, KeyRunDirectMin*4, "rolled-back", false)
	if after := l.b.cache.filter.Load(); after != before || after.AsOf() != asOf || after.Count() != count {
		t.Fatalf("a rolled-back transaction changed the filter: as of %d, %d keys; before %d, %d",
			after.AsOf(), after.Count(), asOf, count)
	}
	l.checkFilterCovers()

	l.reopen()
	if l.b.cache.filter.Load() == nil {
		t.Fatal("no filter after a writable Open") // prepareProbe builds it
	}
	l.checkFilterCovers()
	l.lookupOnce("a")
	l.checkFilterCovers()
	l.appendKeys(chains, 40, "after-reopen", true)
	l.checkFilterCovers()

	// Past its capacity the next write transaction builds a larger one.
	capacity := l.b.cache.filter.Load().Capacity()
	for i := 0; uint64(l.keys) <= capacity; i++ {
		l.appendKeys(chains, 10_000, fmt.Sprintf("grow%d", i), true)
	}
	l.lookupOnce("a")
	if f := l.checkFilterCovers(); f.Capacity() <= capacity {
		t.Fatalf("capacity %d after %d keys, was %d", f.Capacity(), l.keys, capacity)
	}
}

// TestKeyFilterThroughCheckpoints: with the log, keys reach the file only
// through checkpoints, which index them without looking them up (the log
// commit did); the filter still takes every one of them, and a checkpoint
// is still where it is built larger once it has outgrown its capacity.
func TestKeyFilterThroughCheckpoints(t *testing.T) {
	l := newFilterLedgerWith(t, Options{Log: LogOn, MemtableBytesMax: 1 << 40})
	checkpoint := func() {
		t.Helper()
		if err := l.b.forceCheckpoint(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	chains := []string{"a", "b", "c"}
	for i := range 4 {
		l.appendKeys(chains, 3+i*KeyRunDirectMin, fmt.Sprintf("small%d", i), true)
	}
	checkpoint()
	l.checkFilterCovers()
	capacity := l.b.cache.filter.Load().Capacity()
	for i := 0; uint64(l.keys) <= capacity; i++ {
		l.appendKeys(chains, 10_000, fmt.Sprintf("grow%d", i), true)
	}
	checkpoint() // takes the filter past its capacity
	l.checkFilterCovers()
	l.appendKeys(chains, 5, "next", true)
	checkpoint() // the first transaction to see it past its capacity
	if f := l.checkFilterCovers(); f.Capacity() <= capacity {
		t.Fatalf("capacity %d after %d keys, was %d: no checkpoint built it again", f.Capacity(), l.keys, capacity)
	}
	l.reopen()
	l.appendKeys(chains, 50, "after-reopen", true)
	checkpoint()
	l.checkFilterCovers()
}

// TestKeyFilterOldFile turns a file back into the first layout (every key
// in the recent B-tree, no runs) and opens it for writing: the filter is
// built from the upgraded file and holds every old key.
func TestKeyFilterOldFile(t *testing.T) {
	l := newFilterLedger(t)
	l.appendKeys([]string{"a"}, KeyRunDirectMin-1, "old", true)
	l.appendKeys([]string{"a"}, KeyRunDirectMin-1, "old2", true)
	l.b.Close()
	raw, err := bbolt.Open(l.path, FileMode, BboltOptions(Options{}))
	if err != nil {
		t.Fatal(err)
	}
	err = raw.Update(func(btx *bbolt.Tx) error {
		if err := DowngradeToFormatV2(btx); err != nil {
			return err
		}
		if err := btx.DeleteBucket(BucketKeyRuns); err != nil {
			return err
		}
		meta := btx.Bucket(BucketMeta)
		if err := meta.Delete(metaRecentKeys); err != nil {
			return err
		}
		return meta.Put(metaFormat, []byte(FormatV1))
	})
	raw.Close()
	if err != nil {
		t.Fatal(err)
	}
	l.b = nil
	l.reopen()
	l.lookupOnce("a")
	l.checkFilterCovers()
	// Every old key is refused a second time.
	ctx := context.Background()
	stx, err := l.b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer stx.Rollback()
	for i := range KeyRunDirectMin - 1 {
		seq := l.heads["a"] + 1
		key := fmt.Sprintf("old-%d", i)
		if err := stx.Append(ctx, "a", storage.Record{Seq: seq, IdempotencyKey: key, Data: []byte("dup")}, storage.Head{Seq: seq}); !errors.Is(err, storage.ErrDuplicate) {
			t.Fatalf("second append of old key %q: %v", key, err)
		}
	}
}

// TestKeyFilterReadersDuringCommits looks keys up from read transactions
// while a writer commits: a reader that begins after a commit returned must
// find every key of it, whether the filter it consults has taken that
// commit's keys yet or not.
func TestKeyFilterReadersDuringCommits(t *testing.T) {
	l := newFilterLedger(t)
	ctx := context.Background()
	const transactions = 120
	var committed atomic.Int64 // transactions whose Commit returned
	done := make(chan error, 2)
	for reader := range 2 {
		go func() {
			for n := committed.Load(); n < transactions; n = committed.Load() {
				if n == 0 {
					continue
				}
				stx, err := l.b.Begin(ctx, false)
				if err != nil {
					done <- err
					return
				}
				for _, i := range []int64{n - 1, (n - 1) / 2, int64(reader)} {
					if i >= n {
						continue
					}
					if _, err := stx.LookupKey(ctx, "a", fmt.Sprintf("t%d-0", i)); err != nil {
						done <- fmt.Errorf("reader %d: key of transaction %d after %d commits: %w", reader, i, n, err)
						stx.Rollback()
						return
					}
				}
				stx.Rollback()
			}
			done <- nil
		}()
	}
	for i := range transactions {
		size := 3 // the recent keys
		if i%2 == 1 {
			size = KeyRunDirectMin + i // a run, merged now and then
		}
		l.appendKeys([]string{"a"}, size, fmt.Sprintf("t%d", i), true)
		committed.Add(1)
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	l.checkFilterCovers()
}

// TestKeyFilterReadTransactionCatchesUp opens a read transaction in the
// moment after a commit and before the filter holds that commit's keys (the
// log's reads keep such a transaction until the next checkpoint), and
// checks that its lookups use the filter as soon as it is current instead
// of searching the runs for the rest of the transaction.
func TestKeyFilterReadTransactionCatchesUp(t *testing.T) {
	l := newFilterLedger(t)
	l.appendKeys([]string{"a"}, KeyRunDirectMin, "k", true)
	l.lookupOnce("a")
	f := l.checkFilterCovers()
	current := f.AsOf()
	f.Built(f.Count(), current-1) // the commit is in the file, its keys not yet in the filter

	stx, err := l.b.Begin(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer stx.Rollback()
	read := stx.(*guardedTx).t
	if got, err := read.keyFilter(); err != nil || got != nil {
		t.Fatalf("a filter behind the snapshot: got %p, %v; want none", got, err)
	}
	f.Built(f.Count(), current) // keysCommitted ran
	if got, err := read.keyFilter(); err != nil || got != f {
		t.Fatalf("the filter once current: got %p, %v; want %p", got, err, f)
	}
	if _, err := stx.LookupKey(context.Background(), "a", "k-0"); err != nil {
		t.Fatalf("a committed key: %v", err)
	}
}
