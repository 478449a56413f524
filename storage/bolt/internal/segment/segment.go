package segment

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
	BytesMax = (8*4096-16)/2 - 16 - KeySize
	// segmentEntriesMax bounds n, for segments of empty entries (which
	// the chain package never writes).
	EntriesMax = BytesMax / OffsetSize
	KeySize    = 16
	CountSize  = 4
	OffsetSize = 4
)

// Key is the key of the segment of the chain whose last entry is
// lastSeq. It is allocated: bbolt keeps keys until the transaction ends.
func Key(chainID, lastSeq uint64) []byte {
	k := make([]byte, KeySize)
	binary.BigEndian.PutUint64(k[:8], chainID)
	binary.BigEndian.PutUint64(k[8:], lastSeq)
	return k
}

// Segment is a decoded segment header over the stored bytes.
type Segment struct {
	Value []byte
	Count int
	First uint64 // seq of the first entry
	Last  uint64
}

// Decode checks a segment's header against its key: the count fits
// the value and the seqs, and the last offset ends the value. The offsets
// between are checked as entries are read (entry).
func Decode(key, value []byte) (Segment, error) {
	if len(key) != KeySize {
		return Segment{}, fmt.Errorf("%w: entry segment key of %d bytes", storage.ErrCorrupt, len(key))
	}
	last := binary.BigEndian.Uint64(key[8:])
	if len(value) < CountSize {
		return Segment{}, fmt.Errorf("%w: entry segment ending at seq %d: %d bytes", storage.ErrCorrupt, last, len(value))
	}
	n := binary.BigEndian.Uint32(value)
	dataStart := CountSize + OffsetSize*uint64(n)
	switch {
	case n == 0 || uint64(n) > last:
		return Segment{}, fmt.Errorf("%w: entry segment ending at seq %d: %d entries", storage.ErrCorrupt, last, n)
	case dataStart > uint64(len(value)):
		return Segment{}, fmt.Errorf("%w: entry segment ending at seq %d: %d entries in %d bytes", storage.ErrCorrupt, last, n, len(value))
	}
	s := Segment{Value: value, Count: int(n), First: last - uint64(n) + 1, Last: last}
	if end := s.end(s.Count - 1); end != uint64(len(value))-dataStart {
		return Segment{}, fmt.Errorf("%w: entry segment ending at seq %d: data ends at %d of %d bytes", storage.ErrCorrupt, last, end, uint64(len(value))-dataStart)
	}
	return s, nil
}

func (s Segment) dataStart() int { return CountSize + OffsetSize*s.Count }

// end returns the end offset of entry i in the segment's data.
func (s Segment) end(i int) uint64 {
	return uint64(binary.BigEndian.Uint32(s.Value[CountSize+OffsetSize*i:]))
}

// Entry returns the stored bytes of entry i (seq first+i).
func (s Segment) Entry(i int) ([]byte, error) {
	var start uint64
	if i > 0 {
		start = s.end(i - 1)
	}
	end := s.end(i)
	if start > end || end > uint64(len(s.Value)-s.dataStart()) {
		return nil, fmt.Errorf("%w: entry segment ending at seq %d: entry %d at bytes %d..%d", storage.ErrCorrupt, s.Last, s.First+uint64(i), start, end)
	}
	data := s.Value[s.dataStart():]
	return data[start:end:end], nil
}

// SeqEntry returns the bytes of the entry seq, which the segment holds.
func (s Segment) SeqEntry(seq uint64) ([]byte, error) {
	return s.Entry(int(seq - s.First))
}

// Builder collects a chain's next entries in a write transaction
// until they fill a segment or the transaction commits.
type Builder struct {
	ChainID uint64
	First   uint64
	ends    []uint32
	data    []byte
	// Stored is the last seq of the stored segment this one extends and
	// replaces (its entries were loaded), or zero.
	Stored uint64
}

func (b *Builder) Empty() bool  { return len(b.ends) == 0 }
func (b *Builder) Last() uint64 { return b.First + uint64(len(b.ends)) - 1 }

// size is the segment's size with one more entry of n bytes.
func (b *Builder) SizeWith(n int) int {
	return CountSize + OffsetSize*(len(b.ends)+1) + len(b.data) + n
}

// Fits reports whether an entry of n bytes goes into this segment: an
// empty one takes any entry.
func (b *Builder) Fits(n int) bool {
	return b.Empty() || (b.SizeWith(n) <= BytesMax && len(b.ends) < EntriesMax)
}

func (b *Builder) Add(seq uint64, data []byte) {
	if b.Empty() {
		b.First = seq
	}
	if seq != b.First+uint64(len(b.ends)) {
		panic(fmt.Sprintf("bolt: segment of chain %d from seq %d takes seq %d", b.ChainID, b.First, seq))
	}
	b.data = append(b.data, data...)
	b.ends = append(b.ends, uint32(len(b.data)))
}

// Load starts the builder from a stored segment, to extend it.
func (b *Builder) Load(s Segment) error {
	for i := range s.Count {
		e, err := s.Entry(i)
		if err != nil {
			return err
		}
		b.Add(s.First+uint64(i), e)
	}
	b.Stored = s.Last
	return nil
}

// Encode appends the segment's bytes to dst.
func (b *Builder) Encode(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(b.ends)))
	for _, e := range b.ends {
		dst = binary.BigEndian.AppendUint32(dst, e)
	}
	return append(dst, b.data...)
}

// Reset empties the builder for the chain's next segment.
func (b *Builder) Reset() {
	b.ends, b.data, b.Stored = b.ends[:0], b.data[:0], 0
}

// Entry returns the bytes of the builder's entry seq, which it holds.
func (b *Builder) Entry(seq uint64) []byte {
	i := int(seq - b.First)
	var start uint32
	if i > 0 {
		start = b.ends[i-1]
	}
	return b.data[start:b.ends[i]:b.ends[i]]
}
