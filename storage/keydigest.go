package storage

import "github.com/ledgerworks/ledger/internal/blake3batch"

// keyDigestBlockKeyMax is the longest key whose KeyDigest input (the
// domain and the key) fits one BLAKE3 block.
const keyDigestBlockKeyMax = blake3batch.BlockSize - len(KeyDigestDomain)

// KeyDigester computes the KeyDigests of many keys at once: when every key
// is short enough for one BLAKE3 block with the domain (up to 50 bytes, as
// nearly every idempotency key is), side by side in the lanes of
// internal/blake3batch, a few times faster than one by one; otherwise one
// by one. Its memory is kept for the next call. It is not safe for
// concurrent use.
type KeyDigester struct {
	blocks  []byte
	lengths []uint8
	hashes  [][blake3batch.Size]byte
}

// Digest sets out[i] to KeyDigest(keys[i]). It panics if out is shorter
// than keys.
func (d *KeyDigester) Digest(out [][KeyDigestSize]byte, keys []string) {
	if len(out) < len(keys) {
		panic("storage: KeyDigester.Digest: out is shorter than keys")
	}
	for _, key := range keys {
		if len(key) > keyDigestBlockKeyMax {
			for i, key := range keys {
				out[i] = KeyDigest(key)
			}
			return
		}
	}
	n := len(keys)
	d.blocks = grow(d.blocks, n*blake3batch.BlockSize)
	d.lengths = grow(d.lengths, n)
	d.hashes = grow(d.hashes, n)
	for i, key := range keys {
		block := d.blocks[i*blake3batch.BlockSize : (i+1)*blake3batch.BlockSize]
		length := copy(block, KeyDigestDomain)
		length += copy(block[length:], key)
		clear(block[length:])
		d.lengths[i] = uint8(length)
	}
	blake3batch.Sum256Blocks(d.hashes, nil, d.blocks, d.lengths)
	for i := range n {
		copy(out[i][:], d.hashes[i][:])
	}
}

// grow returns s with length n, reusing its memory when it is large enough.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
