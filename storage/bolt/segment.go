package bolt

import (
	"encoding/binary"
	"fmt"

	"github.com/ledgerworks/ledger/storage"
)

// An entry segment is one value of the entry_segments bucket: a run of a
// chain's consecutive entries, stored under the chain's id and the seq of
// its last entry, so that a Seek to (chain id, seq) lands on the segment
// that holds seq. Its bytes are
//
//	u32be n | n × u32be end offset of each entry in data | data
//
// and its entries hold the seqs last-n+1 .. last. A chain's segments are
// filled to SegmentBytesMax before the next one starts, so the B-tree holds
// one key per segment instead of one per entry: a checkpoint makes a Put
// per segment, and a scan one cursor step.
const (
	// SegmentBytesMax is the size a segment is sealed at: an entry that
	// would take it past this size starts the next segment, and an entry
	// larger than it has a segment of its own. bbolt puts at least two
	// values on a leaf page, so two full segments, with their keys and
	// element headers, fill eight 4 KiB pages to the byte.
	SegmentBytesMax = (8*4096-16)/2 - 16 - segmentKeySize
	// segmentEntriesMax bounds n, for segments of empty entries (which
	// the chain package never writes).
	segmentEntriesMax = SegmentBytesMax / segmentOffsetSize
	segmentKeySize    = 16
	segmentCountSize  = 4
	segmentOffsetSize = 4
)

// segmentKey is the key of the segment of the chain whose last entry is
// lastSeq. It is allocated: bbolt keeps keys until the transaction ends.
func segmentKey(chainID, lastSeq uint64) []byte {
	k := make([]byte, segmentKeySize)
	binary.BigEndian.PutUint64(k[:8], chainID)
	binary.BigEndian.PutUint64(k[8:], lastSeq)
	return k
}

// segment is a decoded segment header over the stored bytes.
type segment struct {
	value []byte
	count int
	first uint64 // seq of the first entry
	last  uint64
}

// decodeSegment checks a segment's header against its key: the count fits
// the value and the seqs, and the last offset ends the value. The offsets
// between are checked as entries are read (entry).
func decodeSegment(key, value []byte) (segment, error) {
	if len(key) != segmentKeySize {
		return segment{}, fmt.Errorf("%w: entry segment key of %d bytes", storage.ErrCorrupt, len(key))
	}
	last := binary.BigEndian.Uint64(key[8:])
	if len(value) < segmentCountSize {
		return segment{}, fmt.Errorf("%w: entry segment ending at seq %d: %d bytes", storage.ErrCorrupt, last, len(value))
	}
	n := binary.BigEndian.Uint32(value)
	dataStart := segmentCountSize + segmentOffsetSize*uint64(n)
	switch {
	case n == 0 || uint64(n) > last:
		return segment{}, fmt.Errorf("%w: entry segment ending at seq %d: %d entries", storage.ErrCorrupt, last, n)
	case dataStart > uint64(len(value)):
		return segment{}, fmt.Errorf("%w: entry segment ending at seq %d: %d entries in %d bytes", storage.ErrCorrupt, last, n, len(value))
	}
	s := segment{value: value, count: int(n), first: last - uint64(n) + 1, last: last}
	if end := s.end(s.count - 1); end != uint64(len(value))-dataStart {
		return segment{}, fmt.Errorf("%w: entry segment ending at seq %d: data ends at %d of %d bytes", storage.ErrCorrupt, last, end, uint64(len(value))-dataStart)
	}
	return s, nil
}

func (s segment) dataStart() int { return segmentCountSize + segmentOffsetSize*s.count }

// end returns the end offset of entry i in the segment's data.
func (s segment) end(i int) uint64 {
	return uint64(binary.BigEndian.Uint32(s.value[segmentCountSize+segmentOffsetSize*i:]))
}

// entry returns the stored bytes of entry i (seq first+i).
func (s segment) entry(i int) ([]byte, error) {
	var start uint64
	if i > 0 {
		start = s.end(i - 1)
	}
	end := s.end(i)
	if start > end || end > uint64(len(s.value)-s.dataStart()) {
		return nil, fmt.Errorf("%w: entry segment ending at seq %d: entry %d at bytes %d..%d", storage.ErrCorrupt, s.last, s.first+uint64(i), start, end)
	}
	data := s.value[s.dataStart():]
	return data[start:end:end], nil
}

// seqEntry returns the bytes of the entry seq, which the segment holds.
func (s segment) seqEntry(seq uint64) ([]byte, error) {
	return s.entry(int(seq - s.first))
}

// segmentBuilder collects a chain's next entries in a write transaction
// until they fill a segment or the transaction commits.
type segmentBuilder struct {
	chainID uint64
	first   uint64
	ends    []uint32
	data    []byte
	// stored is the last seq of the stored segment this one extends and
	// replaces (its entries were loaded), or zero.
	stored uint64
}

func (b *segmentBuilder) empty() bool  { return len(b.ends) == 0 }
func (b *segmentBuilder) last() uint64 { return b.first + uint64(len(b.ends)) - 1 }

// size is the segment's size with one more entry of n bytes.
func (b *segmentBuilder) sizeWith(n int) int {
	return segmentCountSize + segmentOffsetSize*(len(b.ends)+1) + len(b.data) + n
}

// fits reports whether an entry of n bytes goes into this segment: an
// empty one takes any entry.
func (b *segmentBuilder) fits(n int) bool {
	return b.empty() || (b.sizeWith(n) <= SegmentBytesMax && len(b.ends) < segmentEntriesMax)
}

func (b *segmentBuilder) add(seq uint64, data []byte) {
	if b.empty() {
		b.first = seq
	}
	if seq != b.first+uint64(len(b.ends)) {
		panic(fmt.Sprintf("bolt: segment of chain %d from seq %d takes seq %d", b.chainID, b.first, seq))
	}
	b.data = append(b.data, data...)
	b.ends = append(b.ends, uint32(len(b.data)))
}

// load starts the builder from a stored segment, to extend it.
func (b *segmentBuilder) load(s segment) error {
	for i := range s.count {
		e, err := s.entry(i)
		if err != nil {
			return err
		}
		b.add(s.first+uint64(i), e)
	}
	b.stored = s.last
	return nil
}

// encode appends the segment's bytes to dst.
func (b *segmentBuilder) encode(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(b.ends)))
	for _, e := range b.ends {
		dst = binary.BigEndian.AppendUint32(dst, e)
	}
	return append(dst, b.data...)
}

// reset empties the builder for the chain's next segment.
func (b *segmentBuilder) reset() {
	b.ends, b.data, b.stored = b.ends[:0], b.data[:0], 0
}

// entry returns the bytes of the builder's entry seq, which it holds.
func (b *segmentBuilder) entry(seq uint64) []byte {
	i := int(seq - b.first)
	var start uint32
	if i > 0 {
		start = b.ends[i-1]
	}
	return b.data[start:b.ends[i]:b.ends[i]]
}
