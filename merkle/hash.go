package merkle

import (
	"crypto/sha256"
	"encoding/binary"
)

// HashSize is the size of every hash in the tree.
const HashSize = sha256.Size

// Hash is a leaf hash, a node hash or a root.
type Hash = [HashSize]byte

// The prefixes of RFC 9162 §2.1.1 that keep a leaf from posing as a node.
const (
	leafPrefix = 0x00
	nodePrefix = 0x01
)

// HashEmpty is the root of the tree of size 0: SHA-256 of nothing.
var HashEmpty = sha256.Sum256(nil)

// A tree hashes two kinds of message, a leaf of an entry hash (33 bytes,
// one block) and a node (65 bytes, two blocks), about three blocks an
// append. crypto/sha256 spends about as long again around each block
// (its buffering, padding and checks) as on the block itself, so where the
// CPU has the SHA extensions these two are padded here, in place, and
// compressed directly. Every other input goes through crypto/sha256; the
// tests check that both paths agree.

// sha256IV is SHA-256's initial state.
var sha256IV = [8]uint32{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19}

// digest returns the hash of the padded blocks.
func digest(blocks []byte) Hash {
	state := sha256IV
	compress(&state, blocks)
	var h Hash
	for i, w := range state {
		binary.BigEndian.PutUint32(h[4*i:], w)
	}
	return h
}

// HashLeaf returns SHA-256(0x00 || data).
func HashLeaf(data []byte) Hash {
	if useSHANI && len(data) == HashSize {
		var block [64]byte
		block[0] = leafPrefix
		copy(block[1:], data)
		block[1+HashSize] = 0x80
		binary.BigEndian.PutUint64(block[56:], (1+HashSize)*8)
		return digest(block[:])
	}
	var buf [1 + 64]byte // the common leaves (an entry hash, 32 bytes) stay on the stack
	return sha256.Sum256(append(append(buf[:0], leafPrefix), data...))
}

// HashChildren returns SHA-256(0x01 || left || right).
func HashChildren(left, right *Hash) Hash {
	if useSHANI {
		var blocks [128]byte
		blocks[0] = nodePrefix
		copy(blocks[1:], left[:])
		copy(blocks[1+HashSize:], right[:])
		blocks[1+2*HashSize] = 0x80
		binary.BigEndian.PutUint64(blocks[120:], (1+2*HashSize)*8)
		return digest(blocks[:])
	}
	var buf [1 + 2*HashSize]byte
	buf[0] = nodePrefix
	copy(buf[1:], left[:])
	copy(buf[1+HashSize:], right[:])
	return sha256.Sum256(buf[:])
}
