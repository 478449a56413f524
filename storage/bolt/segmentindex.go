package bolt

import "encoding/binary"

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
	// SegmentIndexSegmentsMax bounds the segments one map holds (56 bytes
	// each: 14 MiB, about 11,000,000 entries of 360 bytes); a longer chain
	// is read by descents. Up to readPoolSizeMax pooled transactions may
	// hold a map each.
	SegmentIndexSegmentsMax = 1 << 18
)

// segmentIndex is a read transaction's map of one chain's segments, in seq
// order.
type segmentIndex struct {
	chainID uint64
	// reads counts the entries of chainID read since the transaction
	// last read another chain's.
	reads int
	// segments is the map once built, and lasts their last seqs (a
	// search touches 8 bytes a step, in an array a twelfth the size);
	// unmappable is set when the chain has more than
	// SegmentIndexSegmentsMax segments or a segment does not decode (its
	// reads then go through descents, which report the damage where it
	// is).
	segments   []segment
	lasts      []uint64
	built      bool
	unmappable bool
}

// indexedEntry reads the entry (chain id, seq) through the transaction's
// map of the chain, building the map once the chain has been read
// segmentIndexReadsMin times. ok is false when the caller must descend
// instead: a write transaction, a chain read too seldom, or one that
// cannot be mapped.
func (t *tx) indexedEntry(id, seq uint64) (data []byte, found, ok bool, err error) {
	if t.tx.Writable() {
		return nil, false, false, nil
	}
	x := &t.segmentIndex
	if x.chainID != id {
		*x = segmentIndex{chainID: id, segments: x.segments[:0], lasts: x.lasts[:0]}
	}
	if !x.built {
		x.reads++
		if x.unmappable || x.reads < segmentIndexReadsMin {
			return nil, false, false, nil
		}
		x.build(t, id)
		if !x.built {
			return nil, false, false, nil
		}
	}
	i := x.search(seq)
	if i == len(x.segments) || seq < x.segments[i].first {
		return nil, false, true, nil
	}
	data, err = x.segments[i].seqEntry(seq)
	return data, err == nil, true, err
}

// search returns the index of the first segment whose last seq is at or
// after seq, or len(segments).
func (x *segmentIndex) search(seq uint64) int {
	low, high := 0, len(x.lasts)
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
		s, err := decodeSegment(k, v)
		if err != nil || len(x.segments) == SegmentIndexSegmentsMax ||
			(len(x.segments) > 0 && s.first <= x.segments[len(x.segments)-1].last) {
			x.segments, x.lasts, x.unmappable = x.segments[:0], x.lasts[:0], true
			return
		}
		x.segments = append(x.segments, s)
		x.lasts = append(x.lasts, s.last)
	}
	x.built = true
}
