package segment

import (
	"encoding/binary"
	"math"
	"math/bits"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/internal/prefetch"
)

// A read transaction that reads many entries of one chain by seq (a
// replay's pooled transaction serves thousands of them between two
// checkpoints) maps the chain's segments once, so that each later read is a
// binary search in memory instead of a descent of the segments' B-tree:
// the descent's key compares on pages spread over the whole file were most
// of a replay's entry read. The map is the transaction's own: a read
// transaction sees one snapshot, and the values it holds point into
// bbolt's map of that snapshot, valid until the transaction ends.
const (
	// IndexReadsMin is how many entries of one chain a read
	// transaction reads, one after another, before it maps the chain: a
	// transaction that reads a few entries never pays for the map.
	IndexReadsMin = 64
	// SegmentIndexSegmentsMax bounds the segments one map holds, 32 bytes
	// each: 4 MiB, about 5,900,000 entries of 360 bytes. A longer chain is
	// read by descents. Each of the backend's pooled transactions
	// may hold a map, so a handle's maps take at most 32 MiB.
	IndexSegmentsMax = 1 << 17
)

// Index is a read transaction's map of one chain's segments, in seq
// order.
type Index struct {
	chainID uint64
	// reads counts the entries of chainID read since the transaction
	// last read another chain's.
	reads int
	// lasts and values are the map once built: the last seq of each
	// segment (a search touches 8 bytes a step) and its stored bytes,
	// decoded when read as a descent's segment is. unmappable is set when
	// the chain has more than IndexSegmentsMax segments.
	lasts      []uint64
	values     [][]byte
	built      bool
	unmappable bool
	// Touched takes a byte of what a read of the transaction loads ahead
	// of need, so that the load is not dropped: a segment's likely entry
	// line (see MappedEntry).
	Touched byte
}

// Ready reports whether the map can answer a read of chain id: it starts
// over when the last read was of another chain and counts the read, and
// build is set when the chain has now been read IndexReadsMin times
// and can be mapped (the caller then calls Build, which says whether it
// could).
func (x *Index) Ready(id uint64) (ready, build bool) {
	if x.chainID != id {
		*x = Index{chainID: id, lasts: x.lasts[:0], values: x.values[:0], Touched: x.Touched}
	}
	if x.built {
		return true, false
	}
	x.reads++
	return false, !x.unmappable && x.reads >= IndexReadsMin
}

// Count is the number of segments in the map.
func (x *Index) Count() int { return len(x.lasts) }

// Segment is the last seq and the stored bytes of segment i of the map.
func (x *Index) Segment(i int) (last uint64, value []byte) {
	return x.lasts[i], x.values[i]
}

// MappedEntry reads the entry seq of segment i > 0 (the first whose last
// seq is at or after seq) knowing its seqs from the map: a chain's segments
// hold consecutive seqs, so segment i begins one past where segment i-1
// ends. With the count and the entry's place known before the segment is
// read, the loads of the header's count, of the entry's two offsets, of
// the last offset and of the line where the entry's bytes likely begin
// (its place times the segment's mean entry size) do not wait for one
// another: a descent's Decode reads the count, then the offsets it
// gives, then the bytes they give, three cache misses one after another
// on a segment that is rarely cached. ok is false when the segment does
// not read as the map says (then the caller decodes it with Decode, and reports the
// damage as a descent would).
func (x *Index) MappedEntry(i int, seq uint64) (data []byte, ok bool) {
	p, ok := x.entryPlace(i, seq)
	if !ok {
		return nil, false
	}
	value, n, place, dataStart := p.value, p.count, p.place, p.dataStart
	size := len(value) - dataStart
	// Loads that do not depend on one another: the processor has them
	// all in flight at once.
	stored := binary.BigEndian.Uint32(value)
	end := binary.BigEndian.Uint32(value[CountSize+OffsetSize*place:])
	lastEnd := binary.BigEndian.Uint32(value[dataStart-OffsetSize:])
	var start uint32
	if place > 0 {
		start = binary.BigEndian.Uint32(value[CountSize+OffsetSize*(place-1):])
	}
	x.Touched ^= value[p.likely()]
	if int(stored) != n || int(lastEnd) != size || start > end || int(end) > size {
		return nil, false
	}
	return value[dataStart+int(start) : dataStart+int(end) : dataStart+int(end)], true
}

// entryPlace is where the entry seq lies in segment i > 0, as the map
// tells it without reading the segment: the segment's stored bytes, its
// count of entries, seq's place among them, and where the entries' bytes
// begin. ok is false when the map's seqs do not allow seq there or the
// segment is too short for its count.
func (x *Index) entryPlace(i int, seq uint64) (p segmentPlace, ok bool) {
	first, last, value := x.lasts[i-1]+1, x.lasts[i], x.values[i]
	if seq < first || first > last || last-first >= EntriesMax {
		return segmentPlace{}, false
	}
	n := int(last-first) + 1
	p = segmentPlace{value: value, count: n, place: int(seq - first), dataStart: CountSize + OffsetSize*n}
	return p, len(value) >= p.dataStart
}

// segmentPlace is what entryPlace returns.
type segmentPlace struct {
	value                   []byte
	count, place, dataStart int
}

// likely returns the index of the byte of the value where the entry's
// bytes likely begin: its place times the segment's mean entry size.
func (p segmentPlace) likely() int {
	guess := p.dataStart + p.place*((len(p.value)-p.dataStart)/p.count)
	return min(guess, len(p.value)-1)
}

// Prefetch asks for the lines of the segment's header, offset and likely
// entry that mappedEntry would read for (chain id, seq), when the map of
// that chain is built (see internal/prefetch): a batch of reads asks for
// every entry before it reads the first, so that their misses overlap.
func (x *Index) Prefetch(id, seq uint64) {
	if !x.built || x.chainID != id {
		return
	}
	i := x.Search(seq)
	if i == 0 || i == len(x.lasts) {
		return
	}
	p, ok := x.entryPlace(i, seq)
	if !ok {
		return
	}
	prefetch.Line(&p.value[0])
	prefetch.Line(&p.value[CountSize+OffsetSize*p.place])
	prefetch.Line(&p.value[p.likely()])
}

// Search returns the index of the first segment whose last seq is at or
// after seq, or len(lasts). A chain's segments are filled to about the
// same size, so seq's segment is about where seq falls among the chain's
// seqs: the search reads that segment's last seq and the one before it
// first (one line, whose load and the loads of the segment's value do not
// wait on earlier reads of the map), and steps from there, where halving
// the 22,000 segments of a 1,000,000-entry chain read 15 lasts one after
// another. A guess more than segmentStepsMax segments off (entries of
// very different sizes) halves what is left.
func (x *Index) Search(seq uint64) int {
	n := len(x.lasts)
	if n == 0 || seq > x.lasts[n-1] {
		return n
	}
	guess := 0
	if total := x.lasts[n-1]; total > 0 && seq > 0 {
		high, low := bits.Mul64(seq-1, uint64(n))
		q, _ := bits.Div64(high, low, total) // high < total: seq-1 < total
		guess = int(q)
	}
	if x.lasts[guess] < seq {
		for i := guess + 1; i < n; i++ {
			if i-guess > segmentStepsMax {
				return x.searchRange(i, n, seq)
			}
			if x.lasts[i] >= seq {
				return i
			}
		}
		return n // not reached: seq <= lasts[n-1]
	}
	for i := guess; i > 0; i-- {
		if guess-i >= segmentStepsMax {
			return x.searchRange(0, i, seq)
		}
		if x.lasts[i-1] < seq {
			return i
		}
	}
	return 0
}

// segmentStepsMax bounds the segments search steps over one at a time
// from its guess before it halves what is left.
const segmentStepsMax = 4

// searchRange halves lasts[low:high] down to the first segment whose last
// seq is at or after seq (high when there is none).
func (x *Index) searchRange(low, high int, seq uint64) int {
	for low < high {
		middle := int(uint(low+high) >> 1)
		if x.lasts[middle] < seq {
			low = middle + 1
		} else {
			high = middle
		}
	}
	return low
}

// Build maps the chain's segments with one pass of c, a cursor of the
// entry_segments bucket, over their keys, and reports whether it could.
func (x *Index) Build(c *bbolt.Cursor, id uint64) bool {
	return x.build(c, id, IndexSegmentsMax)
}

// IndexSampleSegments is how many segments Build reads before it
// estimates the chain's segments from their seqs and the chain's last seq,
// and gives up on a chain that would have more than IndexSegmentsMax: each
// segment's key is on a page of its own (a segment fills about four), so
// a pass over 131,072 of them on a file larger than the page cache was
// that many reads from the disk (about 10 s here at 100,000,000 entries)
// before the chain was found too long to map. The estimate assumes the
// rest of the chain packs its segments as its first ones do; when it is
// wrong the pass stops at IndexSegmentsMax as before, or a chain that would
// have fit is read by descents, which find the same entries.
const IndexSampleSegments = 64

func (x *Index) build(c *bbolt.Cursor, id uint64, segmentsMax int) bool {
	last, lastKnown := chainLastSeq(c, id)
	var prefix [8]byte
	binary.BigEndian.PutUint64(prefix[:], id)
	for k, v := c.Seek(prefix[:]); len(k) >= 8 && binary.BigEndian.Uint64(k) == id; k, v = c.Next() {
		if len(k) != KeySize || len(x.lasts) == segmentsMax ||
			(len(x.lasts) == IndexSampleSegments && lastKnown && segmentsEstimate(x.lasts, last) > uint64(segmentsMax)) {
			// Damage (a key of another length, which descents report), or
			// a chain longer than the map holds, counted or estimated.
			x.lasts, x.values, x.unmappable = x.lasts[:0], x.values[:0], true
			return false
		}
		x.lasts = append(x.lasts, binary.BigEndian.Uint64(k[8:]))
		x.values = append(x.values, v)
	}
	x.built = true
	return true
}

// chainLastSeq returns the last seq of the chain's segments, from the key
// before the next chain's first (two descents, no pass).
func chainLastSeq(c *bbolt.Cursor, id uint64) (uint64, bool) {
	if id == math.MaxUint64 {
		return 0, false
	}
	var next [8]byte
	binary.BigEndian.PutUint64(next[:], id+1)
	k, _ := c.Seek(next[:])
	if k == nil {
		k, _ = c.Last()
	} else {
		k, _ = c.Prev()
	}
	if len(k) != KeySize || binary.BigEndian.Uint64(k) != id {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[8:]), true
}

// segmentsEstimate is how many segments a chain whose last seq is last
// holds, at the rate of its first segments (their last seqs, ascending).
func segmentsEstimate(first []uint64, last uint64) uint64 {
	span := first[len(first)-1]
	if span == 0 {
		return math.MaxUint64
	}
	hi, lo := bits.Mul64(last, uint64(len(first)))
	if hi >= span {
		return math.MaxUint64
	}
	n, _ := bits.Div64(hi, lo, span)
	return n
}

// Built reports whether the map is built.
func (x *Index) Built() bool { return x.built }

// Reads is how many reads of the chain the map has counted since the
// transaction last read another chain.
func (x *Index) Reads() int { return x.reads }
