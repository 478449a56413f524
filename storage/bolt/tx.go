package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync/atomic"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt/internal/mapscan"
	"github.com/ledgerworks/ledger/storage/bolt/internal/readpool"
	"github.com/ledgerworks/ledger/storage/bolt/internal/segment"
)

// tx is a storage.Tx over one bbolt transaction.
type tx struct {
	tx   *bbolt.Tx
	path string
	done bool
	// The buckets, opened when first used: opening one is a lookup, and a
	// replay needs four of the six.
	chainsBucket, segmentsBucket, keysBucket *bbolt.Bucket
	stateBucket, metaBucket, runsBucket      *bbolt.Bucket
	cache                                    *runCache
	index                                    keyIndex
	// scratch is where a write transaction hands its memory back when it
	// ends (see Backend.scratch).
	scratch *atomic.Pointer[writeScratch]
	// heads holds the chain records this write transaction changed; they
	// are written once, at commit, however many entries a chain received.
	heads map[string]*chainRecord
	// lastMiss is the index key of the newest LookupKey that found nothing;
	// an Append of that key right after needs no second lookup.
	lastMiss []byte
	// lastMissDigest is the digest of that key.
	lastMissDigest [KeyDigestSize]byte
	// readers is set on a writable transaction begun by beginBolt, which
	// counted it in the pool of read transactions; finishWrite ends that.
	readers *readpool.Pool[*tx]
	// keysProvenNew is set on a checkpoint's transaction: every key it
	// appends was looked up by the log commit that recorded it, against
	// everything committed before, so it is indexed without a lookup.
	keysProvenNew bool
	// nextKeyDigest, when set on a checkpoint's transaction, is the digest
	// of the key of the next Append, which the checkpoint computed in a
	// batch with its neighbours'; Append uses it once.
	nextKeyDigest *[KeyDigestSize]byte
	// newChains lists the chains this write transaction created: their ids
	// go to the backend's map once the commit has succeeded.
	newChains []newChain
	// builders hold the entries this write transaction appended to each
	// chain (by id) that have not filled a segment yet; arena is the
	// memory of the segments it sealed, which bbolt reads until the
	// commit.
	builders map[uint64]*segment.Builder
	arena    []byte
	// segmentsCursor is a read transaction's cursor on the segments, kept
	// for its next lookups (a replay makes one on a pooled transaction):
	// bbolt allocates a cursor, and grows its stack, on every Get.
	// seekKey is the key a lookup seeks.
	segmentsCursor *bbolt.Cursor
	seekKey        [segment.KeySize]byte
	// segmentIndex maps the segments of the chain a read transaction
	// reads many entries of (internal/segment).
	segmentIndex segment.Index
	// lastChain is the chain record a read transaction read last.
	lastChain struct {
		name   string
		record chainRecord
		ok     bool
	}
}

func (t *tx) Writable() bool { return t.tx.Writable() }

func (t *tx) bucket(b **bbolt.Bucket, name []byte) *bbolt.Bucket {
	if *b == nil {
		*b = t.tx.Bucket(name)
	}
	return *b
}

func (t *tx) chains() *bbolt.Bucket { return t.bucket(&t.chainsBucket, BucketChains) }
func (t *tx) keys() *bbolt.Bucket   { return t.bucket(&t.keysBucket, BucketKeys) }
func (t *tx) state() *bbolt.Bucket  { return t.bucket(&t.stateBucket, BucketState) }
func (t *tx) meta() *bbolt.Bucket   { return t.bucket(&t.metaBucket, BucketMeta) }

// runs is nil in a read-only view of a FormatV1 file.
func (t *tx) runs() *bbolt.Bucket { return t.bucket(&t.runsBucket, BucketKeyRuns) }

// segments returns the entry_segments bucket, or nil in a file of an
// older format (read-only, or not yet upgraded), whose entries are one per
// key in the entries bucket.
func (t *tx) segments() *bbolt.Bucket {
	if t.segmentsBucket == nil {
		t.segmentsBucket = t.tx.Bucket(BucketSegments)
		if t.segmentsBucket != nil && t.tx.Writable() {
			t.segmentsBucket.FillPercent = 1.0 // append-only: pack pages full
		}
	}
	return t.segmentsBucket
}

func (t *tx) usable(write bool) error {
	if t.done {
		return storage.ErrTxDone
	}
	if write && !t.tx.Writable() {
		return storage.ErrReadOnly
	}
	return nil
}

// scannedChain is the record of a chain a scan (Entries, ScanKeys) walks:
// found is false, with no error, for a chain with no entries, which a scan
// yields nothing for.
func (t *tx) scannedChain(name string) (c chainRecord, found bool, err error) {
	if err := t.usable(false); err != nil {
		return chainRecord{}, false, err
	}
	c, err = t.chain(name)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return chainRecord{}, false, nil
	case err != nil:
		return chainRecord{}, false, err
	}
	return c, true, nil
}

func (t *tx) chain(name string) (chainRecord, error) {
	if c, ok := t.heads[name]; ok {
		return *c, nil
	}
	if t.lastChain.ok && t.lastChain.name == name {
		return t.lastChain.record, nil
	}
	v := t.chains().Get([]byte(name))
	if v == nil {
		return chainRecord{}, storage.ErrNotFound
	}
	c, err := decodeChain(v)
	if err != nil {
		return chainRecord{}, fmt.Errorf("chain %q: %w", name, err)
	}
	if !t.tx.Writable() { // a replay reads the chain twice: key, then entry
		t.lastChain.name, t.lastChain.record, t.lastChain.ok = name, c, true
	}
	return c, nil
}

// chainID returns the id of a chain, from the backend's map of committed
// chains when it is there: a lookup by key or seq needs the id, not the
// head, and an id holds in every snapshot (see chainIDs). The id of a chain
// created after this transaction's snapshot finds nothing in it, as the
// missing chain record would.
func (t *tx) chainID(name string) (uint64, error) {
	if c, ok := t.heads[name]; ok {
		return c.id, nil
	}
	if id, ok := t.cache.chains.get(name); ok {
		return id, nil
	}
	c, err := t.chain(name)
	if err != nil {
		return 0, err
	}
	t.cache.chains.add(name, c.id) // read from the file: committed
	return c.id, nil
}

func (t *tx) Head(ctx context.Context, chain string) (storage.Head, error) {
	if err := t.usable(false); err != nil {
		return storage.Head{}, err
	}
	c, err := t.chain(chain)
	if err != nil {
		return storage.Head{}, err
	}
	return c.head, nil
}

func (t *tx) Append(ctx context.Context, chain string, rec storage.Record, head storage.Head) error {
	proven := t.nextKeyDigest
	t.nextKeyDigest = nil
	if err := t.usable(true); err != nil {
		return err
	}
	if rec.Seq != head.Seq || rec.Seq == 0 {
		return fmt.Errorf("append %q: record seq %d, head seq %d: %w", chain, rec.Seq, head.Seq, storage.ErrDuplicate)
	}
	c, err := t.chain(chain)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		if rec.Seq != 1 {
			return fmt.Errorf("append %q: first seq %d: %w", chain, rec.Seq, storage.ErrDuplicate)
		}
		if c.id, err = t.nextChainID(); err != nil {
			return err
		}
		t.newChains = append(t.newChains, newChain{name: chain, id: c.id})
	case err != nil:
		return err
	case rec.Seq != c.head.Seq+1:
		return fmt.Errorf("append %q: seq %d after head %d: %w", chain, rec.Seq, c.head.Seq, storage.ErrDuplicate)
	}
	if rec.IdempotencyKey != "" {
		digest := t.lastMissDigest
		switch {
		case t.keysProvenNew:
			// The filter is still taken, as a lookup would: a write
			// transaction is where it is built again when it is missing
			// or has outgrown its capacity.
			if _, err := t.keyFilter(); err != nil {
				return err
			}
			if proven != nil {
				digest = *proven
			} else {
				digest = KeyDigest(rec.IdempotencyKey)
			}
		case !t.justMissed(c.id, rec.IdempotencyKey):
			var found bool
			_, found, digest, err = t.lookupKey(c.id, rec.IdempotencyKey)
			if err != nil {
				return err
			}
			if found {
				return fmt.Errorf("append %q: key %q: %w", chain, rec.IdempotencyKey, storage.ErrDuplicate)
			}
		}
		t.addKey(c.id, rec.IdempotencyKey, rec.Seq, &digest)
	}
	t.lastMiss = t.lastMiss[:0]
	if err := t.appendEntry(c.id, rec.Seq, rec.Data); err != nil {
		return err
	}
	c.head = head
	if p, ok := t.heads[chain]; ok {
		*p = c
		return nil
	}
	if t.heads == nil {
		t.heads = make(map[string]*chainRecord)
	}
	t.heads[chain] = newChainRecord(c) // on the heap only at a chain's first append, not c at every append
	return nil
}

func newChainRecord(c chainRecord) *chainRecord { return &c }

// justMissed reports whether the newest LookupKey looked for this key and
// found nothing, with no append since.
func (t *tx) justMissed(chainID uint64, key string) bool {
	return len(t.lastMiss) == 8+len(key) && binary.BigEndian.Uint64(t.lastMiss) == chainID && string(t.lastMiss[8:]) == key
}

// flushHeads writes the chain records this transaction changed.
func (t *tx) flushHeads() error {
	names := make([]string, 0, len(t.heads))
	for name := range t.heads {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := t.chains().Put([]byte(name), encodeChain(*t.heads[name])); err != nil {
			return t.writeError(err)
		}
	}
	clear(t.heads)
	return nil
}

func (t *tx) nextChainID() (uint64, error) {
	v := t.meta().Get(metaNextChainID)
	if len(v) != 8 {
		return 0, fmt.Errorf("%s: %w: next_chain_id of %d bytes", t.path, storage.ErrCorrupt, len(v))
	}
	id := binary.BigEndian.Uint64(v)
	if err := t.meta().Put(metaNextChainID, binary.BigEndian.AppendUint64(nil, id+1)); err != nil {
		return 0, t.writeError(err)
	}
	return id, nil
}

func (t *tx) writeError(err error) error {
	return fmt.Errorf("write %s: %w: %v", t.path, storage.ErrIO, err)
}

func (t *tx) Entry(ctx context.Context, chain string, seq uint64) ([]byte, error) {
	if err := t.usable(false); err != nil {
		return nil, err
	}
	id, err := t.chainID(chain)
	if err != nil {
		return nil, err
	}
	return t.entryAt(id, seq)
}

// entryAt returns the stored bytes of the entry (chain id, seq), valid
// while the transaction lasts, or storage.ErrNotFound.
func (t *tx) entryAt(id, seq uint64) ([]byte, error) {
	if b := t.builders[id]; b != nil && !b.Empty() && seq >= b.First && seq <= b.Last() {
		return b.Entry(seq), nil
	}
	segments := t.segments()
	if segments == nil {
		return legacyEntry(t.tx, id, seq)
	}
	if data, ok, err := t.indexedEntry(id, seq); ok {
		return data, err
	}
	binary.BigEndian.PutUint64(t.seekKey[:8], id)
	binary.BigEndian.PutUint64(t.seekKey[8:], seq)
	k, v := t.segmentCursor(segments).Seek(t.seekKey[:])
	if len(k) < 8 || binary.BigEndian.Uint64(k) != id {
		return nil, storage.ErrNotFound
	}
	return t.segmentEntry(id, seq, k, v)
}

// segmentEntry returns the entry (chain id, seq) of the segment stored
// under key, the first whose last seq is at or after seq, or
// storage.ErrNotFound when the segment begins after seq.
func (t *tx) segmentEntry(id, seq uint64, key, value []byte) ([]byte, error) {
	s, err := segment.Decode(key, value)
	if err != nil {
		return nil, fmt.Errorf("%s: chain id %d seq %d: %w", t.path, id, seq, err)
	}
	if seq < s.First {
		return nil, storage.ErrNotFound
	}
	return s.SeqEntry(seq)
}

func (t *tx) LookupKey(ctx context.Context, chain, key string) (uint64, error) {
	if err := t.usable(false); err != nil {
		return 0, err
	}
	id, err := t.chainID(chain)
	if err != nil {
		return 0, err
	}
	seq, found, digest, err := t.lookupKey(id, key)
	if err != nil {
		return 0, fmt.Errorf("key %q of chain %q: %w", key, chain, err)
	}
	if !found {
		if t.tx.Writable() {
			t.lastMiss = append(binary.BigEndian.AppendUint64(t.lastMiss[:0], id), key...)
			t.lastMissDigest = digest
		}
		return 0, storage.ErrNotFound
	}
	return seq, nil
}

func (t *tx) Entries(ctx context.Context, chain string, fromSeq uint64) iter.Seq2[storage.Record, error] {
	return func(yield func(storage.Record, error) bool) {
		c, found, err := t.scannedChain(chain)
		if err != nil {
			yield(storage.Record{}, err)
		}
		if !found {
			return
		}
		if t.segments() == nil {
			legacyEntries(t.tx, chain, c.id, fromSeq, yield)
			return
		}
		if err := t.flushSegments(); err != nil {
			yield(storage.Record{}, err)
			return
		}
		t.scanSegments(chain, c.id, fromSeq, yield)
	}
}

// scanSegments yields the chain's entries from fromSeq, segment by segment.
// Segments of one chain follow each other in seq order: one that starts at
// or before the previous one's end is reported as damage, as is a segment
// that does not decode.
func (t *tx) scanSegments(chain string, id, fromSeq uint64, yield func(storage.Record, error) bool) {
	cur := t.segments().Cursor()
	var memory mapscan.Scan
	var previous uint64 // last seq yielded
	for k, v := cur.Seek(entryKey(id, fromSeq)); len(k) >= 8 && binary.BigEndian.Uint64(k) == id; k, v = cur.Next() {
		memory.Observe(v)
		s, err := segment.Decode(k, v)
		if err == nil && previous != 0 && s.First <= previous {
			err = fmt.Errorf("%w: entry segment of seqs %d..%d after seq %d", storage.ErrCorrupt, s.First, s.Last, previous)
		}
		if err != nil {
			yield(storage.Record{}, fmt.Errorf("chain %q: %w", chain, err))
			return
		}
		for seq := max(s.First, fromSeq); seq <= s.Last; seq++ {
			data, err := s.SeqEntry(seq)
			if err != nil {
				yield(storage.Record{}, fmt.Errorf("chain %q: %w", chain, err))
				return
			}
			if !yield(storage.Record{Seq: seq, Data: data}, nil) {
				return
			}
			previous = seq
		}
	}
}

func (t *tx) Chains(ctx context.Context, from string) iter.Seq2[storage.ChainHead, error] {
	return func(yield func(storage.ChainHead, error) bool) {
		if err := t.usable(false); err != nil {
			yield(storage.ChainHead{}, err)
			return
		}
		if err := t.flushHeads(); err != nil {
			yield(storage.ChainHead{}, err)
			return
		}
		cur := t.chains().Cursor()
		for k, v := cur.Seek([]byte(from)); k != nil; k, v = cur.Next() {
			c, err := decodeChain(v)
			if err != nil {
				yield(storage.ChainHead{}, fmt.Errorf("chain %q: %w", k, err))
				return
			}
			if !yield(storage.ChainHead{Chain: string(k), Head: c.head}, nil) {
				return
			}
		}
	}
}

func (t *tx) StateGet(ctx context.Context, key []byte) ([]byte, error) {
	if err := t.usable(false); err != nil {
		return nil, err
	}
	v := t.state().Get(key)
	if v == nil {
		return nil, storage.ErrNotFound
	}
	return v, nil
}

func (t *tx) StatePut(ctx context.Context, key, value []byte) error {
	if err := t.usable(true); err != nil {
		return err
	}
	if value == nil {
		value = []byte{}
	}
	if err := t.state().Put(key, value); err != nil {
		return t.writeError(err)
	}
	return nil
}

func (t *tx) StateDelete(ctx context.Context, key []byte) error {
	if err := t.usable(true); err != nil {
		return err
	}
	if err := t.state().Delete(key); err != nil {
		return t.writeError(err)
	}
	return nil
}

func (t *tx) StateScan(ctx context.Context, start, end []byte, reverse bool) iter.Seq2[storage.KeyValue, error] {
	return func(yield func(storage.KeyValue, error) bool) {
		if err := t.usable(false); err != nil {
			yield(storage.KeyValue{}, err)
			return
		}
		cur := t.state().Cursor()
		inRange := func(k []byte) bool {
			return k != nil && bytes.Compare(k, start) >= 0 && (end == nil || bytes.Compare(k, end) < 0)
		}
		var k, v []byte
		if !reverse {
			for k, v = cur.Seek(start); inRange(k); k, v = cur.Next() {
				if !yield(storage.KeyValue{Key: k, Value: v}, nil) {
					return
				}
			}
			return
		}
		if end == nil {
			k, v = cur.Last()
		} else if k, _ = cur.Seek(end); k == nil {
			k, v = cur.Last()
		} else {
			k, v = cur.Prev()
		}
		for ; inRange(k); k, v = cur.Prev() {
			if !yield(storage.KeyValue{Key: k, Value: v}, nil) {
				return
			}
		}
	}
}

// release hands the write transaction's memory to the next one; the
// transaction has ended, so nothing reads it any more.
func (t *tx) release() {
	if t.scratch == nil || len(t.index.pending) > scratchKeysMax {
		return
	}
	clear(t.index.pending)
	t.scratch.Store(&writeScratch{pending: t.index.pending, records: t.index.records[:0]})
	t.scratch, t.index.pending, t.index.records = nil, nil, nil
}

func (t *tx) Commit() error {
	if t.done {
		return storage.ErrTxDone
	}
	t.done = true
	defer t.release()
	if !t.tx.Writable() {
		return t.tx.Rollback()
	}
	if err := t.prepareCommit(); err != nil {
		t.tx.Rollback()
		t.finishWrite(readpool.WriteRolledBack, 0)
		return err
	}
	txid := uint64(t.tx.ID())
	err := t.tx.Commit()
	if err == nil {
		t.finishWrite(readpool.WriteCommitted, txid)
	} else {
		t.finishWrite(readpool.WriteFailed, 0)
	}
	if err != nil {
		// bbolt may have written the meta page before it failed: the
		// filter can no longer prove what the file holds, nor the map of
		// chain ids which chains it has.
		t.cache.dropFilter()
		if len(t.newChains) > 0 {
			t.cache.chains.complete.Store(false)
		}
		return fmt.Errorf("commit %s: %w: %v", t.path, storage.ErrIO, err)
	}
	return nil
}

// prepareCommit writes what the transaction kept in memory: chain heads and
// new idempotency keys, and tells the backend's cache about the runs once the
// commit has succeeded.
func (t *tx) prepareCommit() error {
	if err := t.flushSegments(); err != nil {
		return err
	}
	if err := t.flushHeads(); err != nil {
		return err
	}
	if err := t.flushKeys(); err != nil {
		return err
	}
	txid := uint64(t.tx.ID())
	records := t.index.records
	if created := t.newChains; len(created) > 0 {
		t.tx.OnCommit(func() {
			for _, c := range created {
				t.cache.chains.add(c.name, c.id)
			}
		})
	}
	t.tx.OnCommit(func() { t.cache.keysCommitted(txid, records) })
	if onCommit := t.index.runs.Committed(t, txid); onCommit != nil {
		t.tx.OnCommit(onCommit)
	}
	return nil
}

func (t *tx) Rollback() error {
	if t.done {
		return nil
	}
	t.done = true
	defer t.release()
	err := t.tx.Rollback()
	t.finishWrite(readpool.WriteRolledBack, 0)
	if err != nil {
		return fmt.Errorf("rollback %s: %w: %v", t.path, storage.ErrIO, err)
	}
	return nil
}

// finishWrite tells the pool of read transactions how a writable
// transaction ended, once (a read transaction has nothing to tell); txid is
// the committed transaction's id.
func (t *tx) finishWrite(outcome readpool.WriteOutcome, txid uint64) {
	if t.readers == nil {
		return
	}
	r := t.readers
	t.readers = nil
	r.EndWrite(outcome, txid)
}

// BoltTx returns the bbolt transaction, for the read pool.
func (t *tx) BoltTx() *bbolt.Tx { return t.tx }

// Pooled marks t ended while the read pool keeps it (kept) and begun again
// when the pool hands it out.
func (t *tx) Pooled(kept bool) { t.done = kept }
