package merkle

import (
	"fmt"
	"math/bits"
)

// VerifyInclusion checks that proof leads from the leaf hash at index to
// root in the tree of the given size (RFC 9162 §2.1.3.2).
func VerifyInclusion(index, size uint64, leaf Hash, proof []Hash, root Hash) error {
	calculated, err := RootFromInclusionProof(index, size, leaf, proof)
	if err != nil {
		return err
	}
	if calculated != root {
		return &RootMismatchError{Which: "root", Expected: root, Calculated: calculated}
	}
	return nil
}

// RootFromInclusionProof returns the root that proof leads to from the leaf
// hash at index in the tree of the given size.
func RootFromInclusionProof(index, size uint64, leaf Hash, proof []Hash) (Hash, error) {
	if index >= size {
		return Hash{}, fmt.Errorf("%w: index %d, size %d", ErrIndexOutOfRange, index, size)
	}
	if want := inclusionLength(index, size); len(proof) != want {
		return Hash{}, proofLengthError(len(proof), want)
	}
	fn, sn := index, size-1
	r := leaf
	for i := range proof {
		if fn&1 == 1 || fn == sn {
			r = HashChildren(&proof[i], &r)
			for fn&1 == 0 && fn != 0 {
				fn >>= 1
				sn >>= 1
			}
		} else {
			r = HashChildren(&r, &proof[i])
		}
		fn >>= 1
		sn >>= 1
	}
	return r, nil
}

// inclusionLength is the number of hashes in the audit path of index in a
// tree of size. Below the highest bit where index and size-1 differ, the
// leaf and the tree's last leaf lie in different subtrees, so every level
// has a sibling (inner); above it the path runs along the tree's right
// border, which has a sibling on the left exactly where index has a bit
// set (border).
func inclusionLength(index, size uint64) int {
	inner := bits.Len64(index ^ (size - 1))
	border := bits.OnesCount64(index >> uint(inner))
	return inner + border
}

// VerifyConsistency checks that proof shows the tree of size1 with root1
// to be a prefix of the tree of size2 with root2 (RFC 9162 §2.1.4.2). A
// tree of size 0 is a prefix of every tree, and a tree of its own, with an
// empty proof.
func VerifyConsistency(size1, size2 uint64, proof []Hash, root1, root2 Hash) error {
	switch {
	case size1 > size2:
		return fmt.Errorf("%w: %d > %d", ErrSizeOrder, size1, size2)
	case size1 == size2:
		if len(proof) != 0 {
			return proofLengthError(len(proof), 0)
		}
		if root1 != root2 {
			return &RootMismatchError{Which: "second root", Expected: root2, Calculated: root1}
		}
		return nil
	case size1 == 0:
		if len(proof) != 0 {
			return proofLengthError(len(proof), 0)
		}
		if root1 != HashEmpty {
			return &RootMismatchError{Which: "first root", Expected: root1, Calculated: HashEmpty}
		}
		return nil
	}
	if want := consistencyLength(size1, size2); len(proof) != want {
		return proofLengthError(len(proof), want)
	}
	fn, sn := size1-1, size2-1
	// A first tree that is a perfect subtree of the second is its own
	// first hash: the proof starts one level up.
	seed := root1
	rest := proof
	if size1&(size1-1) != 0 {
		seed, rest = proof[0], proof[1:]
	}
	for fn&1 == 1 {
		fn >>= 1
		sn >>= 1
	}
	fr, sr := seed, seed
	for i := range rest {
		c := &rest[i]
		if fn&1 == 1 || fn == sn {
			fr = HashChildren(c, &fr)
			sr = HashChildren(c, &sr)
			for fn&1 == 0 && fn != 0 {
				fn >>= 1
				sn >>= 1
			}
		} else {
			sr = HashChildren(&sr, c)
		}
		fn >>= 1
		sn >>= 1
	}
	if fr != root1 {
		return &RootMismatchError{Which: "first root", Expected: root1, Calculated: fr}
	}
	if sr != root2 {
		return &RootMismatchError{Which: "second root", Expected: root2, Calculated: sr}
	}
	return nil
}

// consistencyLength is the number of hashes in the consistency proof from
// size1 to size2, for 0 < size1 < size2.
func consistencyLength(size1, size2 uint64) int {
	level := bits.TrailingZeros64(size1)
	index := (size1 - 1) >> uint(level)
	n := inclusionLength(index, (size2-1)>>uint(level)+1)
	if size1&(size1-1) != 0 { // not a perfect subtree: the seed is in the proof
		n++
	}
	return n
}
