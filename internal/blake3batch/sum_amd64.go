//go:build amd64 && !purego

package blake3batch

import (
	"encoding/binary"
	"sync"
	"unsafe"

	"github.com/zeebo/blake3"
	"golang.org/x/sys/cpu"
)

// laneWidth is how many messages one compression carries: 16 with
// AVX-512, 8 with AVX2, 0 for none (one message at a time). Tests lower it
// to exercise every path on the same machine.
var laneWidth = detectLaneWidth()

func detectLaneWidth() int {
	switch {
	case cpu.X86.HasAVX512F:
		return 16
	case cpu.X86.HasAVX2:
		return 8
	}
	return 0
}

const (
	// lanesMax is the widest compression, AVX-512's.
	lanesMax = 16
	// laneMessagesMin is the smallest group worth the lane path: a single
	// message is no faster in a lane than alone.
	laneMessagesMin = 2
)

// compress16AVX512 compresses the block at offset bytes past blocks[i]
// into the chaining value in of lane i for sixteen lanes at once, at
// counter zero, with each lane's block length and flags, and writes the
// output (the new chaining value, or the hash on a ROOT block) to cv; in
// may be cv. Both are word-major: cv[w][i] is word w of lane i. A first
// block reads the key rows themselves, so no group copies them into cv
// first (512 bytes per compression of one-block messages); the blocks
// every lane of a group fills are the same offset past each message's
// start, so the lanes need not be pointed at each of them.
//
//go:noescape
func compress16AVX512(cv, in *[8][lanesMax]uint32, blocks *[lanesMax]*[blockSize]byte, offset uintptr, blockLen *[lanesMax]uint32, flags *[lanesMax]uint32)

// compress8AVX2 is compress16AVX512 for lanes 0 to 7 only.
//
//go:noescape
func compress8AVX2(cv, in *[8][lanesMax]uint32, blocks *[lanesMax]*[blockSize]byte, offset uintptr, blockLen *[lanesMax]uint32, flags *[lanesMax]uint32)

// transpose16AVX2 sets rows[i][w] to columns[w][i]: one lane's chaining
// value per row, the hash's bytes on a little-endian machine.
//
//go:noescape
func transpose16AVX2(rows *[lanesMax][8]uint32, columns *[8][lanesMax]uint32)

// zeroChunk holds what a lane without a message compresses, at any offset
// of a chunk's blocks; its output is never read.
var zeroChunk [ChunkSize]byte

// zeroBlock is zeroChunk's first block.
var zeroBlock = (*[blockSize]byte)(zeroChunk[:blockSize])

// laneState is the working memory of one group of up to lanesMax messages.
type laneState struct {
	width    int                  // lanes in use: 8 or 16
	keyRows  *[8][lanesMax]uint32 // every lane's first chaining value: ivRows, or keyedRows
	keyed    [8][lanesMax]uint32  // a keyed hash's key, word-major
	cv       [8][lanesMax]uint32
	hashes   [lanesMax][8]uint32 // cv lane-major, once a lane has ended
	blocks   [lanesMax]*[blockSize]byte
	blockLen [lanesMax]uint32
	flags    [lanesMax]uint32

	messages  [lanesMax][]byte
	base      [lanesMax]*[blockSize]byte // where each message begins; zeroChunk for a lane without one
	outs      [lanesMax]*[Size]byte
	last      [lanesMax]int // index of the lane's last block; -1 for no message
	lastBlock [lanesMax]*[blockSize]byte
	lastLen   [lanesMax]uint32
	tail      [lanesMax][blockSize]byte // zero-padded last blocks
}

// ivRows is the IV in every lane: the first chaining value of unkeyed
// hashing.
var ivRows = rows(&iv)

// rows returns words in every lane, word-major.
func rows(words *[8]uint32) [8][lanesMax]uint32 {
	var r [8][lanesMax]uint32
	for w := range r {
		for i := range lanesMax {
			r[w][i] = words[w]
		}
	}
	return r
}

// laneStates recycles laneState: its blocks point into itself (the padded
// tails), so it cannot live on the stack.
var laneStates = sync.Pool{New: func() any { return new(laneState) }}

// release returns s to laneStates without references to the caller's
// messages and outputs, and without copies of its key or message bytes.
func (s *laneState) release() {
	s.blocks, s.lastBlock = [lanesMax]*[blockSize]byte{}, [lanesMax]*[blockSize]byte{}
	s.messages, s.outs, s.base = [lanesMax][]byte{}, [lanesMax]*[Size]byte{}, [lanesMax]*[blockSize]byte{}
	s.keyRows, s.keyed, s.tail = nil, [8][lanesMax]uint32{}, [lanesMax][blockSize]byte{}
	laneStates.Put(s)
}

func sum256(out [][Size]byte, messages [][]byte, key *[8]uint32, flags uint32, keyBytes *[KeySize]byte) {
	if laneWidth == 0 {
		sumEach(out, messages, keyBytes)
		return
	}
	state := laneStates.Get().(*laneState)
	defer state.release()
	state.width = laneWidth
	state.keyRows = &ivRows
	if flags&flagKeyedHash != 0 {
		state.keyed = rows(key)
		state.keyRows = &state.keyed
	}
	var (
		keyed *blake3.Hasher
		n     int
	)
	for i, m := range messages {
		if len(m) > ChunkSize {
			keyed = sumOne(&out[i], m, keyBytes, keyed)
			continue
		}
		state.messages[n], state.outs[n] = m, &out[i]
		n++
		if n == state.width {
			state.hash(n, flags)
			n = 0
		}
	}
	if n >= laneMessagesMin {
		if n <= 8 {
			// AVX-512 implies AVX2: a short tail takes the narrower,
			// cheaper compression.
			state.width = 8
		}
		state.hash(n, flags)
		return
	}
	for i := range n {
		keyed = sumOne(state.outs[i], state.messages[i], keyBytes, keyed)
	}
}

// sum256Blocks is Sum256Blocks: each group of up to laneWidth messages is
// one compression, every lane pointed at its block where it lies (the
// caller zero-padded it), with the flags of a chunk's only block.
func sum256Blocks(out [][Size]byte, blocks []byte, lengths []uint8, key *[8]uint32, flags uint32, keyBytes *[KeySize]byte) {
	if laneWidth == 0 || len(lengths) < laneMessagesMin {
		sumBlocksEach(out, blocks, lengths, keyBytes)
		return
	}
	state := laneStates.Get().(*laneState)
	defer state.release()
	state.keyRows = &ivRows
	if flags&flagKeyedHash != 0 {
		state.keyed = rows(key)
		state.keyRows = &state.keyed
	}
	flags |= flagChunkStart | flagChunkEnd | flagRoot
	for first := 0; first < len(lengths); first += laneWidth {
		n := min(laneWidth, len(lengths)-first)
		if n < laneMessagesMin {
			sumBlocksEach(out[first:], blocks[first*BlockSize:], lengths[first:], keyBytes)
			return
		}
		state.hashBlocks(out[first:first+n], blocks[first*BlockSize:], lengths[first:first+n], flags)
	}
}

// hashBlocks hashes len(lengths) one-block messages, at most laneWidth,
// in one compression: the narrower one when they fit in 8 lanes.
func (s *laneState) hashBlocks(out [][Size]byte, blocks []byte, lengths []uint8, flags uint32) {
	n := len(lengths)
	// Sum256Blocks checked that blocks holds a block for every length:
	// pointing the lanes needs no bounds check per lane.
	base := unsafe.Pointer(unsafe.SliceData(blocks))
	for i, length := range lengths {
		s.blocks[i] = (*[blockSize]byte)(unsafe.Add(base, i*blockSize))
		s.blockLen[i], s.flags[i] = uint32(length), flags
	}
	width := laneWidth
	if n <= 8 {
		width = 8 // AVX-512 implies AVX2
	}
	for i := n; i < width; i++ {
		s.blocks[i], s.blockLen[i], s.flags[i] = zeroBlock, 0, 0
	}
	if width == lanesMax {
		compress16AVX512(&s.cv, s.keyRows, &s.blocks, 0, &s.blockLen, &s.flags)
	} else {
		compress8AVX2(&s.cv, s.keyRows, &s.blocks, 0, &s.blockLen, &s.flags)
	}
	transpose16AVX2(&s.hashes, &s.cv)
	for i := range out {
		putHash(&out[i], &s.hashes[i])
	}
}

// hash hashes s.messages[:n] into s.outs[:n], each a single chunk, n at
// most s.width. The blocks below every lane's last are full blocks of
// every message, with one length and one set of flags, each the same
// offset past its message's start: the compression takes the messages'
// starts and the offset (entries of a chain are of similar lengths, so
// that is most blocks). Lanes without a message compress zero blocks.
func (s *laneState) hash(n int, flags uint32) {
	blocksMax, fullBlocks := 0, ChunkSize/blockSize // fullBlocks: the blocks below every lane's last
	for i := range n {
		s.prepareLast(i)
		blocksMax = max(blocksMax, s.last[i]+1)
		fullBlocks = min(fullBlocks, s.last[i])
	}
	for i := n; i < s.width; i++ {
		s.last[i] = -1
		s.base[i] = zeroBlock
		s.blocks[i], s.blockLen[i], s.flags[i] = zeroBlock, 0, 0
	}
	in := s.keyRows // the chaining value the next block starts from
	for b := range blocksMax {
		start := uint32(0)
		if b == 0 {
			start = flagChunkStart
		}
		if b < fullBlocks {
			if b <= 1 { // the flags change after the first block only
				for i := range n {
					s.blockLen[i], s.flags[i] = blockSize, flags|start
				}
			}
			// Every lane's block b, zeroChunk's for a lane without a
			// message: b is below 16, zeroChunk's blocks.
			if s.width == lanesMax {
				compress16AVX512(&s.cv, in, &s.base, uintptr(b*blockSize), &s.blockLen, &s.flags)
			} else {
				compress8AVX2(&s.cv, in, &s.base, uintptr(b*blockSize), &s.blockLen, &s.flags)
			}
			in = &s.cv
			continue
		}
		ended := false
		for i := range n {
			switch last := s.last[i]; {
			case b < last:
				s.blocks[i], s.blockLen[i], s.flags[i] = (*[blockSize]byte)(unsafe.Add(unsafe.Pointer(s.base[i]), b*blockSize)), blockSize, flags|start
			case b == last:
				s.blocks[i], s.blockLen[i], s.flags[i] = s.lastBlock[i], s.lastLen[i], flags|start|flagChunkEnd|flagRoot
				ended = true
			default: // the lane's message has ended
				s.blocks[i], s.blockLen[i], s.flags[i] = zeroBlock, 0, 0
			}
		}
		if s.width == lanesMax {
			compress16AVX512(&s.cv, in, &s.blocks, 0, &s.blockLen, &s.flags)
		} else {
			compress8AVX2(&s.cv, in, &s.blocks, 0, &s.blockLen, &s.flags)
		}
		in = &s.cv
		if !ended {
			continue
		}
		transpose16AVX2(&s.hashes, &s.cv)
		for i := range n {
			if s.last[i] == b {
				putHash(s.outs[i], &s.hashes[i])
			}
		}
	}
}

// putHash sets out to a hash: its words in little-endian order, which is
// how amd64 stores them, written as four 8-byte words. Go compiles the
// assignment of the 32-byte array these words are to an output it cannot
// prove disjoint as a call to memmove: 22 instructions more per hash, of
// the 3,295 per entry of a whole verify under callgrind.
func putHash(out *[Size]byte, words *[8]uint32) {
	binary.LittleEndian.PutUint64(out[0:], uint64(words[0])|uint64(words[1])<<32)
	binary.LittleEndian.PutUint64(out[8:], uint64(words[2])|uint64(words[3])<<32)
	binary.LittleEndian.PutUint64(out[16:], uint64(words[4])|uint64(words[5])<<32)
	binary.LittleEndian.PutUint64(out[24:], uint64(words[6])|uint64(words[7])<<32)
}

// prepareLast sets the index, length and address of lane i's last block:
// the message itself when the block is full, a zero-padded copy otherwise.
// An empty message is one empty block.
func (s *laneState) prepareLast(i int) {
	m := s.messages[i]
	s.base[i] = (*[blockSize]byte)(unsafe.Pointer(unsafe.SliceData(m)))
	last := 0
	if len(m) > 0 {
		last = (len(m) - 1) / blockSize
	}
	rest := m[last*blockSize:]
	s.last[i], s.lastLen[i] = last, uint32(len(rest))
	if len(rest) == blockSize {
		s.lastBlock[i] = (*[blockSize]byte)(rest)
		return
	}
	s.tail[i] = [blockSize]byte{}
	copy(s.tail[i][:], rest)
	s.lastBlock[i] = &s.tail[i]
}

// Lanes is how many messages Sum256 hashes side by side: 16 with AVX-512,
// 8 with AVX2, 1 without the lane path.
func Lanes() int { return max(laneWidth, 1) }
