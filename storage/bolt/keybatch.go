package bolt

import (
	"context"
	"encoding/binary"
	"fmt"
	"iter"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt/internal/keyindex"
	"github.com/ledgerworks/ledger/storage/bolt/internal/mapscan"
	"github.com/ledgerworks/ledger/storage/bolt/internal/memtable"
)

var (
	_ storage.KeyBatchScanner = (*tx)(nil)
	_ storage.KeyBatchScanner = (*guardedTx)(nil)
	_ storage.KeyBatchScanner = (*logTx)(nil)
)

// keyBatcher gathers index records into batches of at most
// storage.KeyBatchSizeMax and hands each full one to yield, reusing one
// slice: a verify that read the index a record at a time spent about a
// tenth of its CPU on the calls through the nested iterators.
type keyBatcher struct {
	refs  []storage.KeyRef
	yield func([]storage.KeyRef, error) bool
	// keys, when not empty, are the keys of refs (queued by addKey), whose
	// digests flush computes side by side: one at a time, a memory table's
	// keys cost the index side of a verify half its CPU.
	keys     []string
	digests  [][storage.KeyDigestSize]byte
	digester storage.KeyDigester
}

func newKeyBatcher(yield func([]storage.KeyRef, error) bool) *keyBatcher {
	return &keyBatcher{refs: make([]storage.KeyRef, 0, storage.KeyBatchSizeMax), yield: yield}
}

// add queues one record, handing the batch on when it is full. It reports
// whether to go on.
func (b *keyBatcher) add(ref storage.KeyRef) bool {
	b.refs = append(b.refs, ref)
	if len(b.refs) == storage.KeyBatchSizeMax {
		return b.flush()
	}
	return true
}

// addKey queues the record of a key, its digest to be computed at flush.
// A batcher holds records of addKey or of the others, never both.
func (b *keyBatcher) addKey(key string, seq uint64) bool {
	b.keys = append(b.keys, key)
	return b.add(storage.KeyRef{Seq: seq})
}

// addOrFail is add for the record-at-a-time readers (scanPendingKeys,
// scanRecentKeys): an error ends the iteration, the queued records with it.
func (b *keyBatcher) addOrFail(ref storage.KeyRef, err error) bool {
	if err != nil {
		b.yield(nil, err)
		return false
	}
	return b.add(ref)
}

// flush hands on the queued records, if any. It reports whether to go on.
func (b *keyBatcher) flush() bool {
	if len(b.refs) == 0 {
		return true
	}
	if len(b.keys) > 0 {
		if len(b.keys) != len(b.refs) {
			panic("bolt: keyBatcher: records of keys mixed with others")
		}
		if cap(b.digests) < len(b.keys) {
			b.digests = make([][storage.KeyDigestSize]byte, storage.KeyBatchSizeMax)
		}
		b.digests = b.digests[:len(b.keys)]
		b.digester.Digest(b.digests, b.keys)
		for i := range b.refs {
			b.refs[i].Digest = b.digests[i]
		}
		clear(b.keys)
		b.keys = b.keys[:0]
	}
	more := b.yield(b.refs, nil)
	b.refs = b.refs[:0]
	return more
}

// addChunk queues a run chunk's records of the chain, decoded straight into
// the batch, as yieldChunk yields them. last reports that the chunk holds a
// record of a greater chain id, so no later chunk holds any of the chain's.
func (b *keyBatcher) addChunk(chunk []byte, chainID uint64) (more, last bool) {
	for o := 0; o < len(chunk); o += keyindex.RecordSize {
		rec := chunk[o : o+keyindex.RecordSize : o+keyindex.RecordSize]
		switch id := binary.BigEndian.Uint64(rec); {
		case id < chainID:
			continue
		case id > chainID:
			return true, true
		}
		b.refs = append(b.refs, storage.KeyRef{Digest: [KeyDigestSize]byte(rec[8:keyindex.RecordPrefixSize]),
			Seq: binary.BigEndian.Uint64(rec[keyindex.RecordPrefixSize:])})
		if len(b.refs) == storage.KeyBatchSizeMax && !b.flush() {
			return false, true
		}
	}
	return true, false
}

// ScanKeyBatches yields what ScanKeys yields, read the same way, in batches
// (see storage.KeyBatchScanner).
func (t *tx) ScanKeyBatches(ctx context.Context, chain string) iter.Seq2[[]storage.KeyRef, error] {
	return func(yield func([]storage.KeyRef, error) bool) {
		c, found, err := t.scannedChain(chain)
		if err != nil {
			yield(nil, err)
			return
		}
		if !found {
			return
		}
		b := newKeyBatcher(yield)
		if !t.scanPendingKeys(c.id, b.addOrFail) || !t.scanRecentKeys(chain, c.id, b.addOrFail) {
			return
		}
		names, err := t.index.runs.ScanNames(t)
		if err != nil {
			yield(nil, fmt.Errorf("chain %q: %w", chain, err))
			return
		}
		var memory mapscan.Scan
		each := func(chunk []byte) (bool, bool) { return b.addChunk(chunk, c.id) }
		for _, name := range names {
			more, err := t.walkRunChunks(c.id, name, &memory, each)
			if err != nil {
				yield(nil, err)
				return
			}
			if !more {
				return
			}
		}
		b.flush()
	}
}

// ScanKeyBatches recovers from a fault of the map once per iteration, so
// once per batch handed on rather than once per record.
func (g *guardedTx) ScanKeyBatches(ctx context.Context, chain string) iter.Seq2[[]storage.KeyRef, error] {
	return guardedSeq(g, g.t.ScanKeyBatches(ctx, chain))
}

// ScanKeyBatches yields the file's batches, then the keys of the memory
// tables and of the transaction's own appends past the file's head, as
// ScanKeys does.
func (t *logTx) ScanKeyBatches(ctx context.Context, chain string) iter.Seq2[[]storage.KeyRef, error] {
	return func(yield func([]storage.KeyRef, error) bool) {
		if err := t.usable(false); err != nil {
			yield(nil, err)
			return
		}
		baseHead, err := t.baseHeadSeq(ctx, chain)
		if err != nil {
			yield(nil, err)
			return
		}
		for refs, err := range t.base.ScanKeyBatches(ctx, chain) {
			if !yield(refs, err) || err != nil {
				return
			}
		}
		b := newKeyBatcher(yield)
		more := t.memoryEntries(chain, baseHead+1, func(e memtable.Entry) bool {
			if e.Key == "" {
				return true
			}
			return b.addKey(e.Key, e.Seq)
		})
		if more {
			b.flush()
		}
	}
}
