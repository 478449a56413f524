package bolt

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync/atomic"

	"github.com/ledgerworks/ledger/storage"
)

// keyFilter is one blocked Bloom filter over every committed key of the
// index of a file opened for writing: the recent keys and the records of
// every run. A lookup of a new key would otherwise probe the filter of each
// run (about 28 at 1,000,000 keys); with it, a miss proves the key new in one
// cache line, and only a maybe goes on to the recent B-tree and the runs.
//
// Keys never leave the index (runs are merged, never dropped, and the recent
// keys are written out as a run), so a filter current as of commit C holds
// every key of every snapshot up to C. Only the process that holds the
// file's exclusive lock writes it, so the filter cannot miss a key written by
// another. It is filled only from committed state: built from a write
// transaction's snapshot before that transaction changes the index (or,
// at a writable Open, from the file before any writer runs), and updated
// with a transaction's new keys after its commit succeeded.
//
// Words are read and set atomically: read transactions probe it while the
// committer adds to it.
type keyFilter struct {
	words []uint64
	// seqs maps the same keys to their seqs (see seqMap); nil when the
	// handle keeps no seq map.
	seqs *seqMap
	// capacity is the key count the filter was sized for; beyond it the
	// false positive rate climbs and the next write transaction rebuilds it.
	capacity uint64
	count    atomic.Uint64
	// asOf is the id of the newest commit whose keys the filter holds.
	asOf atomic.Uint64
}

const (
	// keyFilterCapacityMin is the smallest capacity a filter is built with.
	keyFilterCapacityMin = 1 << 16
	// keyFilterGrowth is the capacity of a built filter as a multiple of the
	// keys it holds: rebuilt each time the keys triple, a key is read about
	// half a time more in amortized terms, and the filter costs 1.25 to 3.75
	// bytes per key. Not a power of two: the key runs merge when a level
	// holds KeyRunFanout (8) runs of one checkpoint's size, so with a
	// doubling every merge of a level came with a rebuild in the same
	// checkpoint (both at 464,000 and 928,000 keys with the default memory
	// table), two reads of the whole index at once on the checkpoint's core.
	keyFilterGrowth = 3
)

// newKeyFilter returns a filter for keys keys and more, with a seq map
// when seqMapBytesMax allows one (negative: never; see newSeqMap).
func newKeyFilter(keys uint64, seqMapBytesMax int64) *keyFilter {
	capacity := max(keys*keyFilterGrowth, keyFilterCapacityMin)
	return &keyFilter{words: newFilter(capacity), seqs: newSeqMap(keys, capacity, seqMapBytesMax), capacity: capacity}
}

// addUnpublished sets a key's bits in a filter no other goroutine sees yet,
// with plain stores: building one from 10,000,000 keys takes about half as
// long as with atomic ones. The seq map, if any, takes the key's seq.
func (f *keyFilter) addUnpublished(chainID uint64, digest []byte, seq uint64) {
	filterAdd(f.words, chainID, digest)
	if f.seqs != nil {
		f.seqs.add(chainID, digest, seq)
	}
}

// add sets a key's bits in a published filter, and its seq in the seq map.
// Only one goroutine adds at a time (runCache.keysCommitted, under the
// cache's lock).
func (f *keyFilter) add(chainID uint64, digest []byte, seq uint64) {
	if f.seqs != nil {
		f.seqs.add(chainID, digest, seq)
	}
	h1, h2 := filterHashes(chainID, digest)
	block, _ := bits.Mul64(h1, uint64(len(f.words)/filterBlockWords))
	var mask [filterBlockWords]uint64
	for i := range filterProbes {
		bit := (h2 >> (9 * i)) & 511
		mask[bit/64] |= 1 << (bit % 64)
	}
	words := f.words[block*filterBlockWords : (block+1)*filterBlockWords]
	for i, m := range mask {
		if m != 0 {
			atomic.OrUint64(&words[i], m)
		}
	}
}

// mayContain reports whether the key may be in the index; false is a proof
// that it is not.
func (f *keyFilter) mayContain(chainID uint64, digest []byte) bool {
	h1, h2 := filterHashes(chainID, digest)
	block, _ := bits.Mul64(h1, uint64(len(f.words)/filterBlockWords))
	words := f.words[block*filterBlockWords : (block+1)*filterBlockWords]
	for i := range filterProbes {
		bit := (h2 >> (9 * i)) & 511
		if atomic.LoadUint64(&words[bit/64])&(1<<(bit%64)) == 0 {
			return false
		}
	}
	return true
}

// usableAt returns the filter when it holds every key of the snapshot.
func (f *keyFilter) usableAt(snapshot uint64) *keyFilter {
	if f != nil && f.asOf.Load() >= snapshot {
		return f
	}
	return nil
}

// keyFilter returns the filter a lookup of this transaction may consult, or
// nil. A write transaction builds it when there is none that is current or
// when it has outgrown its capacity; read transactions use it only when it
// is current for their snapshot (a read-only handle never has one).
func (t *tx) keyFilter() (*keyFilter, error) {
	if t.index.filterChecked {
		return t.index.filter, nil
	}
	snapshot := t.snapshotTxid()
	f := t.cache.filter.Load().usableAt(snapshot)
	if !t.tx.Writable() && f == nil {
		// Not remembered: a read transaction that began between a
		// checkpoint's commit and the filter's update (keysCommitted) finds
		// the filter a commit behind, and the log's reads keep one
		// transaction until the next checkpoint, so remembering the miss
		// would send every lookup of that interval to the runs.
		return nil, nil
	}
	t.index.filterChecked = true
	if !t.tx.Writable() || (f != nil && f.count.Load() <= f.capacity) {
		t.index.filter = f
		return f, nil
	}
	f, err := t.buildKeyFilter(snapshot)
	if err != nil {
		return nil, err
	}
	t.cache.mu.Lock()
	t.cache.filter.Store(f)
	t.cache.mu.Unlock()
	t.index.filter = f
	return f, nil
}

// buildKeyFilter reads every key of the index as of this write
// transaction's snapshot, which it has not changed yet: keys reach the file
// only in prepareCommit.
func (t *tx) buildKeyFilter(snapshot uint64) (*keyFilter, error) {
	if err := t.loadRuns(); err != nil {
		return nil, err
	}
	recent, err := t.recentCount()
	if err != nil {
		return nil, err
	}
	keys := recent
	for _, r := range t.index.runs {
		keys += r.count
	}
	f := newKeyFilter(keys, t.cache.seqMapBytesMax)
	cur := t.keys().Cursor()
	var n uint64
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		if len(k) < 8 || len(v) != 8 {
			return nil, fmt.Errorf("%s: %w: key index entry %x", t.path, storage.ErrCorrupt, k)
		}
		digest := KeyDigest(string(k[8:]))
		f.addUnpublished(binary.BigEndian.Uint64(k), digest[:], binary.BigEndian.Uint64(v))
		n++
	}
	for _, r := range t.index.runs {
		b := t.runs().Bucket(r.name[:])
		if b == nil {
			return nil, fmt.Errorf("%s: %w: key run %x missing", t.path, storage.ErrCorrupt, r.name)
		}
		rc := b.Cursor()
		for k, v := rc.First(); k != nil && len(k) == keyRecordPrefix; k, v = rc.Next() {
			if len(v)%keyRecordSize != 0 {
				return nil, fmt.Errorf("%s: %w: key run %x chunk of %d bytes", t.path, storage.ErrCorrupt, r.name, len(v))
			}
			for o := 0; o < len(v); o += keyRecordSize {
				f.addUnpublished(binary.BigEndian.Uint64(v[o:]), v[o+8:o+keyRecordPrefix], binary.BigEndian.Uint64(v[o+keyRecordPrefix:]))
			}
			n += uint64(len(v) / keyRecordSize)
		}
	}
	f.count.Store(n)
	f.asOf.Store(snapshot)
	return f, nil
}

// keysCommitted adds the keys of the commit txid (records of keyRecordSize
// bytes) to the filter, which then holds every key as of txid. A filter that
// missed a commit is dropped; the next write transaction builds a new one.
func (c *runCache) keysCommitted(txid uint64, records []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.filter.Load()
	if f == nil {
		return
	}
	if f.asOf.Load() != txid-1 {
		c.filter.Store(nil)
		return
	}
	for o := 0; o < len(records); o += keyRecordSize {
		f.add(binary.BigEndian.Uint64(records[o:]), records[o+8:o+keyRecordPrefix], binary.BigEndian.Uint64(records[o+keyRecordPrefix:]))
	}
	f.count.Add(uint64(len(records) / keyRecordSize))
	f.asOf.Store(txid)
}

// dropFilter forgets the filter, after a commit whose outcome is unknown.
func (c *runCache) dropFilter() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.filter.Store(nil)
}
