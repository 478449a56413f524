package bolt

import (
	"encoding/binary"
	"fmt"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt/internal/keyindex"
	"github.com/ledgerworks/ledger/storage/bolt/internal/keyrun"
)

// keyFilter returns the filter a lookup of this transaction may consult, or
// nil. A write transaction builds it when there is none that is current or
// when it has outgrown its capacity; read transactions use it only when it
// is current for their snapshot (a read-only handle never has one).
func (t *tx) keyFilter() (*keyindex.Filter, error) {
	if t.index.filterChecked {
		return t.index.filter, nil
	}
	snapshot := t.snapshotTxid()
	f := t.cache.filter.Load().UsableAt(snapshot)
	if !t.tx.Writable() && f == nil {
		// Not remembered: a read transaction that began between a
		// checkpoint's commit and the filter's update (keysCommitted) finds
		// the filter a commit behind, and the log's reads keep one
		// transaction until the next checkpoint, so remembering the miss
		// would send every lookup of that interval to the runs.
		return nil, nil
	}
	t.index.filterChecked = true
	if !t.tx.Writable() || (f != nil && !f.Full()) {
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
func (t *tx) buildKeyFilter(snapshot uint64) (*keyindex.Filter, error) {
	if err := t.loadRuns(); err != nil {
		return nil, err
	}
	recent, err := keyrun.RecentCount(t)
	if err != nil {
		return nil, err
	}
	keys := recent
	for _, r := range t.index.runs.Runs() {
		keys += r.Count()
	}
	budget := t.cache.filterBudget()
	if old := t.cache.filter.Load(); old != nil && budget.BytesMax >= 0 &&
		old.Bytes()+keyindex.FilterBytesFor(keys, budget) > budget.BytesMax {
		// The two do not fit the bound together (MemoryBytesMax): the old
		// one goes first, and until the new one is stored lookups go to
		// the runs, as on a handle without a filter.
		t.cache.dropFilter()
	}
	f := keyindex.NewFilter(keys, budget)
	cur := t.keys().Cursor()
	var n uint64
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		if len(k) < 8 || len(v) != 8 {
			return nil, fmt.Errorf("%s: %w: key index entry %x", t.path, storage.ErrCorrupt, k)
		}
		digest := KeyDigest(string(k[8:]))
		f.AddUnpublished(binary.BigEndian.Uint64(k), digest[:], binary.BigEndian.Uint64(v))
		n++
	}
	err = t.index.runs.EachChunk(t, func(chunk []byte) {
		for o := 0; o < len(chunk); o += keyindex.RecordSize {
			f.AddUnpublished(binary.BigEndian.Uint64(chunk[o:]), chunk[o+8:o+keyindex.RecordPrefixSize], binary.BigEndian.Uint64(chunk[o+keyindex.RecordPrefixSize:]))
		}
		n += uint64(len(chunk) / keyindex.RecordSize)
	})
	if err != nil {
		return nil, err
	}
	f.Built(n, snapshot)
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
	if !f.Commit(txid, records) {
		c.filter.Store(nil)
	}
}

// dropFilter forgets the filter, after a commit whose outcome is unknown.
func (c *runCache) dropFilter() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.filter.Store(nil)
}
