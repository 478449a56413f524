package blake3batch

import (
	"github.com/zeebo/blake3"
)

const (
	// ChunkSize is the longest message the lane path hashes: one BLAKE3
	// chunk. Longer messages are hashed one at a time.
	ChunkSize = 1024
	// KeySize is the length of a keyed-mode key.
	KeySize = 32
	// Size is the length of a hash.
	Size = 32
	// BlockSize is the stride of Sum256Blocks: one BLAKE3 block, the
	// longest message it hashes.
	BlockSize = blockSize
)

// BLAKE3 constants the lane path needs.
const (
	blockSize      = 64
	flagChunkStart = 1 << 0
	flagChunkEnd   = 1 << 1
	flagRoot       = 1 << 3
	flagKeyedHash  = 1 << 4
)

// iv is BLAKE3's initial chaining value, the key of unkeyed hashing.
var iv = [8]uint32{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19}

// Sum256 sets out[i] to the BLAKE3-256 hash of messages[i]. It panics if
// out is shorter than messages.
func Sum256(out [][Size]byte, messages [][]byte) {
	if len(out) < len(messages) {
		panic("blake3batch: out is shorter than messages")
	}
	sum256(out[:len(messages)], messages, &iv, 0, nil)
}

// Sum256Keyed sets out[i] to the keyed BLAKE3-256 hash of messages[i] under
// key. It panics if out is shorter than messages.
func Sum256Keyed(out [][Size]byte, key *[KeySize]byte, messages [][]byte) {
	if len(out) < len(messages) {
		panic("blake3batch: out is shorter than messages")
	}
	words := keyWords(key)
	sum256(out[:len(messages)], messages, &words, flagKeyedHash, key)
}

// Sum256Blocks sets out[i] to the BLAKE3-256 hash of the first lengths[i]
// bytes of blocks[i*BlockSize:(i+1)*BlockSize], keyed with key unless key
// is nil: many messages of one block each (digests of short keys, multiset
// elements), laid out at a fixed stride. Every byte of a block past its
// message must be zero: the lanes compress each block where it lies, with
// no zero-padded copy and no slice per message. It panics if out or
// blocks is shorter than lengths needs, or a length is over BlockSize.
func Sum256Blocks(out [][Size]byte, key *[KeySize]byte, blocks []byte, lengths []uint8) {
	n := len(lengths)
	if len(out) < n || len(blocks) < n*BlockSize {
		panic("blake3batch: out or blocks is shorter than lengths")
	}
	for _, length := range lengths {
		if length > BlockSize {
			panic("blake3batch: a message is longer than a block")
		}
	}
	if key == nil {
		sum256Blocks(out[:n], blocks[:n*BlockSize], lengths, &iv, 0, nil)
		return
	}
	words := keyWords(key)
	sum256Blocks(out[:n], blocks[:n*BlockSize], lengths, &words, flagKeyedHash, key)
}

// keyWords is a key as BLAKE3's eight little-endian words.
func keyWords(key *[KeySize]byte) [8]uint32 {
	var words [8]uint32
	for i := range words {
		words[i] = uint32(key[4*i]) | uint32(key[4*i+1])<<8 | uint32(key[4*i+2])<<16 | uint32(key[4*i+3])<<24
	}
	return words
}

// sumBlocksEach is Sum256Blocks one message at a time.
func sumBlocksEach(out [][Size]byte, blocks []byte, lengths []uint8, key *[KeySize]byte) {
	var keyed *blake3.Hasher
	for i, length := range lengths {
		keyed = sumOne(&out[i], blocks[i*BlockSize:i*BlockSize+int(length)], key, keyed)
	}
}

// sumOne hashes one message through zeebo/blake3: the path for everything
// the lanes do not cover. keyed is a reused keyed hasher (nil: unkeyed);
// it is created on first use from key and returned.
func sumOne(out *[Size]byte, message []byte, key *[KeySize]byte, keyed *blake3.Hasher) *blake3.Hasher {
	if key == nil {
		*out = blake3.Sum256(message)
		return nil
	}
	if keyed == nil {
		var err error
		if keyed, err = blake3.NewKeyed(key[:]); err != nil {
			panic(err) // the key has the right length by type
		}
	} else {
		keyed.Reset()
	}
	_, _ = keyed.Write(message) // a Hasher's Write never fails
	keyed.Sum(out[:0])
	return keyed
}

// sumEach hashes the messages one at a time.
func sumEach(out [][Size]byte, messages [][]byte, key *[KeySize]byte) {
	var keyed *blake3.Hasher
	for i, m := range messages {
		keyed = sumOne(&out[i], m, key, keyed)
	}
}
