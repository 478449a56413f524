package blake3batch

import (
	"encoding/binary"
	"math/bits"
)

const (
	// ElementDigestSize is the digest of a multiset element.
	ElementDigestSize = 16
	// ElementSize is the message of a multiset element: its digest and a
	// big-endian u64.
	ElementSize = ElementDigestSize + 8
	// elementFoldAfter is how many hashes a lane adds before the lanes'
	// sums are folded into the 256-bit sum: each adds less than 2^32 to a
	// 64-bit word, so 2^31 leave room.
	elementFoldAfter = 1 << 31
	// elementGroup is how many elements the lanes hash at once.
	elementGroup = 16
	// elementBatch is how many elements the whole-message path (without
	// AVX-512) gathers before hashing them: a call to the lanes' hashing
	// sets up its working memory (the key in every lane among it), which
	// is not worth it for a group of 16.
	elementBatch = 128
)

// Elements sums multiset elements: each element (digest, seq) maps to the
// keyed BLAKE3 hash of digest || u64be(seq) read as a 256-bit little-endian
// number, and Sum returns the sum of those numbers mod 2^256 with their
// count. It is what Sum256Blocks over the elements' messages followed by
// a 256-bit addition of each hash computes, with less around the
// compressions: with AVX-512 the messages go into the lanes as words (no
// 64-byte block written per element, no transposition), and each hash is
// added to per-lane sums of its words in the vector registers (no hash
// written out as bytes and added back one at a time). The sum of the
// hashes is the sum over w of the sums of their words w times 2^(32w),
// which Sum folds with carries once.
//
// An Elements is reused (Reset) and is not safe for concurrent use.
type Elements struct {
	key      [KeySize]byte
	keyWords [8]uint32
	// digests and seqs are the pending elements' message words 0 to 3
	// and 4 to 5, word-major, on the lane path: pending lanes of them
	// are filled.
	digests [4][elementGroup]uint32
	seqs    [2][elementGroup]uint32
	pending int
	// acc[w][lane] sums word w of the hashes of lane; added counts the
	// hashes added to a lane since the last fold into sum.
	acc   [8][elementGroup]uint64
	added uint64
	sum   [4]uint64
	count uint64
	// The whole-message path: the pending elements' blocks and lengths,
	// the hashes, and AddKeyDigests' digests (which Add may not
	// overwrite).
	blocks      [elementBatch * blockSize]byte
	lengths     [elementBatch]uint8
	hashes      [elementBatch][Size]byte
	keyDigested [elementBatch][Size]byte
	lanes       elementLanes
}

// Reset empties e and sets the key of its hashes.
func (e *Elements) Reset(key *[KeySize]byte) {
	e.key, e.keyWords = *key, keyWords(key)
	e.lanes.setKey(key)
	e.pending, e.acc, e.added, e.sum, e.count = 0, [8][elementGroup]uint64{}, 0, [4]uint64{}, 0
}

// Add adds the element (digest, seq).
func (e *Elements) Add(digest *[ElementDigestSize]byte, seq uint64) {
	i := e.pending
	if !e.lanes.wide() {
		b := (*[blockSize]byte)(e.blocks[i*blockSize:])
		*b = [blockSize]byte{}
		copy(b[:], digest[:])
		binary.BigEndian.PutUint64(b[ElementDigestSize:], seq)
		e.lengths[i] = ElementSize
		if e.pending = i + 1; e.pending == elementBatch {
			e.hashPending()
		}
		return
	}
	e.digests[0][i] = binary.LittleEndian.Uint32(digest[0:])
	e.digests[1][i] = binary.LittleEndian.Uint32(digest[4:])
	e.digests[2][i] = binary.LittleEndian.Uint32(digest[8:])
	e.digests[3][i] = binary.LittleEndian.Uint32(digest[12:])
	e.seqs[0][i], e.seqs[1][i] = seqWords(seq)
	if e.pending = i + 1; e.pending == elementGroup {
		e.hashPending()
	}
}

// seqWords are message words 4 and 5 of an element: u64be(seq) read as two
// little-endian words.
func seqWords(seq uint64) (uint32, uint32) {
	return bits.ReverseBytes32(uint32(seq >> 32)), bits.ReverseBytes32(uint32(seq))
}

// AddKeyDigests adds one element per message of blocks, laid out as
// Sum256Blocks takes them (lengths[i] bytes at blocks[i*BlockSize:], zero
// past them): the element's digest is the first ElementDigestSize bytes of
// the message's unkeyed BLAKE3 hash, and its seq is seqs[i]. With AVX-512
// the digests never leave the vector registers' word-major rows between
// the two compressions. It panics as Sum256Blocks does, or if seqs is
// shorter than lengths.
func (e *Elements) AddKeyDigests(blocks []byte, lengths []uint8, seqs []uint64) {
	n := len(lengths)
	if len(blocks) < n*BlockSize || len(seqs) < n {
		panic("blake3batch: blocks or seqs is shorter than lengths")
	}
	for _, length := range lengths {
		if length > BlockSize {
			panic("blake3batch: a message is longer than a block")
		}
	}
	if e.lanes.wide() {
		for first := 0; first < n; first += elementGroup {
			group := min(elementGroup, n-first)
			e.lanes.keyDigests(e, blocks[first*BlockSize:(first+group)*BlockSize], lengths[first:first+group], seqs[first:first+group])
		}
		return
	}
	for first := 0; first < n; first += elementBatch {
		group := min(elementBatch, n-first)
		sum256Blocks(e.keyDigested[:group], blocks[first*BlockSize:(first+group)*BlockSize], lengths[first:first+group], &iv, 0, nil)
		for i := range group {
			e.Add((*[ElementDigestSize]byte)(e.keyDigested[i][:ElementDigestSize]), seqs[first+i])
		}
	}
}

// Sum returns the sum of the elements added since Reset, mod 2^256, as
// little-endian 64-bit limbs, and their count, and empties e (its key
// stays).
func (e *Elements) Sum() (sum [4]uint64, count uint64) {
	if e.pending > 0 {
		e.hashPending()
	}
	e.fold()
	sum, count = e.sum, e.count
	e.sum, e.count = [4]uint64{}, 0
	return sum, count
}

// hashPending hashes the pending elements and adds them to the sum.
func (e *Elements) hashPending() {
	n := e.pending
	e.pending = 0
	e.count += uint64(n)
	if e.lanes.wide() {
		if e.added >= elementFoldAfter {
			e.fold()
		}
		e.added++
		e.lanes.elements(e, n)
		return
	}
	// Whole messages, hashed by Sum256Blocks (eight lanes with AVX2, one
	// at a time without), each hash added as a 256-bit number.
	sum256Blocks(e.hashes[:n], e.blocks[:n*blockSize], e.lengths[:n], &e.keyWords, flagKeyedHash, &e.key)
	AddHashes(&e.sum, e.hashes[:n])
}

// AddHashes adds each hash, read as a 256-bit little-endian number, to
// sum, mod 2^256 (sum's limbs little-endian too). The sum stays in
// registers across the hashes rather than being stored back after each.
func AddHashes(sum *[4]uint64, hashes [][Size]byte) {
	s0, s1, s2, s3 := sum[0], sum[1], sum[2], sum[3]
	for i := range hashes {
		h := &hashes[i]
		var carry uint64
		s0, carry = bits.Add64(s0, binary.LittleEndian.Uint64(h[0:]), 0)
		s1, carry = bits.Add64(s1, binary.LittleEndian.Uint64(h[8:]), carry)
		s2, carry = bits.Add64(s2, binary.LittleEndian.Uint64(h[16:]), carry)
		s3, _ = bits.Add64(s3, binary.LittleEndian.Uint64(h[24:]), carry)
	}
	*sum = [4]uint64{s0, s1, s2, s3}
}

// fold adds the lanes' sums into sum: word w's sums times 2^(32w), mod
// 2^256.
func (e *Elements) fold() {
	for w := range 8 {
		var total, high uint64
		for lane := range elementGroup {
			var carry uint64
			total, carry = bits.Add64(total, e.acc[w][lane], 0)
			high += carry
		}
		// total + high*2^64 (high is below elementGroup), shifted left by
		// 32w bits: two limbs from limb w/2 on.
		low, next := total, high
		if w%2 == 1 {
			low, next = total<<32, total>>32|high<<32
		}
		var carry uint64
		e.sum[w/2], carry = bits.Add64(e.sum[w/2], low, 0)
		for j := w/2 + 1; j < 4; j++ {
			e.sum[j], carry = bits.Add64(e.sum[j], next, carry)
			next = 0
		}
	}
	e.acc, e.added = [8][elementGroup]uint64{}, 0
}
