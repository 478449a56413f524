package bolt

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt/internal/keyindex"
)

// The idempotency index has two parts (see the package documentation):
//
//   - recent keys, exact, in the B-tree of BucketKeys, which small
//     transactions write cheaply;
//   - immutable sorted runs of key digests in BucketKeyRuns, each with a
//     Bloom filter, written sequentially and merged by the committing
//     transaction when a level is full (size-tiered, KeyRunFanout runs per
//     level).
//
// A random key inserted into a large B-tree dirties a page of its own, so
// a B-tree index costs a page write per key once it outgrows the batch; runs
// are written and merged in key order, a few sequential pages per thousand
// keys, and their filters keep a lookup of a new key in memory.
const (
	// KeyRecentMax is how many keys the recent B-tree holds before they are
	// written out as a run.
	KeyRecentMax = 4096
	// KeyRunDirectMin is how many new keys a transaction needs to write them
	// as a run directly instead of through the recent B-tree. A run of
	// sixteen keys is one leaf written in order; the same keys scattered over
	// the recent B-tree dirty about a leaf each, a quarter of the CPU of a
	// group commit of 64 appends (8, 16 and 32 measured in
	// docs/PERFORMANCE.md).
	KeyRunDirectMin = 16
	// KeyRunFanout is how many runs of one level are merged into one run of
	// a higher level.
	KeyRunFanout = 8
)

// keyRunName is the name of a run: u8 level | u64be id of the transaction
// that wrote it.
type keyRunName [9]byte

func runName(level uint8, txid uint64) keyRunName {
	var n keyRunName
	n[0] = level
	binary.BigEndian.PutUint64(n[1:], txid)
	return n
}

var (
	runFilterKey = []byte("filter")
	runCountKey  = []byte("count")
)

// keyRun is what a lookup needs to know of a run without reading it: its
// name, size and filter (a copy, so it outlives transactions and remaps).
type keyRun struct {
	name   keyRunName
	count  uint64
	filter []uint64
	// radix maps digests to ranges of the run's chunks (see runRadix);
	// nil until a write of the run or a read transaction's table of it
	// builds one.
	radix atomic.Pointer[keyindex.Radix]
}

func (r *keyRun) level() uint8 { return r.name[0] }

// KeyDigest is the digest that stands for an idempotency key in the runs:
// storage.KeyDigest, the first KeyDigestSize bytes of
// BLAKE3-256("ledger/key/v1" || 0x00 || key).
func KeyDigest(key string) [KeyDigestSize]byte { return storage.KeyDigest(key) }

// runLevel is the level of a run of count records: floor(log8(count)).
func runLevel(count uint64) uint8 {
	if count == 0 {
		return 0
	}
	return uint8((bits.Len64(count) - 1) / 3)
}

// runCache holds what the backend knows of the runs across transactions:
// the filters of committed runs, and the list of runs as of one committed
// transaction id. Both are only ever filled from committed state.
type runCache struct {
	mu          sync.Mutex
	filters     map[keyRunName]*keyRun
	deletedUpTo uint64 // the newest commit that deleted runs
	list        atomic.Pointer[runList]
	// filter covers every committed key (see keyFilter); nil until a write
	// transaction or a writable Open (prepareProbe) builds it, so a
	// read-only handle never has one.
	filter atomic.Pointer[keyindex.Filter]
	// chains holds the ids of committed chains (see chainIDs).
	chains chainIDs
	// seqMapBytesMax bounds the seq map of each filter built (see
	// newSeqMap): negative when the handle keeps none.
	seqMapBytesMax int64
}

type runList struct {
	txid uint64
	runs []*keyRun
}

func newRunCache() *runCache {
	return &runCache{filters: map[keyRunName]*keyRun{}, seqMapBytesMax: -1}
}

func (c *runCache) get(name keyRunName) *keyRun {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.filters[name]
}

// remember caches a run a transaction with snapshot snapshotTxid read; runs
// read from a snapshot older than the last deletion may be gone already.
func (c *runCache) remember(r *keyRun, snapshotTxid uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if snapshotTxid >= c.deletedUpTo {
		c.filters[r.name] = r
	}
}

// committed records a commit's effect on the runs.
func (c *runCache) committed(txid uint64, runs []*keyRun, created []*keyRun, deleted []keyRunName) {
	c.mu.Lock()
	for _, r := range created {
		c.filters[r.name] = r
	}
	for _, n := range deleted {
		delete(c.filters, n)
	}
	if len(deleted) > 0 {
		c.deletedUpTo = txid
	}
	c.mu.Unlock()
	c.list.Store(&runList{txid: txid, runs: runs})
}

// keyIndex is one transaction's view of the index.
type keyIndex struct {
	runs    []*keyRun
	loaded  bool
	pending map[pendingKey]uint64 // the keys new in this transaction -> seq
	// provenKeys counts the keys of a checkpoint's transaction
	// (tx.keysProvenNew), which nothing looks up before it commits: they
	// skip the pending map, and only the first KeyRunDirectMin-1 are kept
	// (provenFew), for a batch too small to be a run.
	provenKeys int
	provenFew  []provenKey
	// records holds the run records of the pending keys, in append order:
	// their digests are computed once, by the lookup that proved them new.
	records []byte
	// filter is the filter this transaction consults (nil: none);
	// filterChecked tells that it was looked for.
	filter        *keyindex.Filter
	filterChecked bool
	created       []*keyRun
	deleted       []keyRunName
	changed       bool
	// opened holds the run buckets a read transaction has opened: opening
	// one is a lookup, and a verify looks up every key of a chain.
	opened map[keyRunName]*bbolt.Bucket
	// cursors holds a cursor on each run a read transaction has searched
	// (see runCursor).
	cursors map[keyRunName]*bbolt.Cursor
	// tables holds the chunk table of each run a read transaction has
	// searched runTableAfter times (see runTable).
	tables map[keyRunName]*runTable
	// tableAt holds the built tables of a read transaction by the index of
	// their run in runs, which a read transaction loads once: a lookup
	// then finds a run's table at an index instead of hashing its name.
	tableAt []*runTable
}

// runTable is a read transaction's table of one run's chunks: each chunk's
// key, decoded, and its records in the map, which stay in place while the
// transaction lives. A search in it costs no B-tree descent.
type runTable struct {
	searches int               // searches made through the cursor before the table was built
	last     []keyindex.Prefix // the prefix of each chunk's last record (its key), ascending
	chunks   [][]byte
}

const (
	// runTableAfter is how many searches of one run a read transaction
	// makes through a cursor before it builds the run's table: a table
	// reads every chunk's key (31 values for 1,000,000 keys), a seek one
	// descent, and a transaction that serves one replay makes one search.
	runTableAfter = 8
	// runTableChunksMax bounds a table: a run of more chunks (a file
	// written with keyChunkRecordsV1, 8,300 chunks per 1,000,000 keys) is
	// searched through its cursor.
	runTableChunksMax = 1024
)

func (t *tx) snapshotTxid() uint64 {
	id := uint64(t.tx.ID())
	if t.tx.Writable() {
		id-- // a write transaction carries the id it will commit as
	}
	return id
}

// loadRuns reads the list of runs of the transaction's snapshot, from the
// backend's cache when it is of the same snapshot.
func (t *tx) loadRuns() error {
	if t.index.loaded {
		return nil
	}
	snapshot := t.snapshotTxid()
	if l := t.cache.list.Load(); l != nil && l.txid == snapshot {
		t.index.runs, t.index.loaded = l.runs, true
		if t.tx.Writable() { // it changes its list; readers share the cached one
			t.index.runs = slices.Clone(l.runs)
		}
		return nil
	}
	var runs []*keyRun
	if t.runs() != nil {
		cur := t.runs().Cursor()
		for k, v := cur.First(); k != nil; k, v = cur.Next() {
			if v != nil || len(k) != len(keyRunName{}) {
				return fmt.Errorf("%s: %w: key run %x", t.path, storage.ErrCorrupt, k)
			}
			name := keyRunName(k)
			r := t.cache.get(name)
			if r == nil {
				var err error
				if r, err = t.readRun(name); err != nil {
					return err
				}
				t.cache.remember(r, snapshot)
			}
			runs = append(runs, r)
		}
	}
	t.index.runs, t.index.loaded = runs, true
	if !t.tx.Writable() {
		t.cache.list.Store(&runList{txid: snapshot, runs: slices.Clone(runs)})
	}
	return nil
}

func (t *tx) readRun(name keyRunName) (*keyRun, error) {
	b := t.runs().Bucket(name[:])
	if b == nil {
		return nil, fmt.Errorf("%s: %w: key run %x is not a bucket", t.path, storage.ErrCorrupt, name)
	}
	cv, fv := b.Get(runCountKey), b.Get(runFilterKey)
	if len(cv) != 8 || len(fv) == 0 || len(fv)%(keyindex.FilterBlockWords*8) != 0 {
		return nil, fmt.Errorf("%s: %w: key run %x header", t.path, storage.ErrCorrupt, name)
	}
	r := &keyRun{name: name, count: binary.BigEndian.Uint64(cv), filter: make([]uint64, len(fv)/8)}
	for i := range r.filter {
		r.filter[i] = binary.LittleEndian.Uint64(fv[8*i:])
	}
	return r, nil
}

// lookupKey finds the seq of (chain id, key) in the index. It returns the
// key's digest as well, which an append of a new key records.
func (t *tx) lookupKey(chainID uint64, key string) (uint64, bool, [KeyDigestSize]byte, error) {
	if t.keysProvenNew {
		panic("bolt: a lookup in a checkpoint's transaction, whose new keys are not in the pending map")
	}
	var digest [KeyDigestSize]byte
	if seq, ok := t.index.pending[pendingKey{chainID, key}]; ok {
		return seq, true, digest, nil
	}
	digest = KeyDigest(key)
	f, err := t.keyFilter()
	if err != nil {
		return 0, false, digest, err
	}
	if f != nil && !f.MayContain(chainID, digest[:]) {
		return 0, false, digest, nil
	}
	seq, found, err := t.lookupDigest(chainID, key, &digest)
	return seq, found, digest, err
}

// lookupDigest is the file's part of lookupKey, for a caller that has the
// key's digest and has asked the key filter already: the runs before the
// recent B-tree (a key is in exactly one of them, the runs hold nearly
// every key, all of them with the log, whose checkpoints write runs
// directly, and a run costs a filter probe unless it may hold the key,
// where the recent B-tree costs opening its bucket and a descent); newest
// and highest levels first, since the highest levels hold most keys.
func (t *tx) lookupDigest(chainID uint64, key string, digest *[KeyDigestSize]byte) (uint64, bool, error) {
	if err := t.loadRuns(); err != nil {
		return 0, false, err
	}
	var target [keyindex.RecordPrefixSize]byte
	binary.BigEndian.PutUint64(target[:8], chainID)
	copy(target[8:], digest[:])
	for i := len(t.index.runs) - 1; i >= 0; i-- {
		r := t.index.runs[i]
		if !keyindex.FilterMayContain(r.filter, chainID, digest[:]) {
			continue
		}
		seq, ok, err := t.searchRun(i, r, target[:])
		if err != nil || ok {
			return seq, ok, err
		}
	}
	if v := t.keys().Get(keyIndexKey(chainID, key)); v != nil {
		if len(v) != 8 {
			return 0, false, fmt.Errorf("%s: %w: key index value of %d bytes", t.path, storage.ErrCorrupt, len(v))
		}
		return binary.BigEndian.Uint64(v), true, nil
	}
	return 0, false, nil
}

// runBucket opens a run's bucket, once per read transaction. A write
// transaction opens it each time: its runs change when it commits.
func (t *tx) runBucket(name keyRunName) *bbolt.Bucket {
	if t.tx.Writable() {
		return t.runs().Bucket(name[:])
	}
	if b, ok := t.index.opened[name]; ok {
		return b
	}
	b := t.runs().Bucket(name[:])
	if b != nil {
		if t.index.opened == nil {
			t.index.opened = make(map[keyRunName]*bbolt.Bucket)
		}
		t.index.opened[name] = b
	}
	return b
}

// runCursor returns a cursor on a run's bucket, or nil when the run is
// missing. A read transaction keeps one per run and seeks it again: bbolt
// allocates a cursor, and grows its stack, for every Get and Cursor, and a
// pooled read transaction serves many replays. A write transaction opens
// the bucket each time: its runs change when it commits.
func (t *tx) runCursor(name keyRunName) *bbolt.Cursor {
	if t.tx.Writable() {
		if b := t.runs().Bucket(name[:]); b != nil {
			return b.Cursor()
		}
		return nil
	}
	if c, ok := t.index.cursors[name]; ok {
		return c
	}
	b := t.runBucket(name)
	if b == nil {
		return nil
	}
	c := b.Cursor()
	if t.index.cursors == nil {
		t.index.cursors = make(map[keyRunName]*bbolt.Cursor)
	}
	t.index.cursors[name] = c
	return c
}

// searchRun finds the record with the target prefix in the run at index i
// of the transaction's runs: the chunk whose last record is the first at
// or after the target, then a search in it. A read transaction finds the
// chunk in the run's table once it has one (see runTable), which it keeps
// at index i (its runs load once; a write transaction, whose runs change,
// builds no table), else through its cursor.
func (t *tx) searchRun(i int, r *keyRun, target []byte) (uint64, bool, error) {
	want := keyindex.LoadPrefix(target, 0)
	if i < len(t.index.tableAt) {
		if table := t.index.tableAt[i]; table != nil {
			return t.searchTable(r, table, want)
		}
	}
	table, err := t.runTable(r)
	if err != nil {
		return 0, false, err
	}
	if table != nil && table.last != nil {
		if t.index.tableAt == nil {
			t.index.tableAt = make([]*runTable, len(t.index.runs))
		}
		t.index.tableAt[i] = table
		return t.searchTable(r, table, want)
	}
	c := t.runCursor(r.name)
	if c == nil {
		return 0, false, fmt.Errorf("%s: %w: key run %x missing", t.path, storage.ErrCorrupt, r.name)
	}
	k, v := c.Seek(target)
	if k == nil || len(k) != keyindex.RecordPrefixSize {
		return 0, false, nil
	}
	if len(v)%keyindex.RecordSize != 0 {
		return 0, false, fmt.Errorf("%s: %w: key run %x chunk of %d bytes", t.path, storage.ErrCorrupt, r.name, len(v))
	}
	return keyindex.ChunkRecord(v, keyindex.SearchChunk(v, want), want)
}

// searchTable is searchRun in a run's table (table.last not nil): the
// chunk by a binary search of the chunks' last records, in memory, then
// the run's radix map or searchChunk in the chunk.
func (t *tx) searchTable(r *keyRun, table *runTable, want keyindex.Prefix) (uint64, bool, error) {
	low := table.chunkOf(want)
	if low == len(table.chunks) {
		return 0, false, nil
	}
	chunk := table.chunks[low]
	if x := table.radix(r, low); x != nil {
		at, near := x.SearchNear(low, chunk, want)
		t.segmentIndex.Touched ^= near
		return keyindex.ChunkRecord(chunk, at, want)
	}
	return keyindex.ChunkRecord(chunk, keyindex.SearchChunk(chunk, want), want)
}

// chunkOf returns the index of the chunk whose last record is the first at
// or after want (len(table.chunks) when none is), by a binary search of the
// chunks' last records, in memory.
func (table *runTable) chunkOf(want keyindex.Prefix) int {
	low, high := 0, len(table.last)
	for low < high {
		middle := int(uint(low+high) >> 1)
		if table.last[middle].Less(want) {
			low = middle + 1
		} else {
			high = middle
		}
	}
	return low
}

// radix returns the run's radix map when it maps the table's chunks (the
// i-th with as many records), else nil.
func (table *runTable) radix(r *keyRun, i int) *keyindex.Radix {
	if x := r.radix.Load(); x != nil && len(x.Records) == len(table.chunks) && x.Records[i] == len(table.chunks[i])/keyindex.RecordSize {
		return x
	}
	return nil
}

// prefetchRecord asks for the lines of the chunk records that a lookup of
// the digest would read first in each run whose filter may hold it, where
// the read transaction has the run's table and radix map: a batch of
// lookups asks for every key's records before the first lookup, so that
// their misses overlap. The run filters' lines are expected loaded already
// (touchRunFilters).
func (t *tx) prefetchRecord(chainID uint64, digest *[KeyDigestSize]byte) {
	want := keyindex.Prefix{ChainID: chainID, DigestHigh: binary.BigEndian.Uint64(digest[0:8]), DigestLow: binary.BigEndian.Uint64(digest[8:16])}
	for i, table := range t.index.tableAt {
		if table == nil || table.last == nil || !keyindex.FilterMayContain(t.index.runs[i].filter, chainID, digest[:]) {
			continue
		}
		if low := table.chunkOf(want); low < len(table.chunks) {
			if x := table.radix(t.index.runs[i], low); x != nil {
				x.Prefetch(low, table.chunks[low], want)
			}
		}
	}
}

// runTable returns a read transaction's table of a run (nil: search
// through the cursor), building it at the run's runTableAfter-th search.
// A table without chunks (last nil) marks a run of more than
// runTableChunksMax chunks, searched through the cursor for good.
func (t *tx) runTable(r *keyRun) (*runTable, error) {
	name := r.name
	if t.tx.Writable() {
		return nil, nil
	}
	table, ok := t.index.tables[name]
	if !ok {
		table = &runTable{}
		if t.index.tables == nil {
			t.index.tables = make(map[keyRunName]*runTable)
		}
		t.index.tables[name] = table
	}
	if table.searches > runTableAfter {
		return table, nil
	}
	if table.searches++; table.searches <= runTableAfter {
		return nil, nil
	}
	b := t.runBucket(name)
	if b == nil {
		return nil, fmt.Errorf("%s: %w: key run %x missing", t.path, storage.ErrCorrupt, name)
	}
	cur := b.Cursor()
	var last []keyindex.Prefix
	var chunks [][]byte
	for k, v := cur.First(); k != nil && len(k) == keyindex.RecordPrefixSize; k, v = cur.Next() {
		if len(chunks) == runTableChunksMax {
			return table, nil // too many: table.last stays nil
		}
		if len(v) == 0 || len(v)%keyindex.RecordSize != 0 {
			return nil, fmt.Errorf("%s: %w: key run %x chunk of %d bytes", t.path, storage.ErrCorrupt, name, len(v))
		}
		p := keyindex.LoadPrefix(k, 0)
		if len(last) > 0 && !last[len(last)-1].Less(p) {
			return nil, fmt.Errorf("%s: %w: key run %x out of order", t.path, storage.ErrCorrupt, name)
		}
		last, chunks = append(last, p), append(chunks, v)
	}
	table.last, table.chunks = last, chunks
	if table.last == nil {
		table.last = []keyindex.Prefix{} // an empty run: nothing to find
	}
	if r.radix.Load() == nil {
		// A run this process did not write: its map reads every record
		// once (32 bytes a key), for a run searched often enough to have a
		// table.
		r.radix.Store(keyindex.NewRadix(chunks))
	}
	return table, nil
}

// addKey records a key appended in this transaction, with its digest.
func (t *tx) addKey(chainID uint64, key string, seq uint64, digest *[KeyDigestSize]byte) {
	switch {
	case t.keysProvenNew:
		t.index.provenKeys++
		if t.index.provenKeys < KeyRunDirectMin {
			t.index.provenFew = append(t.index.provenFew, provenKey{pendingKey{chainID, key}, seq})
		}
	default:
		if t.index.pending == nil {
			t.index.pending = make(map[pendingKey]uint64)
		}
		t.index.pending[pendingKey{chainID, key}] = seq
	}
	t.index.records = binary.BigEndian.AppendUint64(t.index.records, chainID)
	t.index.records = append(t.index.records, digest[:]...)
	t.index.records = binary.BigEndian.AppendUint64(t.index.records, seq)
}

// flushKeys writes the transaction's new keys before it commits: a large
// batch as a run of its own, a small one into the recent B-tree, which is
// written out as a run when it is full. Then runs are merged while a level
// holds KeyRunFanout of them.
func (t *tx) flushKeys() error {
	n := len(t.index.pending) + t.index.provenKeys
	if n == 0 {
		return nil
	}
	if n >= KeyRunDirectMin {
		records := t.index.records
		keyindex.SortRecords(records) // in place: the filter takes them in any order
		return t.addRun(records)
	}
	for k, seq := range t.index.pending {
		if err := t.putRecentKey(k, seq); err != nil {
			return err
		}
	}
	for _, k := range t.index.provenFew {
		if err := t.putRecentKey(k.pendingKey, k.seq); err != nil {
			return err
		}
	}
	recent, err := t.recentCount()
	if err != nil {
		return err
	}
	recent += uint64(n)
	if recent < KeyRecentMax {
		return t.setRecentCount(recent)
	}
	records := make([]byte, 0, recent*keyindex.RecordSize)
	cur := t.keys().Cursor()
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		if len(k) < 8 || len(v) != 8 {
			return fmt.Errorf("%s: %w: key index entry %x", t.path, storage.ErrCorrupt, k)
		}
		records = keyindex.AppendRecord(records, binary.BigEndian.Uint64(k), string(k[8:]), binary.BigEndian.Uint64(v))
	}
	keyindex.SortRecords(records)
	if err := t.tx.DeleteBucket(BucketKeys); err != nil {
		return t.writeError(err)
	}
	if t.keysBucket, err = t.tx.CreateBucket(BucketKeys); err != nil {
		return t.writeError(err)
	}
	if err := t.setRecentCount(0); err != nil {
		return err
	}
	return t.addRun(records)
}

// pendingKey is a key new in a write transaction.
type pendingKey struct {
	chainID uint64
	key     string
}

// provenKey is a key of a checkpoint's transaction with its seq.
type provenKey struct {
	pendingKey
	seq uint64
}

// putRecentKey writes a key into the recent B-tree.
func (t *tx) putRecentKey(k pendingKey, seq uint64) error {
	if err := t.keys().Put(keyIndexKey(k.chainID, k.key), binary.BigEndian.AppendUint64(nil, seq)); err != nil {
		return t.writeError(err)
	}
	return nil
}

func (t *tx) recentCount() (uint64, error) {
	v := t.meta().Get(metaRecentKeys)
	if v == nil {
		return 0, nil
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%s: %w: recent_keys of %d bytes", t.path, storage.ErrCorrupt, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

func (t *tx) setRecentCount(n uint64) error {
	if err := t.meta().Put(metaRecentKeys, binary.BigEndian.AppendUint64(nil, n)); err != nil {
		return t.writeError(err)
	}
	return nil
}

// addRun writes sorted records as a new run and merges the runs of its level
// when there are KeyRunFanout of them.
func (t *tx) addRun(records []byte) error {
	if err := t.loadRuns(); err != nil {
		return err
	}
	r, err := t.writeRun(records)
	if err != nil {
		return err
	}
	for {
		var same []*keyRun
		for _, other := range t.index.runs {
			if other.level() == r.level() {
				same = append(same, other)
			}
		}
		if len(same) < KeyRunFanout {
			return nil
		}
		if r, err = t.mergeRuns(same); err != nil {
			return err
		}
	}
}

func (t *tx) writeRun(records []byte) (*keyRun, error) {
	count := uint64(len(records) / keyindex.RecordSize)
	r := &keyRun{name: runName(runLevel(count), uint64(t.tx.ID())), count: count, filter: keyindex.FilterWords(count)}
	b, err := t.runs().CreateBucket(r.name[:])
	if err != nil {
		return nil, t.writeError(err)
	}
	b.FillPercent = 1.0
	for o := 0; o < len(records); o += keyindex.RecordSize {
		rec := records[o : o+keyindex.RecordSize]
		keyindex.FilterAdd(r.filter, binary.BigEndian.Uint64(rec[:8]), rec[8:keyindex.RecordPrefixSize])
	}
	var chunks [][]byte
	for o := 0; o < len(records); o += keyindex.ChunkRecords * keyindex.RecordSize {
		chunk := records[o:min(o+keyindex.ChunkRecords*keyindex.RecordSize, len(records))]
		last := chunk[len(chunk)-keyindex.RecordSize : len(chunk)-keyindex.RecordSize+keyindex.RecordPrefixSize]
		if err := b.Put(last, chunk); err != nil {
			return nil, t.writeError(err)
		}
		chunks = append(chunks, chunk)
	}
	r.radix.Store(keyindex.NewRadix(chunks))
	filter := make([]byte, 0, len(r.filter)*8)
	for _, w := range r.filter {
		filter = binary.LittleEndian.AppendUint64(filter, w)
	}
	if err := b.Put(runFilterKey, filter); err != nil {
		return nil, t.writeError(err)
	}
	if err := b.Put(runCountKey, binary.BigEndian.AppendUint64(nil, count)); err != nil {
		return nil, t.writeError(err)
	}
	t.index.runs = append(t.index.runs, r)
	t.index.created = append(t.index.created, r)
	t.index.changed = true
	return r, nil
}

// mergeRuns merges runs into one run of a higher level and deletes them.
func (t *tx) mergeRuns(runs []*keyRun) (*keyRun, error) {
	var total uint64
	chunks := make([][]byte, len(runs)) // the unread rest of each run's current chunk
	cursors := make([]*bbolt.Cursor, len(runs))
	for i, r := range runs {
		total += r.count
		b := t.runs().Bucket(r.name[:])
		if b == nil {
			return nil, fmt.Errorf("%s: %w: key run %x missing", t.path, storage.ErrCorrupt, r.name)
		}
		cursors[i] = b.Cursor()
		_, chunks[i] = cursors[i].First()
	}
	next := func(i int) error {
		chunks[i] = chunks[i][keyindex.RecordSize:]
		if len(chunks[i]) == 0 {
			var k []byte
			if k, chunks[i] = cursors[i].Next(); k == nil || len(k) != keyindex.RecordPrefixSize {
				chunks[i] = nil
			}
		}
		if len(chunks[i])%keyindex.RecordSize != 0 {
			return fmt.Errorf("%s: %w: key run chunk of %d bytes", t.path, storage.ErrCorrupt, len(chunks[i]))
		}
		return nil
	}
	for i := range chunks {
		if len(chunks[i])%keyindex.RecordSize != 0 {
			return nil, fmt.Errorf("%s: %w: key run chunk of %d bytes", t.path, storage.ErrCorrupt, len(chunks[i]))
		}
	}
	// heads holds the first unread record of each run, decoded: the merge
	// compares words, not bytes.
	heads := make([]keyindex.RecordKey, len(runs))
	for i, c := range chunks {
		if len(c) > 0 {
			heads[i] = keyindex.LoadRecord(c)
		}
	}
	records := make([]byte, total*keyindex.RecordSize)
	written := 0
	for {
		best := -1
		for i, c := range chunks {
			if len(c) == 0 {
				continue
			}
			if best < 0 || keyindex.CompareRecords(heads[i], heads[best]) < 0 {
				best = i
			}
		}
		if best < 0 {
			break
		}
		if written == len(records) {
			return nil, fmt.Errorf("%s: %w: key runs hold more records than their headers say (%d)", t.path, storage.ErrCorrupt, total)
		}
		copy(records[written:], chunks[best][:keyindex.RecordSize])
		written += keyindex.RecordSize
		if err := next(best); err != nil {
			return nil, err
		}
		if len(chunks[best]) > 0 {
			heads[best] = keyindex.LoadRecord(chunks[best])
		}
	}
	records = records[:written]
	if uint64(len(records)/keyindex.RecordSize) != total {
		return nil, fmt.Errorf("%s: %w: key runs hold %d records, their headers say %d", t.path, storage.ErrCorrupt, len(records)/keyindex.RecordSize, total)
	}
	for _, r := range runs {
		if err := t.runs().DeleteBucket(r.name[:]); err != nil {
			return nil, t.writeError(err)
		}
		t.index.runs = slices.DeleteFunc(t.index.runs, func(x *keyRun) bool { return x == r })
		if i := slices.IndexFunc(t.index.created, func(x *keyRun) bool { return x == r }); i >= 0 {
			t.index.created = slices.Delete(t.index.created, i, i+1)
		} else {
			t.index.deleted = append(t.index.deleted, r.name)
		}
	}
	return t.writeRun(records)
}
