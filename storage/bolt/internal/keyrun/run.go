package keyrun

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt/internal/keyindex"
)

// Fanout is how many runs of one level are merged into one run of a
// higher level.
const Fanout = 8

// Host is what a View needs of the backend's transaction.
type Host interface {
	// BoltTx is the transaction's bbolt transaction.
	BoltTx() *bbolt.Tx
	// RunsBucket is the key_runs bucket, nil in a read-only view of a
	// file of the first format.
	RunsBucket() *bbolt.Bucket
	// RunCache is the backend's cache of runs.
	RunCache() *Cache
	// FilePath names the file in errors.
	FilePath() string
	// WriteError wraps an error of bbolt's write.
	WriteError(err error) error
}

// Name is the name of a run: u8 level | u64be id of the transaction that
// wrote it.
type Name [9]byte

// NewName returns the name of a run of the level written by txid.
func NewName(level uint8, txid uint64) Name {
	var n Name
	n[0] = level
	binary.BigEndian.PutUint64(n[1:], txid)
	return n
}

// Level is the run's level.
func (n Name) Level() uint8 { return n[0] }

// The keys of a run's bucket beside its chunks.
var (
	FilterKey = []byte("filter")
	CountKey  = []byte("count")
)

// Run is what a lookup needs to know of a run across transactions: its
// name and size. Its filter stays in the file: each View reads it where it
// lies in the file's map (View.filter), which holds it still while the
// transaction lives, so that the filters take no heap.
type Run struct {
	name  Name
	count uint64
	// radix maps digests to ranges of the run's chunks; nil until a
	// write of the run or a read transaction's table of it builds one.
	radix atomic.Pointer[keyindex.Radix]
}

// Name is the run's name.
func (r *Run) Name() Name { return r.name }

// Count is how many records the run holds.
func (r *Run) Count() uint64 { return r.count }

// Radix is the run's radix map, or nil while it has none.
func (r *Run) Radix() *keyindex.Radix { return r.radix.Load() }

func (r *Run) level() uint8 { return r.name[0] }

// Level is the level of a run of count records: floor(log8(count)). A run
// a merge wrote may be at a higher level (see merge).
func Level(count uint64) uint8 {
	if count == 0 {
		return 0
	}
	return uint8((bits.Len64(count) - 1) / 3)
}

// Cache holds what the backend knows of the runs across transactions: the
// committed runs by name, and the list of runs as of one committed
// transaction id. Both are only ever filled from committed state.
type Cache struct {
	// MergeRecordsMax bounds the records one transaction merges (0:
	// none), set before the cache is used: a merge holds its records
	// several times while its transaction commits (MergeBytes). A merge of
	// more records is spread over transactions (MergeBucket, View.Step).
	MergeRecordsMax uint64
	// RunRecordsMax bounds the records of a run a merge writes (0: none),
	// set before the cache is used: the transaction that finishes a merge
	// holds the run's filter several times (FinishBytes). A level of
	// Fanout runs whose merge would write more merges as many of its
	// smallest runs as fit, two at least (see mergeable).
	RunRecordsMax uint64
	mu            sync.Mutex
	byName        map[Name]*Run
	deletedUpTo   uint64 // the newest commit that deleted runs
	list          atomic.Pointer[runList]
}

type runList struct {
	txid uint64
	runs []*Run
}

// NewCache returns an empty cache.
func NewCache() *Cache { return &Cache{byName: map[Name]*Run{}} }

// Get returns the cached run of the name, or nil.
func (c *Cache) Get(name Name) *Run {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byName[name]
}

// mergeable returns the runs of a full level that one merge takes: all of
// them when they fit RunRecordsMax, else as many of the smallest as fit
// (the oldest first among equals), or none when fewer than two do. A level
// whose runs do not fit one merge would otherwise keep every run added to
// it, and a lookup of a new key that the file's filter lets through
// probes the filter of every run.
func (c *Cache) mergeable(level []*Run) []*Run {
	if c.RunRecordsMax == 0 {
		return level
	}
	bySize := slices.Clone(level)
	slices.SortStableFunc(bySize, func(a, b *Run) int { return cmp.Compare(a.count, b.count) })
	var total uint64
	n := 0
	for n < len(bySize) && total+bySize[n].count <= c.RunRecordsMax {
		total += bySize[n].count
		n++
	}
	if n < 2 {
		return nil
	}
	return bySize[:n]
}

// Latest returns the runs of the last list cached (of some committed
// transaction, maybe not the newest), or nil; callers only read it.
func (c *Cache) Latest() []*Run {
	if l := c.list.Load(); l != nil {
		return l.runs
	}
	return nil
}

// remember caches a run a transaction with snapshot snapshotTxid read; runs
// read from a snapshot older than the last deletion may be gone already.
func (c *Cache) remember(r *Run, snapshotTxid uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if snapshotTxid >= c.deletedUpTo {
		c.byName[r.name] = r
	}
}

// committed records a commit's effect on the runs.
func (c *Cache) committed(txid uint64, runs []*Run, created []*Run, deleted []Name) {
	c.mu.Lock()
	for _, r := range created {
		c.byName[r.name] = r
	}
	for _, n := range deleted {
		delete(c.byName, n)
	}
	if len(deleted) > 0 {
		c.deletedUpTo = txid
	}
	c.mu.Unlock()
	c.list.Store(&runList{txid: txid, runs: runs})
}

// View is one transaction's view of the runs. The zero View is ready; a
// View serves one transaction, which passes itself as the Host of every
// call.
type View struct {
	runs   []*Run
	loaded bool
	// filters holds the filter of each run of runs as it lies in the
	// file's map (or, for a run this write transaction wrote, in bbolt's
	// node), read at its first lookup: valid while the transaction lives,
	// since bbolt remaps the file only when no read transaction is open,
	// and a write transaction's own remap happens in its commit.
	filters [][]byte
	created []*Run
	deleted []Name
	changed bool
	// opened holds the run buckets a read transaction has opened: opening
	// one is a lookup, and a verify looks up every key of a chain.
	opened map[Name]*bbolt.Bucket
	// cursors holds a cursor on each run a read transaction has searched
	// (see cursor).
	cursors map[Name]*bbolt.Cursor
	// tables holds the chunk table of each run a read transaction has
	// searched TableAfter times (see table).
	tables map[Name]*table
	// tableAt holds the built tables of a read transaction by the index of
	// their run in runs, which a read transaction loads once: a lookup
	// then finds a run's table at an index instead of hashing its name.
	tableAt []*table
	// touched keeps a byte of the records a search's radix map loaded.
	touched byte
	// mergedRecords is how many records the transaction's merges took,
	// against Cache.MergeRecordsMax (a finished merge counts as a full one).
	mergedRecords uint64
}

// table is a read transaction's table of one run's chunks: each chunk's
// key, decoded, and its records in the map, which stay in place while the
// transaction lives. A search in it costs no B-tree descent.
type table struct {
	searches int               // searches made through the cursor before the table was built
	last     []keyindex.Prefix // the prefix of each chunk's last record (its key), ascending
	chunks   [][]byte
}

const (
	// TableAfter is how many searches of one run a read transaction makes
	// through a cursor before it builds the run's table: a table reads
	// every chunk's key (31 values for 1,000,000 keys), a seek one
	// descent, and a transaction that serves one replay makes one search.
	TableAfter = 8
	// TableChunksMax bounds a table: a run of more chunks (a file written
	// with chunks of 120 records, 8,300 chunks per 1,000,000 keys) is
	// searched through its cursor.
	TableChunksMax = 1024
)

// TableState is what a read transaction's table of a run holds: the
// searches made before it was built (TableAfter+1 once it is), and its
// chunks, -1 while it has none or for a run searched through its cursor
// for good.
type TableState struct {
	Searches int
	Chunks   int
}

// Tables reports the tables of the runs a read transaction has searched.
func (v *View) Tables() map[Name]TableState {
	states := make(map[Name]TableState, len(v.tables))
	for name, t := range v.tables {
		s := TableState{Searches: t.searches, Chunks: -1}
		if t.last != nil {
			s.Chunks = len(t.last)
		}
		states[name] = s
	}
	return states
}

func snapshotTxid(btx *bbolt.Tx) uint64 {
	id := uint64(btx.ID())
	if btx.Writable() {
		id-- // a write transaction carries the id it will commit as
	}
	return id
}

// Loaded reports whether the view has loaded its list of runs.
func (v *View) Loaded() bool { return v.loaded }

// Runs is the loaded list of runs, oldest first; callers only read it.
func (v *View) Runs() []*Run { return v.runs }

// Changed reports whether the transaction wrote or deleted runs.
func (v *View) Changed() bool { return v.changed }

// Load reads the list of runs of the transaction's snapshot, from the
// cache when it is of the same snapshot.
func (v *View) Load(h Host) error {
	if v.loaded {
		return nil
	}
	btx, cache := h.BoltTx(), h.RunCache()
	snapshot := snapshotTxid(btx)
	if l := cache.list.Load(); l != nil && l.txid == snapshot {
		v.runs, v.loaded = l.runs, true
		if btx.Writable() { // it changes its list; readers share the cached one
			v.runs = slices.Clone(l.runs)
		}
		return nil
	}
	var runs []*Run
	if h.RunsBucket() != nil {
		cur := h.RunsBucket().Cursor()
		for k, val := cur.First(); k != nil; k, val = cur.Next() {
			if val != nil || len(k) != len(Name{}) {
				return fmt.Errorf("%s: %w: key run %x", h.FilePath(), storage.ErrCorrupt, k)
			}
			name := Name(k)
			r := cache.Get(name)
			if r == nil {
				var err error
				if r, err = read(h, name); err != nil {
					return err
				}
				cache.remember(r, snapshot)
			}
			runs = append(runs, r)
		}
	}
	v.runs, v.loaded = runs, true
	if !btx.Writable() {
		cache.list.Store(&runList{txid: snapshot, runs: slices.Clone(runs)})
	}
	return nil
}

func read(h Host, name Name) (*Run, error) {
	b := h.RunsBucket().Bucket(name[:])
	if b == nil {
		return nil, fmt.Errorf("%s: %w: key run %x is not a bucket", h.FilePath(), storage.ErrCorrupt, name)
	}
	cv, fv := b.Get(CountKey), b.Get(FilterKey)
	if len(cv) != 8 || len(fv) == 0 || len(fv)%(keyindex.FilterBlockWords*8) != 0 {
		return nil, fmt.Errorf("%s: %w: key run %x header", h.FilePath(), storage.ErrCorrupt, name)
	}
	return &Run{name: name, count: binary.BigEndian.Uint64(cv)}, nil
}

// filter returns the filter of the run at index i of the view's runs, read
// from its bucket at the view's first use of it. Only the value's length is
// checked: its pages are read where a lookup probes them.
func (v *View) filter(h Host, i int) ([]byte, error) {
	if len(v.filters) != len(v.runs) {
		v.filters = make([][]byte, len(v.runs))
	}
	if f := v.filters[i]; f != nil {
		return f, nil
	}
	name := v.runs[i].name
	b := v.Bucket(h, name)
	if b == nil {
		return nil, fmt.Errorf("%s: %w: key run %x missing", h.FilePath(), storage.ErrCorrupt, name)
	}
	f := b.Get(FilterKey)
	if len(f) == 0 || len(f)%(keyindex.FilterBlockWords*8) != 0 {
		return nil, fmt.Errorf("%s: %w: key run %x filter of %d bytes", h.FilePath(), storage.ErrCorrupt, name, len(f))
	}
	v.filters[i] = f
	return f, nil
}

// ScanNames returns the names of the runs, in the order of the index. A
// read transaction that has not loaded the runs lists them from the file,
// with the checks of loading one but without reading its filter, which a
// scan does not need: a process that had not loaded the runs read every
// filter first, a page per fault on a cold file (over a quarter of a cold
// verify's major faults). A write transaction, whose list may differ from
// the file's until it commits, takes its own.
func (v *View) ScanNames(h Host) ([]Name, error) {
	if v.loaded || h.BoltTx().Writable() || h.RunsBucket() == nil {
		if err := v.Load(h); err != nil {
			return nil, err
		}
		names := make([]Name, len(v.runs))
		for i, r := range v.runs {
			names[i] = r.name
		}
		return names, nil
	}
	var names []Name
	cur := h.RunsBucket().Cursor()
	for k, val := cur.First(); k != nil; k, val = cur.Next() {
		if val != nil || len(k) != len(Name{}) {
			return nil, fmt.Errorf("%s: %w: key run %x", h.FilePath(), storage.ErrCorrupt, k)
		}
		name := Name(k)
		b := v.Bucket(h, name)
		if b == nil {
			return nil, fmt.Errorf("%s: %w: key run %x is not a bucket", h.FilePath(), storage.ErrCorrupt, name)
		}
		cv, fv := b.Get(CountKey), b.Get(FilterKey) // fv's length only: its pages are not read
		if len(cv) != 8 || len(fv) == 0 || len(fv)%(keyindex.FilterBlockWords*8) != 0 {
			return nil, fmt.Errorf("%s: %w: key run %x header", h.FilePath(), storage.ErrCorrupt, name)
		}
		names = append(names, name)
	}
	return names, nil
}

// Lookup finds the seq of the record of (chain id, digest) in the runs of
// the transaction's snapshot, loading them first: newest and highest
// levels first, since the highest levels hold most keys, and only the
// runs whose filter may hold it.
func (v *View) Lookup(h Host, chainID uint64, digest *[storage.KeyDigestSize]byte) (uint64, bool, error) {
	if err := v.Load(h); err != nil {
		return 0, false, err
	}
	var target [keyindex.RecordPrefixSize]byte
	binary.BigEndian.PutUint64(target[:8], chainID)
	copy(target[8:], digest[:])
	for i := len(v.runs) - 1; i >= 0; i-- {
		r := v.runs[i]
		f, err := v.filter(h, i)
		if err != nil {
			return 0, false, err
		}
		if !keyindex.FilterBytesMayContain(f, chainID, digest[:]) {
			continue
		}
		seq, ok, err := v.search(h, i, r, target[:])
		if err != nil || ok {
			return seq, ok, err
		}
	}
	return 0, false, nil
}

// Bucket opens a run's bucket, once per read transaction, or returns nil
// when the run is missing. A write transaction opens it each time: its
// runs change when it commits.
func (v *View) Bucket(h Host, name Name) *bbolt.Bucket {
	if h.BoltTx().Writable() {
		return h.RunsBucket().Bucket(name[:])
	}
	if b, ok := v.opened[name]; ok {
		return b
	}
	b := h.RunsBucket().Bucket(name[:])
	if b != nil {
		if v.opened == nil {
			v.opened = make(map[Name]*bbolt.Bucket)
		}
		v.opened[name] = b
	}
	return b
}

// cursor returns a cursor on a run's bucket, or nil when the run is
// missing. A read transaction keeps one per run and seeks it again: bbolt
// allocates a cursor, and grows its stack, for every Get and Cursor, and a
// pooled read transaction serves many replays. A write transaction opens
// the bucket each time: its runs change when it commits.
func (v *View) cursor(h Host, name Name) *bbolt.Cursor {
	if h.BoltTx().Writable() {
		if b := h.RunsBucket().Bucket(name[:]); b != nil {
			return b.Cursor()
		}
		return nil
	}
	if c, ok := v.cursors[name]; ok {
		return c
	}
	b := v.Bucket(h, name)
	if b == nil {
		return nil
	}
	c := b.Cursor()
	if v.cursors == nil {
		v.cursors = make(map[Name]*bbolt.Cursor)
	}
	v.cursors[name] = c
	return c
}

// search finds the record with the target prefix in the run at index i of
// the view's runs: the chunk whose last record is the first at or after
// the target, then a search in it. A read transaction finds the chunk in
// the run's table once it has one, which it keeps at index i (its runs
// load once; a write transaction, whose runs change, builds no table),
// else through its cursor.
func (v *View) search(h Host, i int, r *Run, target []byte) (uint64, bool, error) {
	want := keyindex.LoadPrefix(target, 0)
	if i < len(v.tableAt) {
		if t := v.tableAt[i]; t != nil {
			return v.searchTable(r, t, want)
		}
	}
	t, err := v.table(h, r)
	if err != nil {
		return 0, false, err
	}
	if t != nil && t.last != nil {
		if v.tableAt == nil {
			v.tableAt = make([]*table, len(v.runs))
		}
		v.tableAt[i] = t
		return v.searchTable(r, t, want)
	}
	c := v.cursor(h, r.name)
	if c == nil {
		return 0, false, fmt.Errorf("%s: %w: key run %x missing", h.FilePath(), storage.ErrCorrupt, r.name)
	}
	k, val := c.Seek(target)
	if k == nil || len(k) != keyindex.RecordPrefixSize {
		return 0, false, nil
	}
	if len(val)%keyindex.RecordSize != 0 {
		return 0, false, fmt.Errorf("%s: %w: key run %x chunk of %d bytes", h.FilePath(), storage.ErrCorrupt, r.name, len(val))
	}
	return keyindex.ChunkRecord(val, keyindex.SearchChunk(val, want), want)
}

// searchTable is search in a run's table (t.last not nil): the chunk by a
// binary search of the chunks' last records, in memory, then the run's
// radix map or keyindex.SearchChunk in the chunk.
func (v *View) searchTable(r *Run, t *table, want keyindex.Prefix) (uint64, bool, error) {
	low := t.chunkOf(want)
	if low == len(t.chunks) {
		return 0, false, nil
	}
	chunk := t.chunks[low]
	if x := t.radix(r, low); x != nil {
		at, near := x.SearchNear(low, chunk, want)
		v.touched ^= near
		return keyindex.ChunkRecord(chunk, at, want)
	}
	return keyindex.ChunkRecord(chunk, keyindex.SearchChunk(chunk, want), want)
}

// chunkOf returns the index of the chunk whose last record is the first at
// or after want (len(t.chunks) when none is), by a binary search of the
// chunks' last records, in memory.
func (t *table) chunkOf(want keyindex.Prefix) int {
	low, high := 0, len(t.last)
	for low < high {
		middle := int(uint(low+high) >> 1)
		if t.last[middle].Less(want) {
			low = middle + 1
		} else {
			high = middle
		}
	}
	return low
}

// radix returns the run's radix map when it maps the table's chunks (the
// i-th with as many records), else nil.
func (t *table) radix(r *Run, i int) *keyindex.Radix {
	if x := r.radix.Load(); x != nil && len(x.Records) == len(t.chunks) && x.Records[i] == len(t.chunks[i])/keyindex.RecordSize {
		return x
	}
	return nil
}

// Prefetch asks for the lines of the chunk records that a lookup of the
// digest would read first in each run whose filter may hold it, where the
// read transaction has the run's table and radix map: a batch of lookups
// asks for every key's records before the first lookup, so that their
// misses overlap. A run with a table has had its filter read (search
// follows a lookup's probe of it).
func (v *View) Prefetch(chainID uint64, digest *[storage.KeyDigestSize]byte) {
	want := keyindex.Prefix{ChainID: chainID, DigestHigh: binary.BigEndian.Uint64(digest[0:8]), DigestLow: binary.BigEndian.Uint64(digest[8:16])}
	for i, t := range v.tableAt {
		if t == nil || t.last == nil || i >= len(v.filters) || v.filters[i] == nil ||
			!keyindex.FilterBytesMayContain(v.filters[i], chainID, digest[:]) {
			continue
		}
		if low := t.chunkOf(want); low < len(t.chunks) {
			if x := t.radix(v.runs[i], low); x != nil {
				x.Prefetch(low, t.chunks[low], want)
			}
		}
	}
}

// table returns a read transaction's table of a run (nil: search through
// the cursor), building it at the run's TableAfter-th search. A table
// without chunks (last nil) marks a run of more than TableChunksMax
// chunks, searched through the cursor for good.
func (v *View) table(h Host, r *Run) (*table, error) {
	name := r.name
	if h.BoltTx().Writable() {
		return nil, nil
	}
	t, ok := v.tables[name]
	if !ok {
		t = &table{}
		if v.tables == nil {
			v.tables = make(map[Name]*table)
		}
		v.tables[name] = t
	}
	if t.searches > TableAfter {
		return t, nil
	}
	if t.searches++; t.searches <= TableAfter {
		return nil, nil
	}
	b := v.Bucket(h, name)
	if b == nil {
		return nil, fmt.Errorf("%s: %w: key run %x missing", h.FilePath(), storage.ErrCorrupt, name)
	}
	cur := b.Cursor()
	var last []keyindex.Prefix
	var chunks [][]byte
	for k, val := cur.First(); k != nil && len(k) == keyindex.RecordPrefixSize; k, val = cur.Next() {
		if len(chunks) == TableChunksMax {
			return t, nil // too many: t.last stays nil
		}
		if len(val) == 0 || len(val)%keyindex.RecordSize != 0 {
			return nil, fmt.Errorf("%s: %w: key run %x chunk of %d bytes", h.FilePath(), storage.ErrCorrupt, name, len(val))
		}
		p := keyindex.LoadPrefix(k, 0)
		if len(last) > 0 && !last[len(last)-1].Less(p) {
			return nil, fmt.Errorf("%s: %w: key run %x out of order", h.FilePath(), storage.ErrCorrupt, name)
		}
		last, chunks = append(last, p), append(chunks, val)
	}
	t.last, t.chunks = last, chunks
	if t.last == nil {
		t.last = []keyindex.Prefix{} // an empty run: nothing to find
	}
	if r.radix.Load() == nil {
		// A run this process did not write: its map reads every record
		// once (32 bytes a key), for a run searched often enough to have a
		// table.
		r.radix.Store(keyindex.NewRadix(chunks))
	}
	return t, nil
}

// EachChunk hands every chunk of every loaded run to each, run by run in
// the order of the view, a run's chunks in key order; a chunk of a
// length not a whole number of records, or a missing run, is an error
// wrapping storage.ErrCorrupt.
func (v *View) EachChunk(h Host, each func(chunk []byte)) error {
	for _, r := range v.runs {
		b := h.RunsBucket().Bucket(r.name[:])
		if b == nil {
			return fmt.Errorf("%s: %w: key run %x missing", h.FilePath(), storage.ErrCorrupt, r.name)
		}
		rc := b.Cursor()
		for k, val := rc.First(); k != nil && len(k) == keyindex.RecordPrefixSize; k, val = rc.Next() {
			if len(val)%keyindex.RecordSize != 0 {
				return fmt.Errorf("%s: %w: key run %x chunk of %d bytes", h.FilePath(), storage.ErrCorrupt, r.name, len(val))
			}
			each(val)
		}
	}
	return nil
}

// Add writes sorted records as a new run, merges the levels that hold
// Fanout runs (settle) and advances the merge in progress (Step).
func (v *View) Add(h Host, records []byte) error {
	if err := v.Load(h); err != nil {
		return err
	}
	if _, err := v.write(h, records, Level(uint64(len(records)/keyindex.RecordSize))); err != nil {
		return err
	}
	if err := v.settle(h); err != nil {
		return err
	}
	return v.Step(h)
}

// settle merges, lowest level first, each level that holds Fanout runs
// besides the sources of the merge in progress: in this transaction when
// the merge fits what it may still merge (Cache.MergeRecordsMax), else
// as the merge in progress when there is none (later transactions write
// it, Step), else not yet.
func (v *View) settle(h Host) error {
	cache := h.RunCache()
	for {
		m, err := v.loadMerge(h)
		if err != nil {
			return err
		}
		picks := v.full(cache, m)
		if picks == nil {
			return nil
		}
		var total uint64
		for _, r := range picks {
			total += r.count
		}
		if cache.MergeRecordsMax > 0 && v.mergedRecords+total > cache.MergeRecordsMax {
			if m != nil {
				return nil
			}
			return v.startMerge(h, picks)
		}
		if err := v.merge(h, picks); err != nil {
			return err
		}
		v.mergedRecords += total
	}
}

// full returns the runs a merge takes of the lowest level that holds
// Fanout runs besides the sources of the merge in progress (mergeable),
// or nil.
func (v *View) full(cache *Cache, m *merging) []*Run {
	byLevel := map[uint8][]*Run{}
	for _, r := range v.runs {
		if !m.busy(r) {
			byLevel[r.level()] = append(byLevel[r.level()], r)
		}
	}
	levels := make([]uint8, 0, len(byLevel))
	for level, runs := range byLevel {
		if len(runs) >= Fanout {
			levels = append(levels, level)
		}
	}
	slices.Sort(levels)
	for _, level := range levels {
		if picks := cache.mergeable(byLevel[level]); picks != nil {
			return picks
		}
	}
	return nil
}

// write writes sorted records as a new run of the level.
func (v *View) write(h Host, records []byte, level uint8) (*Run, error) {
	count := uint64(len(records) / keyindex.RecordSize)
	r := &Run{name: v.newName(h, level), count: count}
	b, err := h.RunsBucket().CreateBucket(r.name[:])
	if err != nil {
		return nil, h.WriteError(err)
	}
	b.FillPercent = 1.0
	words := keyindex.FilterWords(count)
	for o := 0; o < len(records); o += keyindex.RecordSize {
		rec := records[o : o+keyindex.RecordSize]
		keyindex.FilterAdd(words, binary.BigEndian.Uint64(rec[:8]), rec[8:keyindex.RecordPrefixSize])
	}
	if err := putChunks(h, b, records, keyindex.ChunkRecords); err != nil {
		return nil, err
	}
	var chunks [][]byte
	for o := 0; o < len(records); o += keyindex.ChunkRecords * keyindex.RecordSize {
		chunks = append(chunks, records[o:min(o+keyindex.ChunkRecords*keyindex.RecordSize, len(records))])
	}
	r.radix.Store(keyindex.NewRadix(chunks))
	filter := make([]byte, 0, len(words)*8)
	for _, w := range words {
		filter = binary.LittleEndian.AppendUint64(filter, w)
	}
	if err := b.Put(FilterKey, filter); err != nil {
		return nil, h.WriteError(err)
	}
	if err := b.Put(CountKey, binary.BigEndian.AppendUint64(nil, count)); err != nil {
		return nil, h.WriteError(err)
	}
	v.runs = append(v.runs, r)
	if len(v.filters) == len(v.runs)-1 {
		v.filters = append(v.filters, filter)
	} else {
		v.filters = nil // read again at the next lookup
	}
	v.created = append(v.created, r)
	v.changed = true
	return r, nil
}

// newName returns the name of a run the transaction writes at the level
// (or, when a run it wrote already holds that name, at the first level
// above that no run it wrote holds). A run is named by its level and the
// transaction's id, and one transaction may write several runs whose
// sizes fall in one level: a chain of merges (settle) of a level that
// held more than Fanout runs (they wait while a merge is in progress) may
// skip levels, and the merge of the next level lands where it landed. The
// output of a merge this transaction started (startMerge) holds its name
// too, under the merge bucket.
func (v *View) newName(h Host, level uint8) Name {
	txid := uint64(h.BoltTx().ID())
	var output []byte
	if mb := h.BoltTx().Bucket(MergeBucket); mb != nil {
		output = mb.Get(mergeOutputKey)
	}
	for {
		name := NewName(level, txid)
		if string(output) != string(name[:]) && !slices.ContainsFunc(v.runs, func(r *Run) bool { return r.name == name }) {
			return name
		}
		if level == math.MaxUint8 {
			// A transaction writes a few runs: one, a run per merge of
			// its chain (one per level at most) and a merge's output.
			panic(fmt.Sprintf("keyrun: transaction %d wrote a run at every level", txid))
		}
		level++
	}
}

// merge merges runs of one level into one run of a higher level and
// deletes them, in the transaction. The merged run's level is its size's
// (Level), and at least one above theirs: a merge of some of a level's
// runs (mergeable) may hold fewer records than its size's level starts
// at, so each merge of a chain of merges (settle) goes up one level at
// least. A run of the transaction that already holds that level's name
// puts it higher still (newName).
func (v *View) merge(h Host, runs []*Run) error {
	from := runs[0].level()
	if from == math.MaxUint8 {
		panic(fmt.Sprintf("keyrun: a merge of runs at level %d", from))
	}
	var total uint64
	for _, r := range runs {
		total += r.count
	}
	src, err := openSources(h, runs, nil)
	if err != nil {
		return err
	}
	// One record more than the headers say shows a run that holds more.
	records, err := src.take(make([]byte, 0, (total+1)*keyindex.RecordSize), total+1)
	if err != nil {
		return err
	}
	if got := uint64(len(records) / keyindex.RecordSize); got != total {
		if got > total {
			return fmt.Errorf("%s: %w: key runs hold more records than their headers say (%d)", h.FilePath(), storage.ErrCorrupt, total)
		}
		return fmt.Errorf("%s: %w: key runs hold %d records, their headers say %d", h.FilePath(), storage.ErrCorrupt, got, total)
	}
	if err := v.drop(h, runs); err != nil {
		return err
	}
	_, err = v.write(h, records, max(Level(total), from+1))
	return err
}

// Committed returns what the backend runs once the transaction's commit
// txid has succeeded (bbolt.Tx.OnCommit), which tells the cache of the
// commit's runs, or nil when there is nothing to tell.
func (v *View) Committed(h Host, txid uint64) func() {
	cache := h.RunCache()
	if !v.changed {
		if l := cache.list.Load(); l != nil && l.txid == txid-1 {
			runs := l.runs
			return func() { cache.list.CompareAndSwap(l, &runList{txid: txid, runs: runs}) }
		}
		return nil
	}
	runs, created, deleted := slices.Clone(v.runs), v.created, v.deleted
	return func() { cache.committed(txid, runs, created, deleted) }
}
