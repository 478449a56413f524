package keyindex

import (
	"encoding/binary"
	"math"
	"math/bits"
	"sync/atomic"

	"github.com/ledgerworks/ledger/internal/prefetch"
	"github.com/ledgerworks/ledger/storage"
)

// A run record and the in-memory structures over records: the Bloom
// filters, a run's radix map, the search of a chunk.
const (
	// KeyDigestSize is the size of the digest that stands for a key in a run.
	DigestSize = 16
	// RecordSize is one run record: u64be chain id | digest | u64be seq.
	RecordSize = 8 + DigestSize + 8
	// RecordPrefixSize is the part of a record that orders and identifies it.
	RecordPrefixSize = 8 + DigestSize
	// ChunkRecords is how many records one value of a run holds at most
	// (1 MiB). bbolt stores a value larger than a page contiguously in
	// overflow pages, so a run of 1,000,000 keys is 31 values under one
	// branch page, not 8,300 under a three-level B-tree: a replay's seek in
	// a run touches one cached branch page and the header of the chunk's
	// first page, and the search in the chunk (searchChunk, interpolating)
	// touches about as many cache lines in 1 MiB as a binary search did in
	// 3,840 bytes. Readers take chunks of any size that is a whole number
	// of records: files written with keyChunkRecordsV1 read unchanged.
	// Sizes measured in docs/PERFORMANCE.md.
	ChunkRecords = 32768
	// ChunkRecordsV1 is the size of the chunks of files written before
	// keyChunkRecords grew: one value of 3,840 bytes, about a page each.
	ChunkRecordsV1 = 120
	// filterBitsPerKey sizes the Bloom filters (about 1% false positives).
	filterBitsPerKey = 10
	// FilterBlockWords is the size of a filter block: one 64-byte cache line.
	FilterBlockWords = 8
	// filterProbes is how many bits of its block a key sets.
	filterProbes = 7
)

// Radix holds, for each chunk of a run whose records are of one chain,
// where each of radixBuckets equal slices of the chunk's digest range
// begins: a search reads its slice's start and end in memory (2 bytes
// each, 64 KiB per 1,000,000 keys, which stay cached) and then about
// radixRecords records of the chunk, instead of interpolating across it.
// A run is immutable and its name is never reused while the process
// knows it, so one built once serves every transaction.
type Radix struct {
	Starts  [][]uint16 // per chunk: radixBuckets(n)+1 record indexes, or nil
	Records []int      // per chunk: its number of records, checked on use
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

// NewRadix maps the given chunks.
func NewRadix(chunks [][]byte) *Radix {
	x := &Radix{Starts: make([][]uint16, len(chunks)), Records: make([]int, len(chunks))}
	for i, chunk := range chunks {
		n := len(chunk) / RecordSize
		x.Records[i] = n
		if n < 2*radixRecords || n > math.MaxUint16 {
			continue
		}
		first, last := LoadPrefix(chunk, 0), LoadPrefix(chunk, n-1)
		if first.ChainID != last.ChainID || first.DigestHigh >= last.DigestHigh {
			continue
		}
		buckets := n / radixRecords
		starts := make([]uint16, buckets+1)
		j := 0
		for b := 1; b < buckets; b++ { // starts[0] is 0
			bound := radixBound(b, first.DigestHigh, last.DigestHigh, buckets)
			for j < n && binary.BigEndian.Uint64(chunk[j*RecordSize+8:]) < bound {
				j++
			}
			starts[b] = uint16(j)
		}
		starts[buckets] = uint16(n)
		x.Starts[i] = starts
	}
	return x
}

// SearchNear returns the index of the first record of the i-th chunk that
// is not less than want, as searchChunk does: in the records of want's
// bucket (records of lower buckets have lower digests, of higher ones
// higher). It also returns a byte of the records it loaded ahead of need,
// for the caller to keep (a load whose value is dropped is dropped too).
func (x *Radix) SearchNear(i int, chunk []byte, want Prefix) (int, byte) {
	starts := x.Starts[i]
	n := len(chunk) / RecordSize
	if starts == nil {
		return SearchChunk(chunk, want), 0
	}
	first, last := LoadPrefix(chunk, 0), LoadPrefix(chunk, n-1)
	switch {
	case want.ChainID != first.ChainID || want.DigestHigh < first.DigestHigh:
		if want.Less(first) {
			return 0, 0
		}
		return n, 0
	case want.DigestHigh > last.DigestHigh:
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
func bucketGuess(starts []uint16, first, last, want Prefix) (lo, hi, guess int) {
	buckets := len(starts) - 1
	b := radixBucket(want.DigestHigh, first.DigestHigh, last.DigestHigh, buckets)
	lo, hi = int(starts[b]), int(starts[b+1])
	low := first.DigestHigh
	if b > 0 {
		low = radixBound(b, first.DigestHigh, last.DigestHigh, buckets)
	}
	high := last.DigestHigh
	if b+1 < buckets {
		high = radixBound(b+1, first.DigestHigh, last.DigestHigh, buckets)
	}
	guess = lo
	if hi-lo > 1 && want.DigestHigh > low && high > low {
		guess = lo + radixBucket(min(want.DigestHigh, high), low, high, hi-lo)
	}
	return lo, hi, guess
}

// touchNear loads the lines of the records searchNearRecords before and
// after guess (lo <= guess < hi) and returns a byte of them: the answer is
// that near when digests are uniform, and a step onto a line not yet
// loaded would be a second miss waiting for the first (records are 32
// bytes, two to a line).
func touchNear(chunk []byte, lo, hi, guess int) byte {
	return chunk[max(guess-searchNearRecords, lo)*RecordSize+8] ^ chunk[min(guess+searchNearRecords, hi-1)*RecordSize+8]
}

// Prefetch asks for the lines searchNear reads first for want in the i-th
// chunk (see internal/prefetch), without waiting for them; it asks for
// none when the search would read nothing but the chunk's ends.
func (x *Radix) Prefetch(i int, chunk []byte, want Prefix) {
	starts := x.Starts[i]
	n := len(chunk) / RecordSize
	if starts == nil || n == 0 {
		return
	}
	first, last := LoadPrefix(chunk, 0), LoadPrefix(chunk, n-1)
	if want.ChainID != first.ChainID || want.DigestHigh < first.DigestHigh || want.DigestHigh > last.DigestHigh {
		return
	}
	lo, hi, guess := bucketGuess(starts, first, last, want)
	if hi-lo <= 1 {
		return
	}
	prefetch.Line(&chunk[max(guess-searchNearRecords, lo)*RecordSize])
	prefetch.Line(&chunk[guess*RecordSize])
	prefetch.Line(&chunk[min(guess+searchNearRecords, hi-1)*RecordSize])
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
func searchFrom(chunk []byte, lo, hi, guess int, want Prefix) int {
	if LoadPrefix(chunk, guess).Less(want) {
		for j := guess + 1; j < hi; j++ {
			if j-guess > searchWalkMax {
				return searchChunkRange(chunk, j, hi, want)
			}
			if !LoadPrefix(chunk, j).Less(want) {
				return j
			}
		}
		return hi
	}
	for j := guess; j > lo; j-- {
		if guess-j >= searchWalkMax {
			return searchChunkRange(chunk, lo, j, want)
		}
		if LoadPrefix(chunk, j-1).Less(want) {
			return j
		}
	}
	return lo
}

func FilterHashes(chainID uint64, digest []byte) (uint64, uint64) {
	h1 := binary.LittleEndian.Uint64(digest[0:8]) ^ chainID*0x9e3779b97f4a7c15
	h2 := binary.LittleEndian.Uint64(digest[8:16])
	return h1, h2
}

func FilterWords(count uint64) []uint64 {
	return make([]uint64, filterBlocks(count)*FilterBlockWords)
}

// filterBlocks is the number of blocks of a filter for count keys.
func filterBlocks(count uint64) uint64 { return max((count*filterBitsPerKey+511)/512, 1) }

func FilterAdd(f []uint64, chainID uint64, digest []byte) {
	h1, h2 := FilterHashes(chainID, digest)
	block, _ := bits.Mul64(h1, uint64(len(f)/FilterBlockWords))
	words := f[block*FilterBlockWords : (block+1)*FilterBlockWords]
	for i := range filterProbes {
		bit := (h2 >> (9 * i)) & 511
		words[bit/64] |= 1 << (bit % 64)
	}
}

// FilterBytes is the size in bytes of a filter for count keys, as stored.
func FilterBytes(count uint64) uint64 { return filterBlocks(count) * FilterBlockWords * 8 }

// FilterKeysMax is the most keys whose filter takes at most bytes.
func FilterKeysMax(bytes uint64) uint64 {
	return bytes / (FilterBlockWords * 8) * 512 / filterBitsPerKey
}

// FilterBytesAdd adds a key to a filter as stored (FilterBytes long, the
// words FilterAdd sets, little-endian): a merge that writes a large run
// builds its filter in the bytes it stores, once.
func FilterBytesAdd(f []byte, chainID uint64, digest []byte) {
	h1, h2 := FilterHashes(chainID, digest)
	block, _ := bits.Mul64(h1, uint64(len(f)/(FilterBlockWords*8)))
	line := f[block*FilterBlockWords*8 : (block+1)*FilterBlockWords*8]
	for i := range filterProbes {
		bit := (h2 >> (9 * i)) & 511
		w := line[bit/64*8:]
		binary.LittleEndian.PutUint64(w, binary.LittleEndian.Uint64(w)|1<<(bit%64))
	}
}

// FilterBytesMayContain reports whether a run's filter, as stored in the
// run's bucket (the words FilterAdd set, little-endian), may hold the key.
// It reads the filter where it lies in the file's map: the bytes need no
// alignment, and only the key's block is read.
func FilterBytesMayContain(f []byte, chainID uint64, digest []byte) bool {
	h1, h2 := FilterHashes(chainID, digest)
	block, _ := bits.Mul64(h1, uint64(len(f)/(FilterBlockWords*8)))
	line := f[block*FilterBlockWords*8 : (block+1)*FilterBlockWords*8]
	for i := range filterProbes {
		bit := (h2 >> (9 * i)) & 511
		if binary.LittleEndian.Uint64(line[bit/64*8:])&(1<<(bit%64)) == 0 {
			return false
		}
	}
	return true
}

// ChunkRecord returns the seq of the i-th record of chunk when it is want.
func ChunkRecord(chunk []byte, i int, want Prefix) (uint64, bool, error) {
	if i < len(chunk)/RecordSize && LoadPrefix(chunk, i) == want {
		return binary.BigEndian.Uint64(chunk[i*RecordSize+RecordPrefixSize:]), true, nil
	}
	return 0, false, nil
}

// Prefix is the part of a run record that orders and identifies it,
// as big-endian words.
type Prefix struct {
	ChainID, DigestHigh, DigestLow uint64
}

// LoadPrefix reads the prefix of the i-th record of records (or of a
// target of keyRecordPrefix bytes, i 0).
func LoadPrefix(records []byte, i int) Prefix {
	rec := records[i*RecordSize : i*RecordSize+RecordPrefixSize]
	return Prefix{
		ChainID:    binary.BigEndian.Uint64(rec[0:8]),
		DigestHigh: binary.BigEndian.Uint64(rec[8:16]),
		DigestLow:  binary.BigEndian.Uint64(rec[16:24]),
	}
}

func (p Prefix) Less(q Prefix) bool {
	if p.ChainID != q.ChainID {
		return p.ChainID < q.ChainID
	}
	if p.DigestHigh != q.DigestHigh {
		return p.DigestHigh < q.DigestHigh
	}
	return p.DigestLow < q.DigestLow
}

// SearchChunk returns the index of the first record of a sorted chunk that
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
func SearchChunk(chunk []byte, want Prefix) int {
	lo, hi := 0, len(chunk)/RecordSize
	for steps := 0; hi-lo > searchBinaryMax && steps < searchInterpolationsMax; steps++ {
		mid := interpolate(chunk, lo, hi, want)
		if LoadPrefix(chunk, mid).Less(want) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return searchChunkRange(chunk, lo, hi, want)
}

// searchChunkRange halves records lo..hi of chunk down to the first whose
// prefix is not less than want (hi when there is none).
func searchChunkRange(chunk []byte, lo, hi int, want Prefix) int {
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if LoadPrefix(chunk, mid).Less(want) {
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
func interpolate(chunk []byte, lo, hi int, want Prefix) int {
	mid := int(uint(lo+hi) >> 1)
	first, last := LoadPrefix(chunk, lo), LoadPrefix(chunk, hi-1)
	if first.ChainID != want.ChainID || last.ChainID != want.ChainID || first.DigestHigh >= last.DigestHigh {
		return mid
	}
	switch {
	case want.DigestHigh <= first.DigestHigh:
		return lo
	case want.DigestHigh >= last.DigestHigh:
		return hi - 1
	}
	// (want - first) / (last - first) of the hi-1-lo records past lo, in
	// 128 bits: the quotient is below hi-1-lo, since want < last.
	high, low := bits.Mul64(want.DigestHigh-first.DigestHigh, uint64(hi-1-lo))
	offset, _ := bits.Div64(high, low, last.DigestHigh-first.DigestHigh)
	return lo + int(offset)
}

// AppendRecord appends the run record of a key.
func AppendRecord(records []byte, chainID uint64, key string, seq uint64) []byte {
	digest := storage.KeyDigest(key)
	records = binary.BigEndian.AppendUint64(records, chainID)
	records = append(records, digest[:]...)
	return binary.BigEndian.AppendUint64(records, seq)
}

// Filter is one blocked Bloom filter over every committed key of the
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
type Filter struct {
	Words []uint64
	// Seqs maps the same keys to their seqs (see seqMap); nil when the
	// handle keeps no seq map.
	Seqs *SeqMap
	// capacity is the key count the filter was sized for; beyond it the
	// false positive rate climbs.
	capacity uint64
	// rebuildAt is the key count beyond which the next write transaction
	// rebuilds it: capacity, or more when a FilterBudget held it below
	// what its keys need (see NewFilter).
	rebuildAt uint64
	count     atomic.Uint64
	// asOf is the id of the newest commit whose keys the filter holds.
	asOf atomic.Uint64
}

// Capacity is the key count the filter was sized for.
func (f *Filter) Capacity() uint64 { return f.capacity }

// Count is how many keys the filter holds.
func (f *Filter) Count() uint64 { return f.count.Load() }

// AsOf is the id of the newest commit whose keys the filter holds.
func (f *Filter) AsOf() uint64 { return f.asOf.Load() }

// Full reports that the filter holds more keys than it is to hold before it
// is rebuilt: its false positive rate climbs, and the next write
// transaction rebuilds it.
func (f *Filter) Full() bool { return f.count.Load() > f.rebuildAt }

// Bytes is the memory of the filter and its seq map.
func (f *Filter) Bytes() int64 {
	n := int64(len(f.Words)) * 8
	if f.Seqs != nil {
		n += int64(len(f.Seqs.Slots)) * seqMapSlotBytes
	}
	return n
}

// Built records that the filter holds count keys, every key of the commit
// asOf and of those before it.
func (f *Filter) Built(count, asOf uint64) {
	f.count.Store(count)
	f.asOf.Store(asOf)
}

// Commit adds the keys of the commit txid (records of RecordSize bytes),
// after which the filter holds every key as of txid. It adds nothing and
// returns false when the filter does not hold the commit before txid: a
// filter that missed a commit is no proof any more. Only one goroutine
// commits at a time.
func (f *Filter) Commit(txid uint64, records []byte) bool {
	if f.asOf.Load() != txid-1 {
		return false
	}
	for o := 0; o < len(records); o += RecordSize {
		f.Add(binary.BigEndian.Uint64(records[o:]), records[o+8:o+RecordPrefixSize], binary.BigEndian.Uint64(records[o+RecordPrefixSize:]))
	}
	f.count.Add(uint64(len(records) / RecordSize))
	f.asOf.Store(txid)
	return true
}

const (
	// FilterCapacityMin is the smallest capacity a filter is built with.
	FilterCapacityMin = 1 << 16
	// FilterGrowth is the capacity of a built filter as a multiple of the
	// keys it holds: rebuilt each time the keys triple, a key is read about
	// half a time more in amortized terms, and the filter costs 1.25 to 3.75
	// bytes per key. Not a power of two: the key runs merge when a level
	// holds KeyRunFanout (8) runs of one checkpoint's size, so with a
	// doubling every merge of a level came with a rebuild in the same
	// checkpoint (both at 464,000 and 928,000 keys with the default memory
	// table), two reads of the whole index at once on the checkpoint's core.
	FilterGrowth = 3
)

// FilterBudget bounds the memory of a filter and its seq map.
type FilterBudget struct {
	// SeqMapBytesMax bounds the seq map alone (negative: none; see
	// newSeqMap).
	SeqMapBytesMax int64
	// BytesMax bounds the filter and its seq map together (negative: no
	// bound but SeqMapBytesMax).
	BytesMax int64
}

// filterRebuildNever is the rebuildAt of a filter as large as its budget
// allows: a rebuild under the same budget would set the same bits in a
// filter of the same size, after reading every key of the index again.
const filterRebuildNever = math.MaxUint64

// NewFilter returns a filter for keys keys and more, with a seq map when
// the budget allows one. Under a bound, the filter is sized for
// FilterGrowth times the keys when that fits, else as large as fits, and
// then never rebuilt: its false positive rate climbs past 1% once it holds
// more keys than that size is for (about a quarter of new keys pass at
// four bits a key), and a larger filter would not fit. The seq map takes
// what is left, up to SeqMapBytesMax.
func NewFilter(keys uint64, b FilterBudget) *Filter {
	capacity, rebuildAt, left := filterSizes(keys, b)
	return &Filter{Words: FilterWords(capacity), Seqs: newSeqMap(keys, capacity, left), capacity: capacity, rebuildAt: rebuildAt}
}

// FilterBytesFor is the memory NewFilter(keys, b) allocates.
func FilterBytesFor(keys uint64, b FilterBudget) int64 {
	capacity, _, left := filterSizes(keys, b)
	n := filterBytes(capacity)
	if slots, ok := seqMapSlots(keys, capacity, left); ok {
		n += int64(slots) * seqMapSlotBytes
	}
	return n
}

// filterSizes returns the capacity of NewFilter's filter, the count at
// which it is rebuilt, and the bound of its seq map.
func filterSizes(keys uint64, b FilterBudget) (capacity, rebuildAt uint64, left int64) {
	capacity = max(keys*FilterGrowth, FilterCapacityMin)
	rebuildAt = capacity
	left = b.SeqMapBytesMax
	if b.BytesMax >= 0 {
		avail := b.BytesMax
		if filterBytes(capacity) > avail {
			capacity, rebuildAt = filterCapacityIn(avail), filterRebuildNever
		}
		if b.SeqMapBytesMax >= 0 {
			left = max(min(left, avail-filterBytes(capacity)), 0)
		}
	}
	return capacity, rebuildAt, left
}

// filterBytes is the size of a filter for count keys.
func filterBytes(count uint64) int64 { return int64(filterBlocks(count)) * FilterBlockWords * 8 }

// filterCapacityIn is the key count of the largest filter within bytes, of
// one block at least.
func filterCapacityIn(bytes int64) uint64 {
	blocks := uint64(max(bytes/(FilterBlockWords*8), 1))
	return blocks * 512 / filterBitsPerKey
}

// AddUnpublished sets a key's bits in a filter no other goroutine sees yet,
// with plain stores: building one from 10,000,000 keys takes about half as
// long as with atomic ones. The seq map, if any, takes the key's seq.
func (f *Filter) AddUnpublished(chainID uint64, digest []byte, seq uint64) {
	FilterAdd(f.Words, chainID, digest)
	if f.Seqs != nil {
		f.Seqs.add(chainID, digest, seq)
	}
}

// Add sets a key's bits in a published filter, and its seq in the seq map.
// Only one goroutine adds at a time (runCache.keysCommitted, under the
// cache's lock).
func (f *Filter) Add(chainID uint64, digest []byte, seq uint64) {
	if f.Seqs != nil {
		f.Seqs.add(chainID, digest, seq)
	}
	h1, h2 := FilterHashes(chainID, digest)
	block, _ := bits.Mul64(h1, uint64(len(f.Words)/FilterBlockWords))
	var mask [FilterBlockWords]uint64
	for i := range filterProbes {
		bit := (h2 >> (9 * i)) & 511
		mask[bit/64] |= 1 << (bit % 64)
	}
	words := f.Words[block*FilterBlockWords : (block+1)*FilterBlockWords]
	for i, m := range mask {
		if m != 0 {
			atomic.OrUint64(&words[i], m)
		}
	}
}

// MayContain reports whether the key may be in the index; false is a proof
// that it is not.
func (f *Filter) MayContain(chainID uint64, digest []byte) bool {
	h1, h2 := FilterHashes(chainID, digest)
	block, _ := bits.Mul64(h1, uint64(len(f.Words)/FilterBlockWords))
	words := f.Words[block*FilterBlockWords : (block+1)*FilterBlockWords]
	for i := range filterProbes {
		bit := (h2 >> (9 * i)) & 511
		if atomic.LoadUint64(&words[bit/64])&(1<<(bit%64)) == 0 {
			return false
		}
	}
	return true
}

// UsableAt returns the filter when it holds every key of the snapshot.
func (f *Filter) UsableAt(snapshot uint64) *Filter {
	if f != nil && f.asOf.Load() >= snapshot {
		return f
	}
	return nil
}
