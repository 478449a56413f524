package merkle

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
)

// Range is the compact range [0, Size) of a tree: the roots of the perfect
// subtrees its leaves make up, largest (leftmost) first, one for each bit
// set in Size. It is all a writer needs to extend the tree and to know its
// root. The zero value is the empty tree.
type Range struct {
	Size   uint64
	Hashes []Hash
}

// Visit is told of every node an Append completes, above the leaf level.
// The hash is passed by value: a pointer handed to an unknown function
// would move Append's running hash to the heap, one allocation an append.
type Visit func(level uint, index uint64, hash Hash)

// Append adds the leaf with the given leaf hash (see HashLeaf), merging
// the perfect subtrees it completes; visit, when not nil, is called with
// each node made, from the lowest level up.
func (r *Range) Append(leaf Hash, visit Visit) {
	h := leaf
	index := r.Size
	level := uint(0)
	for s := r.Size; s&1 == 1; s >>= 1 {
		last := len(r.Hashes) - 1
		h = HashChildren(&r.Hashes[last], &h)
		r.Hashes = r.Hashes[:last]
		level++
		index >>= 1
		if visit != nil {
			visit(level, index, h)
		}
	}
	r.Hashes = append(r.Hashes, h)
	r.Size++
}

// Root returns the tree's root.
func (r *Range) Root() Hash {
	if len(r.Hashes) == 0 {
		return HashEmpty
	}
	root := r.Hashes[len(r.Hashes)-1]
	for i := len(r.Hashes) - 2; i >= 0; i-- {
		root = HashChildren(&r.Hashes[i], &root)
	}
	return root
}

// Clone returns a copy that shares nothing with r.
func (r *Range) Clone() Range {
	return Range{Size: r.Size, Hashes: append([]Hash(nil), r.Hashes...)}
}

// ErrRangeEncoding is returned by DecodeRange for bytes that are not a
// Range.
var ErrRangeEncoding = errors.New("merkle: malformed compact range")

// AppendBinary appends the range's encoding: Size as 8 bytes big-endian,
// then the hashes in order.
func (r *Range) AppendBinary(b []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, r.Size)
	for i := range r.Hashes {
		b = append(b, r.Hashes[i][:]...)
	}
	return b
}

// DecodeRange decodes what AppendBinary encoded, checking that it holds
// one hash for each bit set in the size.
func DecodeRange(b []byte) (Range, error) {
	if len(b) < 8 {
		return Range{}, fmt.Errorf("%w: %d bytes", ErrRangeEncoding, len(b))
	}
	size := binary.BigEndian.Uint64(b)
	n := bits.OnesCount64(size)
	if len(b) != 8+n*HashSize {
		return Range{}, fmt.Errorf("%w: size %d needs %d hashes, have %d bytes", ErrRangeEncoding, size, n, len(b)-8)
	}
	r := Range{Size: size, Hashes: make([]Hash, n)}
	for i := range r.Hashes {
		copy(r.Hashes[i][:], b[8+i*HashSize:])
	}
	return r, nil
}
