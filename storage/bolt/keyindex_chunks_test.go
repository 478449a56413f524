package bolt

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt/internal/keyindex"
	"github.com/ledgerworks/ledger/storage/bolt/internal/keyrun"
	"github.com/ledgerworks/ledger/storage/bolt/internal/mapscan"
)

// chunkLedger is a file whose runs are rewritten in chunks of other sizes,
// as files written before keyChunkRecords grew hold them.
type chunkLedger struct {
	t    *testing.T
	path string
	seqs map[string]uint64 // chain -> last seq; keys are "<chain>-<seq>"
}

// commit appends n keyed entries to each chain in one transaction.
func (l *chunkLedger) commit(b *Backend, n map[string]int) {
	l.t.Helper()
	ctx := context.Background()
	tx, err := b.Begin(ctx, true)
	if err != nil {
		l.t.Fatal(err)
	}
	for chain, count := range n {
		for range count {
			l.seqs[chain]++
			seq := l.seqs[chain]
			rec := storage.Record{Seq: seq, IdempotencyKey: fmt.Sprintf("%s-%d", chain, seq), Data: []byte(chain)}
			if err := tx.Append(ctx, chain, rec, storage.Head{Seq: seq}); err != nil {
				l.t.Fatal(err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		l.t.Fatal(err)
	}
}

// rechunk rewrites the runs of count records (every run when count is 0)
// in chunks of size records, each keyed by its last record, and returns
// how many runs it rewrote.
func (l *chunkLedger) rechunk(count uint64, size int) int {
	l.t.Helper()
	db, err := bbolt.Open(l.path, FileMode, nil)
	if err != nil {
		l.t.Fatal(err)
	}
	defer db.Close()
	rewritten := 0
	err = db.Update(func(btx *bbolt.Tx) error {
		runs := btx.Bucket(BucketKeyRuns)
		var names [][]byte
		runs.ForEach(func(name, _ []byte) error { names = append(names, name); return nil })
		for _, name := range names {
			run := runs.Bucket(name)
			if count != 0 && binary.BigEndian.Uint64(run.Get(keyrun.CountKey)) != count {
				continue
			}
			var records []byte
			var keys [][]byte
			run.ForEach(func(k, v []byte) error {
				if len(k) == keyindex.RecordPrefixSize {
					records = append(records, v...)
					keys = append(keys, append([]byte(nil), k...))
				}
				return nil
			})
			for _, k := range keys {
				if err := run.Delete(k); err != nil {
					return err
				}
			}
			for o := 0; o < len(records); o += size * keyindex.RecordSize {
				chunk := records[o:min(o+size*keyindex.RecordSize, len(records))]
				if err := run.Put(chunk[len(chunk)-keyindex.RecordSize:len(chunk)-keyindex.RecordSize+keyindex.RecordPrefixSize], chunk); err != nil {
					return err
				}
			}
			rewritten++
		}
		return nil
	})
	if err != nil {
		l.t.Fatal(err)
	}
	return rewritten
}

// runChunks returns the number of records of each chunk of each run, by
// run name.
func (l *chunkLedger) runChunks(b *Backend) map[keyrun.Name][]int {
	l.t.Helper()
	chunks := map[keyrun.Name][]int{}
	err := b.db.View(func(btx *bbolt.Tx) error {
		runs := btx.Bucket(BucketKeyRuns)
		return runs.ForEach(func(name, _ []byte) error {
			return runs.Bucket(name).ForEach(func(k, v []byte) error {
				if len(k) == keyindex.RecordPrefixSize {
					chunks[keyrun.Name(name)] = append(chunks[keyrun.Name(name)], len(v)/keyindex.RecordSize)
				}
				return nil
			})
		})
	})
	if err != nil {
		l.t.Fatal(err)
	}
	return chunks
}

// readFileTx begins a read transaction of the file alone (no memory
// tables), which the caller rolls back.
func (l *chunkLedger) readFileTx(b *Backend) *tx {
	l.t.Helper()
	btx, err := b.db.Begin(false)
	if err != nil {
		l.t.Fatal(err)
	}
	return &tx{tx: btx, path: b.path, cache: b.cache}
}

// checkLookups looks every key up, and keys the file does not hold, in one
// read transaction (so that each run is searched through its cursor and
// then through its table), twice over, and in a write transaction; it
// returns the read transaction's tables.
func (l *chunkLedger) checkLookups(b *Backend) map[keyrun.Name]keyrun.TableState {
	l.t.Helper()
	rtx := l.readFileTx(b)
	defer rtx.tx.Rollback()
	for round := range 2 {
		for chain, last := range l.seqs {
			id, err := rtx.chainID(chain)
			if err != nil {
				l.t.Fatal(err)
			}
			for seq := uint64(1); seq <= last+3; seq++ {
				key := fmt.Sprintf("%s-%d", chain, seq)
				digest := KeyDigest(key)
				got, found, err := rtx.lookupDigest(id, key, &digest)
				if err != nil {
					l.t.Fatalf("round %d, key %q: %v", round, key, err)
				}
				if want := seq <= last; found != want || (found && got != seq) {
					l.t.Fatalf("round %d, key %q: seq %d, found %v; want seq %d, found %v", round, key, got, found, seq, want)
				}
				other := id + 1 // the same digest under another chain's id
				if _, found, err := rtx.lookupDigest(other, key, &digest); err != nil || found {
					l.t.Fatalf("key %q under chain id %d: found %v, %v", key, other, found, err)
				}
			}
		}
	}
	ctx := context.Background()
	wtx, err := b.Begin(ctx, true)
	if err != nil {
		l.t.Fatal(err)
	}
	defer wtx.Rollback()
	for chain, last := range l.seqs {
		for _, seq := range []uint64{1, last / 2, last} {
			if got, err := wtx.LookupKey(ctx, chain, fmt.Sprintf("%s-%d", chain, seq)); err != nil || got != seq {
				l.t.Fatalf("write transaction: key %s-%d: %d, %v", chain, seq, got, err)
			}
		}
	}
	return rtx.index.runs.Tables()
}

// TestRunChunkSizes looks keys up in one file whose runs hold chunks of
// keyChunkRecords, of keyChunkRecordsV1 (files written before), and of one
// record each (more than keyrun.TableChunksMax of them, searched through the
// cursor), before and after a merge of all three, and scans them.
func TestRunChunkSizes(t *testing.T) {
	l := &chunkLedger{t: t, path: filepath.Join(t.TempDir(), "ledger.db"), seqs: map[string]uint64{}}
	b, err := Open(l.path, Options{Log: LogOff})
	if err != nil {
		t.Fatal(err)
	}
	l.commit(b, map[string]int{"c": keyindex.ChunkRecords + 100, "d": 50}) // two chunks, chains mixed in the last
	l.commit(b, map[string]int{"c": 600, "d": 10})                         // rewritten in chunks of keyChunkRecordsV1
	l.commit(b, map[string]int{"c": keyrun.TableChunksMax + 50})           // rewritten in chunks of one record
	l.commit(b, map[string]int{"c": 700})
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if n := l.rechunk(610, keyindex.ChunkRecordsV1); n != 1 {
		t.Fatalf("rewrote %d runs of 610 records", n)
	}
	if n := l.rechunk(keyrun.TableChunksMax+50, 1); n != 1 {
		t.Fatalf("rewrote %d runs of %d records", n, keyrun.TableChunksMax+50)
	}
	b, err = Open(l.path, Options{Log: LogOff})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	chunks := l.runChunks(b)
	sizes := map[int]bool{}
	for _, c := range chunks {
		sizes[c[0]] = true
	}
	if len(chunks) != 4 || !sizes[keyindex.ChunkRecords] || !sizes[keyindex.ChunkRecordsV1] || !sizes[1] || !sizes[700] {
		t.Fatalf("runs' chunks: %v", chunks)
	}
	tables := l.checkLookups(b)
	for name, c := range chunks {
		table, ok := tables[name]
		switch {
		case !ok || table.Searches <= keyrun.TableAfter:
			t.Errorf("run %x (%d chunks) was not searched through a table: %+v", name, len(c), table)
		case len(c) > keyrun.TableChunksMax && table.Chunks >= 0:
			t.Errorf("run %x of %d chunks has a table", name, len(c))
		case len(c) <= keyrun.TableChunksMax && table.Chunks != len(c):
			t.Errorf("run %x of %d chunks has a table of %d", name, len(c), table.Chunks)
		case len(c) <= keyrun.TableChunksMax && b.cache.runs.Get(name).Radix() == nil:
			t.Errorf("run %x of %d chunks, searched through a table, has no radix map", name, len(c))
		}
	}
	// Level 3 fills (the runs of 610, 1,074 and 700 records, and five
	// more): its runs, of every chunk size, merge into one of level 4.
	for range KeyRunFanout - 3 {
		l.commit(b, map[string]int{"c": 600, "d": 1})
	}
	chunks = l.runChunks(b)
	if len(chunks) != 2 {
		t.Fatalf("after the merge: %d runs, want 2: %v", len(chunks), chunks)
	}
	for name, c := range chunks {
		if name[0] == 4 && (len(c) != 1 || c[0] != 610+keyrun.TableChunksMax+50+700+5*601) {
			t.Fatalf("the merged run's chunks: %v", c)
		}
		// The merge wrote the run, and its radix map with it (none for its
		// chunk, which holds two chains).
		if x := b.cache.runs.Get(name).Radix(); name[0] == 4 && (x == nil || len(x.Records) != 1 || x.Records[0] != c[0] || x.Starts[0] != nil) {
			t.Fatalf("the merged run's radix map: %+v", x)
		}
	}
	l.checkLookups(b)
	l.checkScan(b)
	l.checkScanStart(b)
}

// checkScanStart walks each run for each chain and checks that the walk
// hands on none of the records of the chains before it: the first chunk
// of a chain's stretch holds up to keyChunkRecords records of others.
func (l *chunkLedger) checkScanStart(b *Backend) {
	l.t.Helper()
	rtx := l.readFileTx(b)
	defer rtx.tx.Rollback()
	names, err := rtx.index.runs.ScanNames(rtx)
	if err != nil {
		l.t.Fatal(err)
	}
	for chain := range l.seqs {
		id, err := rtx.chainID(chain)
		if err != nil {
			l.t.Fatal(err)
		}
		for _, name := range names {
			var memory mapscan.Scan
			lower := 0
			_, err := rtx.walkRunChunks(id, name, &memory, func(chunk []byte) (bool, bool) {
				for o := 0; o < len(chunk); o += keyindex.RecordSize {
					if binary.BigEndian.Uint64(chunk[o:]) < id {
						lower++
					}
				}
				return true, false
			})
			if err != nil || lower != 0 {
				l.t.Fatalf("chain %s, run %x: the walk handed on %d records of lower chain ids, %v", chain, name, lower, err)
			}
		}
	}
}

// checkScan scans each chain's keys in batches and checks that every seq
// comes once with its key's digest.
func (l *chunkLedger) checkScan(b *Backend) {
	l.t.Helper()
	ctx := context.Background()
	stx, err := b.Begin(ctx, false)
	if err != nil {
		l.t.Fatal(err)
	}
	defer stx.Rollback()
	for chain, last := range l.seqs {
		seen := make([]bool, last+1)
		for refs, err := range stx.(storage.KeyBatchScanner).ScanKeyBatches(ctx, chain) {
			if err != nil {
				l.t.Fatal(err)
			}
			for _, ref := range refs {
				if ref.Seq == 0 || ref.Seq > last || seen[ref.Seq] || ref.Digest != KeyDigest(fmt.Sprintf("%s-%d", chain, ref.Seq)) {
					l.t.Fatalf("chain %s: record %+v", chain, ref)
				}
				seen[ref.Seq] = true
			}
		}
		for seq := uint64(1); seq <= last; seq++ {
			if !seen[seq] {
				l.t.Fatalf("chain %s: seq %d not scanned", chain, seq)
			}
		}
	}
}
