package bolt

import (
	"encoding/binary"
	"math/bits"

	"github.com/ledgerworks/ledger/internal/prefetch"
	"github.com/ledgerworks/ledger/storage"
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
	// segmentIndexReadsMin is how many entries of one chain a read
	// transaction reads, one after another, before it maps the chain: a
	// transaction that reads a few entries never pays for the map.
	segmentIndexReadsMin = 64
	// SegmentIndexSegmentsMax bounds the segments one map holds, 32 bytes
	// each: 4 MiB, about 5,900,000 entries of 360 bytes. A longer chain is
	// read by descents. Each of the readPoolSizeMax pooled transactions
	// may hold a map, so a handle's maps take at most 32 MiB.
	SegmentIndexSegmentsMax = 1 << 17
)

// segmentIndex is a read transaction's map of one chain's segments, in seq
// order.
type segmentIndex struct {
	chainID uint64
	// reads counts the entries of chainID read since the transaction
	// last read another chain's.
	reads int
	// lasts and values are the map once built: the last seq of each
	// segment (a search touches 8 bytes a step) and its stored bytes,
	// decoded when read as a descent's segment is. unmappable is set when
	// the chain has more than SegmentIndexSegmentsMax segments.
	lasts      []uint64
	values     [][]byte
	built      bool
	unmappable bool
	// touched takes a byte of what a read of the transaction loads ahead
	// of need, so that the load is not dropped: a segment's likely entry
	// line (see mappedEntry), the run filters' lines (touchRunFilters), a
	// chunk's records near the first one read (runRadix.searchNear).
	touched byte
}

// indexedEntry reads the entry (chain id, seq) through the transaction's
// map of the chain, building the map once the chain has been read
// segmentIndexReadsMin times; its error is storage.ErrNotFound for a seq
// the chain does not hold. ok is false when the caller must descend
// instead: a write transaction, a chain read too seldom, or one too long
// to map.
func (t *tx) indexedEntry(id, seq uint64) (data []byte, ok bool, err error) {
	if t.tx.Writable() {
		return nil, false, nil
	}
	x := &t.segmentIndex
	if x.chainID != id {
		*x = segmentIndex{chainID: id, lasts: x.lasts[:0], values: x.values[:0], touched: x.touched}
	}
	if !x.built {
		x.reads++
		if x.unmappable || x.reads < segmentIndexReadsMin {
			return nil, false, nil
		}
		x.build(t, id)
		if !x.built {
			return nil, false, nil
		}
	}
	i := x.search(seq)
	if i == len(x.lasts) {
		return nil, true, storage.ErrNotFound
	}
	if i > 0 {
		if data, ok := x.mappedEntry(i, seq); ok {
			return data, true, nil
		}
	}
	var key [segmentKeySize]byte
	binary.BigEndian.PutUint64(key[:8], id)
	binary.BigEndian.PutUint64(key[8:], x.lasts[i])
	data, err = t.segmentEntry(id, seq, key[:], x.values[i])
	return data, true, err
}

// mappedEntry reads the entry seq of segment i > 0 (the first whose last
// seq is at or after seq) knowing its seqs from the map: a chain's segments
// hold consecutive seqs, so segment i begins one past where segment i-1
// ends. With the count and the entry's place known before the segment is
// read, the loads of the header's count, of the entry's two offsets, of
// the last offset and of the line where the entry's bytes likely begin
// (its place times the segment's mean entry size) do not wait for one
// another: a descent's decodeSegment reads the count, then the offsets it
// gives, then the bytes they give, three cache misses one after another
// on a segment that is rarely cached. ok is false when the segment does
// not read as the map says (then segmentEntry reads it, and reports the
// damage as a descent would).
func (x *segmentIndex) mappedEntry(i int, seq uint64) (data []byte, ok bool) {
	p, ok := x.entryPlace(i, seq)
	if !ok {
		return nil, false
	}
	value, n, place, dataStart := p.value, p.count, p.place, p.dataStart
	size := len(value) - dataStart
	// Loads that do not depend on one another: the processor has them
	// all in flight at once.
	stored := binary.BigEndian.Uint32(value)
	end := binary.BigEndian.Uint32(value[segmentCountSize+segmentOffsetSize*place:])
	lastEnd := binary.BigEndian.Uint32(value[dataStart-segmentOffsetSize:])
	var start uint32
	if place > 0 {
		start = binary.BigEndian.Uint32(value[segmentCountSize+segmentOffsetSize*(place-1):])
	}
	x.touched ^= value[p.likely()]
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
func (x *segmentIndex) entryPlace(i int, seq uint64) (p segmentPlace, ok bool) {
	first, last, value := x.lasts[i-1]+1, x.lasts[i], x.values[i]
	if seq < first || first > last || last-first >= segmentEntriesMax {
		return segmentPlace{}, false
	}
	n := int(last-first) + 1
	p = segmentPlace{value: value, count: n, place: int(seq - first), dataStart: segmentCountSize + segmentOffsetSize*n}
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

// prefetch asks for the lines of the segment's header, offset and likely
// entry that mappedEntry would read for (chain id, seq), when the map of
// that chain is built (see internal/prefetch): a batch of reads asks for
// every entry before it reads the first, so that their misses overlap.
func (x *segmentIndex) prefetch(id, seq uint64) {
	if !x.built || x.chainID != id {
		return
	}
	i := x.search(seq)
	if i == 0 || i == len(x.lasts) {
		return
	}
	p, ok := x.entryPlace(i, seq)
	if !ok {
		return
	}
	prefetch.Line(&p.value[0])
	prefetch.Line(&p.value[segmentCountSize+segmentOffsetSize*p.place])
	prefetch.Line(&p.value[p.likely()])
}

// search returns the index of the first segment whose last seq is at or
// after seq, or len(lasts). A chain's segments are filled to about the
// same size, so seq's segment is about where seq falls among the chain's
// seqs: the search reads that segment's last seq and the one before it
// first (one line, whose load and the loads of the segment's value do not
// wait on earlier reads of the map), and steps from there, where halving
// the 22,000 segments of a 1,000,000-entry chain read 15 lasts one after
// another. A guess more than segmentStepsMax segments off (entries of
// very different sizes) halves what is left.
func (x *segmentIndex) search(seq uint64) int {
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
func (x *segmentIndex) searchRange(low, high int, seq uint64) int {
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

// build maps the chain's segments with one cursor pass over their keys.
func (x *segmentIndex) build(t *tx, id uint64) {
	var prefix [8]byte
	binary.BigEndian.PutUint64(prefix[:], id)
	c := t.segments().Cursor()
	for k, v := c.Seek(prefix[:]); len(k) >= 8 && binary.BigEndian.Uint64(k) == id; k, v = c.Next() {
		if len(k) != segmentKeySize || len(x.lasts) == SegmentIndexSegmentsMax {
			// A key of another length is damage: descents report it.
			x.lasts, x.values, x.unmappable = x.lasts[:0], x.values[:0], true
			return
		}
		x.lasts = append(x.lasts, binary.BigEndian.Uint64(k[8:]))
		x.values = append(x.values, v)
	}
	x.built = true
}
