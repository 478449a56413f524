package merkle

import (
	"fmt"
	"math/bits"
)

// NodeReader reads the hash of the perfect subtree node (level, index) of
// a tree; level 0 is a leaf hash. A proof asks only for nodes inside the
// tree it proves, and only for perfect subtrees, which never change once
// complete: a store can keep them as they are made (see Range.Append).
type NodeReader interface {
	Node(level uint, index uint64) (Hash, error)
}

// InclusionProof returns the audit path of RFC 9162 §2.1.3.1 for the leaf
// at index in the tree of the given size: the hashes, from the leaf's
// sibling up, that lead from the leaf hash to the root.
func InclusionProof(index, size uint64, nodes NodeReader) ([]Hash, error) {
	if index >= size {
		return nil, fmt.Errorf("%w: index %d, size %d", ErrIndexOutOfRange, index, size)
	}
	proof := make([]Hash, 0, bits.Len64(size))
	return path(proof, index, 0, size, nodes)
}

// path appends PATH(m, D[begin, begin+n)) of RFC 9162: the deeper hashes
// first.
func path(proof []Hash, m, begin, n uint64, nodes NodeReader) ([]Hash, error) {
	if n == 1 {
		return proof, nil
	}
	k := splitPoint(n)
	var sibling Hash
	var err error
	if m < k {
		if proof, err = path(proof, m, begin, k, nodes); err != nil {
			return nil, err
		}
		sibling, err = rangeHash(begin+k, begin+n, nodes)
	} else {
		if proof, err = path(proof, m-k, begin+k, n-k, nodes); err != nil {
			return nil, err
		}
		sibling, err = rangeHash(begin, begin+k, nodes)
	}
	if err != nil {
		return nil, err
	}
	return append(proof, sibling), nil
}

// ConsistencyProof returns the proof of RFC 9162 §2.1.4.1 that the tree of
// size1 is a prefix of the tree of size2. It is empty when size1 is 0 or
// equal to size2.
func ConsistencyProof(size1, size2 uint64, nodes NodeReader) ([]Hash, error) {
	if size1 > size2 {
		return nil, fmt.Errorf("%w: %d > %d", ErrSizeOrder, size1, size2)
	}
	if size1 == 0 || size1 == size2 {
		return []Hash{}, nil
	}
	proof := make([]Hash, 0, bits.Len64(size2)+1)
	return subproof(proof, size1, 0, size2, true, nodes)
}

// subproof appends SUBPROOF(m, D[begin, begin+n), b) of RFC 9162.
func subproof(proof []Hash, m, begin, n uint64, b bool, nodes NodeReader) ([]Hash, error) {
	if m == n {
		if b {
			return proof, nil
		}
		h, err := rangeHash(begin, begin+n, nodes)
		if err != nil {
			return nil, err
		}
		return append(proof, h), nil
	}
	k := splitPoint(n)
	var sibling Hash
	var err error
	if m <= k {
		if proof, err = subproof(proof, m, begin, k, b, nodes); err != nil {
			return nil, err
		}
		sibling, err = rangeHash(begin+k, begin+n, nodes)
	} else {
		if proof, err = subproof(proof, m-k, begin+k, n-k, false, nodes); err != nil {
			return nil, err
		}
		sibling, err = rangeHash(begin, begin+k, nodes)
	}
	if err != nil {
		return nil, err
	}
	return append(proof, sibling), nil
}

// RootAt returns the root of the tree of the given size from its nodes.
func RootAt(size uint64, nodes NodeReader) (Hash, error) {
	if size == 0 {
		return HashEmpty, nil
	}
	return rangeHash(0, size, nodes)
}

// rangeHash returns MTH(D[begin, end)) for a range whose begin is a
// multiple of the largest power of two not above its length, as every
// range of the proofs' recursions is: a perfect subtree is one node, any
// other range the node hash of its split.
func rangeHash(begin, end uint64, nodes NodeReader) (Hash, error) {
	n := end - begin
	if n&(n-1) == 0 {
		level := uint(bits.TrailingZeros64(n))
		return nodes.Node(level, begin>>level)
	}
	k := splitPoint(n)
	left, err := rangeHash(begin, begin+k, nodes)
	if err != nil {
		return Hash{}, err
	}
	right, err := rangeHash(begin+k, end, nodes)
	if err != nil {
		return Hash{}, err
	}
	return HashChildren(&left, &right), nil
}

// splitPoint returns the largest power of two smaller than n, for n > 1.
func splitPoint(n uint64) uint64 {
	return 1 << (bits.Len64(n-1) - 1)
}
