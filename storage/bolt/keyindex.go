package bolt

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/internal/prefetch"
	"github.com/ledgerworks/ledger/storage"
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
	// KeyDigestSize is the size of the digest that stands for a key in a run.
	KeyDigestSize = 16
	// keyRecordSize is one run record: u64be chain id | digest | u64be seq.
	keyRecordSize = 8 + KeyDigestSize + 8
	// keyRecordPrefix is the part of a record that orders and identifies it.
	keyRecordPrefix = 8 + KeyDigestSize
	// keyChunkRecords is how many records one value of a run holds at most
	// (1 MiB). bbolt stores a value larger than a page contiguously in
	// overflow pages, so a run of 1,000,000 keys is 31 values under one
	// branch page, not 8,300 under a three-level B-tree: a replay's seek in
	// a run touches one cached branch page and the header of the chunk's
	// first page, and the search in the chunk (searchChunk, interpolating)
	// touches about as many cache lines in 1 MiB as a binary search did in
	// 3,840 bytes. Readers take chunks of any size that is a whole number
	// of records: files written with keyChunkRecordsV1 read unchanged.
	// Sizes measured in docs/PERFORMANCE.md.
	keyChunkRecords = 32768
	// keyChunkRecordsV1 is the size of the chunks of files written before
	// keyChunkRecords grew: one value of 3,840 bytes, about a page each.
	keyChunkRecordsV1 = 120
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
	// filterBitsPerKey sizes the Bloom filters (about 1% false positives).
	filterBitsPerKey = 10
	// filterBlockWords is the size of a filter block: one 64-byte cache line.
	filterBlockWords = 8
	// filterProbes is how many bits of its block a key sets.
	filterProbes = 7
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
	radix atomic.Pointer[runRadix]
}

// runRadix holds, for each chunk of a run whose records are of one chain,
// where each of radixBuckets equal slices of the chunk's digest range
// begins: a search reads its slice's start and end in memory (2 bytes
// each, 64 KiB per 1,000,000 keys, which stay cached) and then about
// radixRecords records of the chunk, instead of interpolating across it.
// A run is immutable and its name is never reused while the process
// knows it, so one built once serves every transaction.
type runRadix struct {
	starts  [][]uint16 // per chunk: radixBuckets(n)+1 record indexes, or nil
	records []int      // per chunk: its number of records, checked on use
}

// radixRecords is the mean number of records a bucket of a runRadix
// covers: one kilobyte of the chunk.
const radixRecords = 32

// radixBucket returns the bucket of the digest high word h among buckets
// equal slices of first..last (first < last, first <= h <= last):
// floor((h-first) * buckets / (last-first)), the last slice taking last.
func radixBucket(h, first, last uint64, buckets int) int {
	high, low := bits.Mul64(h-first, uint64(buckets))
	b, _ := bits.Div64(high, low, last-first) // high < last-first: h-first <= last-first
	return min(int(b), buckets-1)
}

// radixBound returns the lowest digest high word of bucket b (0 < b <
// buckets) as radixBucket counts them: first + ceil(b * (last-first) /
// buckets).
func radixBound(b int, first, last uint64, buckets int) uint64 {
	high, low := bits.Mul64(uint64(b), last-first)
	q, r := bits.Div64(high, low, uint64(buckets)) // high < buckets: b < buckets
	if r != 0 {
		q++
	}
	return first + q
}

// newRunRadix maps the given chunks.
func newRunRadix(chunks [][]byte) *runRadix {
	x := &runRadix{starts: make([][]uint16, len(chunks)), records: make([]int, len(chunks))}
	for i, chunk := range chunks {
		n := len(chunk) / keyRecordSize
		x.records[i] = n
		if n < 2*radixRecords || n > math.MaxUint16 {
			continue
		}
		first, last := loadPrefix(chunk, 0), loadPrefix(chunk, n-1)
		if first.chainID != last.chainID || first.digestHigh >= last.digestHigh {
			continue
		}
		buckets := n / radixRecords
		starts := make([]uint16, buckets+1)
		j := 0
		for b := 1; b < buckets; b++ { // starts[0] is 0
			bound := radixBound(b, first.digestHigh, last.digestHigh, buckets)
			for j < n && binary.BigEndian.Uint64(chunk[j*keyRecordSize+8:]) < bound {
				j++
			}
			starts[b] = uint16(j)
		}
		starts[buckets] = uint16(n)
		x.starts[i] = starts
	}
	return x
}

// searchNear returns the index of the first record of the i-th chunk that
// is not less than want, as searchChunk does: in the records of want's
// bucket (records of lower buckets have lower digests, of higher ones
// higher). It also returns a byte of the records it loaded ahead of need,
// for the caller to keep (a load whose value is dropped is dropped too).
func (x *runRadix) searchNear(i int, chunk []byte, want recordPrefix) (int, byte) {
	starts := x.starts[i]
	n := len(chunk) / keyRecordSize
	if starts == nil {
		return searchChunk(chunk, want), 0
	}
	first, last := loadPrefix(chunk, 0), loadPrefix(chunk, n-1)
	switch {
	case want.chainID != first.chainID || want.digestHigh < first.digestHigh:
		if want.less(first) {
			return 0, 0
		}
		return n, 0
	case want.digestHigh > last.digestHigh:
		return n, 0
	}
	lo, hi, guess := bucketGuess(starts, first, last, want)
	if hi-lo <= 1 {
		return searchChunkRange(chunk, lo, hi, want), 0
	}
	return searchFrom(chunk, lo, hi, guess, want), touchNear(chunk, lo, hi, guess)
}

// bucketGuess returns the records lo..hi of want's bucket in a chunk whose
// first and last records are first and last (want's digest between
// theirs, the chunk's map starts), and the record of the bucket to read
// first: where want's digest falls in the bucket's share of the digest
// range, about two records from the answer when digests are uniform,
// where an interpolation across the bucket reads its two ends first and
// then a third record, each a cache miss waiting for the one before.
func bucketGuess(starts []uint16, first, last, want recordPrefix) (lo, hi, guess int) {
	buckets := len(starts) - 1
	b := radixBucket(want.digestHigh, first.digestHigh, last.digestHigh, buckets)
	lo, hi = int(starts[b]), int(starts[b+1])
	low := first.digestHigh
	if b > 0 {
		low = radixBound(b, first.digestHigh, last.digestHigh, buckets)
	}
	high := last.digestHigh
	if b+1 < buckets {
		high = radixBound(b+1, first.digestHigh, last.digestHigh, buckets)
	}
	guess = lo
	if hi-lo > 1 && want.digestHigh > low && high > low {
		guess = lo + radixBucket(min(want.digestHigh, high), low, high, hi-lo)
	}
	return lo, hi, guess
}

// touchNear loads the lines of the records searchNearRecords before and
// after guess (lo <= guess < hi) and returns a byte of them: the answer is
// that near when digests are uniform, and a step onto a line not yet
// loaded would be a second miss waiting for the first (records are 32
// bytes, two to a line).
func touchNear(chunk []byte, lo, hi, guess int) byte {
	return chunk[max(guess-searchNearRecords, lo)*keyRecordSize+8] ^ chunk[min(guess+searchNearRecords, hi-1)*keyRecordSize+8]
}

// prefetch asks for the lines searchNear reads first for want in the i-th
// chunk (see internal/prefetch), without waiting for them; it asks for
// none when the search would read nothing but the chunk's ends.
func (x *runRadix) prefetch(i int, chunk []byte, want recordPrefix) {
	starts := x.starts[i]
	n := len(chunk) / keyRecordSize
	if starts == nil || n == 0 {
		return
	}
	first, last := loadPrefix(chunk, 0), loadPrefix(chunk, n-1)
	if want.chainID != first.chainID || want.digestHigh < first.digestHigh || want.digestHigh > last.digestHigh {
		return
	}
	lo, hi, guess := bucketGuess(starts, first, last, want)
	if hi-lo <= 1 {
		return
	}
	prefetch.Line(&chunk[max(guess-searchNearRecords, lo)*keyRecordSize])
	prefetch.Line(&chunk[guess*keyRecordSize])
	prefetch.Line(&chunk[min(guess+searchNearRecords, hi-1)*keyRecordSize])
}

// searchNearRecords is how many records on either side of its first read
// searchNear loads ahead of need.
const searchNearRecords = 2

// searchWalkMax bounds the records searchFrom steps over one at a time
// before it halves what is left.
const searchWalkMax = 4

// searchFrom returns the index of the first record of chunk in lo..hi
// that is not less than want (hi when there is none), as
// searchChunkRange does, reading the record at guess first and stepping
// from it: near an answer that is near guess, it reads one or two cache
// lines where halving reads about five.
func searchFrom(chunk []byte, lo, hi, guess int, want recordPrefix) int {
	if loadPrefix(chunk, guess).less(want) {
		for j := guess + 1; j < hi; j++ {
			if j-guess > searchWalkMax {
				return searchChunkRange(chunk, j, hi, want)
			}
			if !loadPrefix(chunk, j).less(want) {
				return j
			}
		}
		return hi
	}
	for j := guess; j > lo; j-- {
		if guess-j >= searchWalkMax {
			return searchChunkRange(chunk, lo, j, want)
		}
		if loadPrefix(chunk, j-1).less(want) {
			return j
		}
	}
	return lo
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

func filterHashes(chainID uint64, digest []byte) (uint64, uint64) {
	h1 := binary.LittleEndian.Uint64(digest[0:8]) ^ chainID*0x9e3779b97f4a7c15
	h2 := binary.LittleEndian.Uint64(digest[8:16])
	return h1, h2
}

func newFilter(count uint64) []uint64 {
	blocks := max((count*filterBitsPerKey+511)/512, 1)
	return make([]uint64, blocks*filterBlockWords)
}

func filterAdd(f []uint64, chainID uint64, digest []byte) {
	h1, h2 := filterHashes(chainID, digest)
	block, _ := bits.Mul64(h1, uint64(len(f)/filterBlockWords))
	words := f[block*filterBlockWords : (block+1)*filterBlockWords]
	for i := range filterProbes {
		bit := (h2 >> (9 * i)) & 511
		words[bit/64] |= 1 << (bit % 64)
	}
}

func filterMayContain(f []uint64, chainID uint64, digest []byte) bool {
	h1, h2 := filterHashes(chainID, digest)
	block, _ := bits.Mul64(h1, uint64(len(f)/filterBlockWords))
	words := f[block*filterBlockWords : (block+1)*filterBlockWords]
	for i := range filterProbes {
		bit := (h2 >> (9 * i)) & 511
		if words[bit/64]&(1<<(bit%64)) == 0 {
			return false
		}
	}
	return true
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
	filter atomic.Pointer[keyFilter]
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
	filter        *keyFilter
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
	searches int            // searches made through the cursor before the table was built
	last     []recordPrefix // the prefix of each chunk's last record (its key), ascending
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
	if len(cv) != 8 || len(fv) == 0 || len(fv)%(filterBlockWords*8) != 0 {
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
	if f != nil && !f.mayContain(chainID, digest[:]) {
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
	var target [keyRecordPrefix]byte
	binary.BigEndian.PutUint64(target[:8], chainID)
	copy(target[8:], digest[:])
	for i := len(t.index.runs) - 1; i >= 0; i-- {
		r := t.index.runs[i]
		if !filterMayContain(r.filter, chainID, digest[:]) {
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
	want := loadPrefix(target, 0)
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
	if k == nil || len(k) != keyRecordPrefix {
		return 0, false, nil
	}
	if len(v)%keyRecordSize != 0 {
		return 0, false, fmt.Errorf("%s: %w: key run %x chunk of %d bytes", t.path, storage.ErrCorrupt, r.name, len(v))
	}
	return chunkRecord(v, searchChunk(v, want), want)
}

// searchTable is searchRun in a run's table (table.last not nil): the
// chunk by a binary search of the chunks' last records, in memory, then
// the run's radix map or searchChunk in the chunk.
func (t *tx) searchTable(r *keyRun, table *runTable, want recordPrefix) (uint64, bool, error) {
	low := table.chunkOf(want)
	if low == len(table.chunks) {
		return 0, false, nil
	}
	chunk := table.chunks[low]
	if x := table.radix(r, low); x != nil {
		at, near := x.searchNear(low, chunk, want)
		t.segmentIndex.Touched ^= near
		return chunkRecord(chunk, at, want)
	}
	return chunkRecord(chunk, searchChunk(chunk, want), want)
}

// chunkOf returns the index of the chunk whose last record is the first at
// or after want (len(table.chunks) when none is), by a binary search of the
// chunks' last records, in memory.
func (table *runTable) chunkOf(want recordPrefix) int {
	low, high := 0, len(table.last)
	for low < high {
		middle := int(uint(low+high) >> 1)
		if table.last[middle].less(want) {
			low = middle + 1
		} else {
			high = middle
		}
	}
	return low
}

// radix returns the run's radix map when it maps the table's chunks (the
// i-th with as many records), else nil.
func (table *runTable) radix(r *keyRun, i int) *runRadix {
	if x := r.radix.Load(); x != nil && len(x.records) == len(table.chunks) && x.records[i] == len(table.chunks[i])/keyRecordSize {
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
	want := recordPrefix{chainID: chainID, digestHigh: binary.BigEndian.Uint64(digest[0:8]), digestLow: binary.BigEndian.Uint64(digest[8:16])}
	for i, table := range t.index.tableAt {
		if table == nil || table.last == nil || !filterMayContain(t.index.runs[i].filter, chainID, digest[:]) {
			continue
		}
		if low := table.chunkOf(want); low < len(table.chunks) {
			if x := table.radix(t.index.runs[i], low); x != nil {
				x.prefetch(low, table.chunks[low], want)
			}
		}
	}
}

// chunkRecord returns the seq of the i-th record of chunk when it is want.
func chunkRecord(chunk []byte, i int, want recordPrefix) (uint64, bool, error) {
	if i < len(chunk)/keyRecordSize && loadPrefix(chunk, i) == want {
		return binary.BigEndian.Uint64(chunk[i*keyRecordSize+keyRecordPrefix:]), true, nil
	}
	return 0, false, nil
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
	var last []recordPrefix
	var chunks [][]byte
	for k, v := cur.First(); k != nil && len(k) == keyRecordPrefix; k, v = cur.Next() {
		if len(chunks) == runTableChunksMax {
			return table, nil // too many: table.last stays nil
		}
		if len(v) == 0 || len(v)%keyRecordSize != 0 {
			return nil, fmt.Errorf("%s: %w: key run %x chunk of %d bytes", t.path, storage.ErrCorrupt, name, len(v))
		}
		p := loadPrefix(k, 0)
		if len(last) > 0 && !last[len(last)-1].less(p) {
			return nil, fmt.Errorf("%s: %w: key run %x out of order", t.path, storage.ErrCorrupt, name)
		}
		last, chunks = append(last, p), append(chunks, v)
	}
	table.last, table.chunks = last, chunks
	if table.last == nil {
		table.last = []recordPrefix{} // an empty run: nothing to find
	}
	if r.radix.Load() == nil {
		// A run this process did not write: its map reads every record
		// once (32 bytes a key), for a run searched often enough to have a
		// table.
		r.radix.Store(newRunRadix(chunks))
	}
	return table, nil
}

// recordPrefix is the part of a run record that orders and identifies it,
// as big-endian words.
type recordPrefix struct {
	chainID, digestHigh, digestLow uint64
}

// loadPrefix reads the prefix of the i-th record of records (or of a
// target of keyRecordPrefix bytes, i 0).
func loadPrefix(records []byte, i int) recordPrefix {
	rec := records[i*keyRecordSize : i*keyRecordSize+keyRecordPrefix]
	return recordPrefix{
		chainID:    binary.BigEndian.Uint64(rec[0:8]),
		digestHigh: binary.BigEndian.Uint64(rec[8:16]),
		digestLow:  binary.BigEndian.Uint64(rec[16:24]),
	}
}

func (p recordPrefix) less(q recordPrefix) bool {
	if p.chainID != q.chainID {
		return p.chainID < q.chainID
	}
	if p.digestHigh != q.digestHigh {
		return p.digestHigh < q.digestHigh
	}
	return p.digestLow < q.digestLow
}

// searchChunk returns the index of the first record of a sorted chunk that
// is not less than want (the number of records when none), comparing
// records as words. Digests are uniform (BLAKE3), so where the records at
// both ends of the range are of the target's chain, the next record read
// is the one the target's digest falls at between theirs (interpolation):
// about four reads find a record among 32,768, each near the last, where a
// binary search reads fifteen spread over the chunk, a cache miss each.
// A range whose ends are of other chains (a chunk holding several chains'
// records), or that interpolation has not narrowed in
// searchInterpolationsMax reads (digests not uniform: a damaged or
// hostile file), is halved instead, so a search never reads more than
// searchInterpolationsMax plus a binary search's records.
func searchChunk(chunk []byte, want recordPrefix) int {
	lo, hi := 0, len(chunk)/keyRecordSize
	for steps := 0; hi-lo > searchBinaryMax && steps < searchInterpolationsMax; steps++ {
		mid := interpolate(chunk, lo, hi, want)
		if loadPrefix(chunk, mid).less(want) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return searchChunkRange(chunk, lo, hi, want)
}

// searchChunkRange halves records lo..hi of chunk down to the first whose
// prefix is not less than want (hi when there is none).
func searchChunkRange(chunk []byte, lo, hi int, want recordPrefix) int {
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if loadPrefix(chunk, mid).less(want) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

const (
	// searchBinaryMax is the size of a range searchChunk halves rather than
	// interpolates in: a few records on one or two cache lines.
	searchBinaryMax = 8
	// searchInterpolationsMax bounds the interpolating reads of one search.
	searchInterpolationsMax = 12
)

// interpolate returns the index in [lo, hi) of the record of chunk to
// compare with want next (hi-lo > 1): where want's digest falls between
// the digests of the range's first and last records when all three are of
// one chain and the range's digests differ, its middle otherwise.
func interpolate(chunk []byte, lo, hi int, want recordPrefix) int {
	mid := int(uint(lo+hi) >> 1)
	first, last := loadPrefix(chunk, lo), loadPrefix(chunk, hi-1)
	if first.chainID != want.chainID || last.chainID != want.chainID || first.digestHigh >= last.digestHigh {
		return mid
	}
	switch {
	case want.digestHigh <= first.digestHigh:
		return lo
	case want.digestHigh >= last.digestHigh:
		return hi - 1
	}
	// (want - first) / (last - first) of the hi-1-lo records past lo, in
	// 128 bits: the quotient is below hi-1-lo, since want < last.
	high, low := bits.Mul64(want.digestHigh-first.digestHigh, uint64(hi-1-lo))
	offset, _ := bits.Div64(high, low, last.digestHigh-first.digestHigh)
	return lo + int(offset)
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
		sortRecords(records) // in place: the filter takes them in any order
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
	records := make([]byte, 0, recent*keyRecordSize)
	cur := t.keys().Cursor()
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		if len(k) < 8 || len(v) != 8 {
			return fmt.Errorf("%s: %w: key index entry %x", t.path, storage.ErrCorrupt, k)
		}
		records = appendRecord(records, binary.BigEndian.Uint64(k), string(k[8:]), binary.BigEndian.Uint64(v))
	}
	sortRecords(records)
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

// appendRecord appends the run record of a key.
func appendRecord(records []byte, chainID uint64, key string, seq uint64) []byte {
	digest := KeyDigest(key)
	records = binary.BigEndian.AppendUint64(records, chainID)
	records = append(records, digest[:]...)
	return binary.BigEndian.AppendUint64(records, seq)
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
	count := uint64(len(records) / keyRecordSize)
	r := &keyRun{name: runName(runLevel(count), uint64(t.tx.ID())), count: count, filter: newFilter(count)}
	b, err := t.runs().CreateBucket(r.name[:])
	if err != nil {
		return nil, t.writeError(err)
	}
	b.FillPercent = 1.0
	for o := 0; o < len(records); o += keyRecordSize {
		rec := records[o : o+keyRecordSize]
		filterAdd(r.filter, binary.BigEndian.Uint64(rec[:8]), rec[8:keyRecordPrefix])
	}
	var chunks [][]byte
	for o := 0; o < len(records); o += keyChunkRecords * keyRecordSize {
		chunk := records[o:min(o+keyChunkRecords*keyRecordSize, len(records))]
		last := chunk[len(chunk)-keyRecordSize : len(chunk)-keyRecordSize+keyRecordPrefix]
		if err := b.Put(last, chunk); err != nil {
			return nil, t.writeError(err)
		}
		chunks = append(chunks, chunk)
	}
	r.radix.Store(newRunRadix(chunks))
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
		chunks[i] = chunks[i][keyRecordSize:]
		if len(chunks[i]) == 0 {
			var k []byte
			if k, chunks[i] = cursors[i].Next(); k == nil || len(k) != keyRecordPrefix {
				chunks[i] = nil
			}
		}
		if len(chunks[i])%keyRecordSize != 0 {
			return fmt.Errorf("%s: %w: key run chunk of %d bytes", t.path, storage.ErrCorrupt, len(chunks[i]))
		}
		return nil
	}
	for i := range chunks {
		if len(chunks[i])%keyRecordSize != 0 {
			return nil, fmt.Errorf("%s: %w: key run chunk of %d bytes", t.path, storage.ErrCorrupt, len(chunks[i]))
		}
	}
	// heads holds the first unread record of each run, decoded: the merge
	// compares words, not bytes.
	heads := make([]recordKey, len(runs))
	for i, c := range chunks {
		if len(c) > 0 {
			heads[i] = loadRecord(c)
		}
	}
	records := make([]byte, total*keyRecordSize)
	written := 0
	for {
		best := -1
		for i, c := range chunks {
			if len(c) == 0 {
				continue
			}
			if best < 0 || compareRecords(heads[i], heads[best]) < 0 {
				best = i
			}
		}
		if best < 0 {
			break
		}
		if written == len(records) {
			return nil, fmt.Errorf("%s: %w: key runs hold more records than their headers say (%d)", t.path, storage.ErrCorrupt, total)
		}
		copy(records[written:], chunks[best][:keyRecordSize])
		written += keyRecordSize
		if err := next(best); err != nil {
			return nil, err
		}
		if len(chunks[best]) > 0 {
			heads[best] = loadRecord(chunks[best])
		}
	}
	records = records[:written]
	if uint64(len(records)/keyRecordSize) != total {
		return nil, fmt.Errorf("%s: %w: key runs hold %d records, their headers say %d", t.path, storage.ErrCorrupt, len(records)/keyRecordSize, total)
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
