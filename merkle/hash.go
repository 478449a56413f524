package merkle

import "crypto/sha256"

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

// HashLeaf returns SHA-256(0x00 || data).
func HashLeaf(data []byte) Hash {
	var buf [1 + 64]byte // the common leaves (an entry hash, 32 bytes) stay on the stack
	return sha256.Sum256(append(append(buf[:0], leafPrefix), data...))
}

// HashChildren returns SHA-256(0x01 || left || right).
func HashChildren(left, right *Hash) Hash {
	var buf [1 + 2*HashSize]byte
	buf[0] = nodePrefix
	copy(buf[1:], left[:])
	copy(buf[1+HashSize:], right[:])
	return sha256.Sum256(buf[:])
}
