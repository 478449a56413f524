//go:build amd64 && !purego

package blake3batch

import (
	"sync"
	"unsafe"

	"github.com/zeebo/blake3"
	"golang.org/x/sys/cpu"
)

// useLanes enables the AVX2 lane path; tests clear it to exercise the
// one-at-a-time path on the same machine.
var useLanes = cpu.X86.HasAVX2

const (
	// lanes is how many messages one AVX2 compression carries.
	lanes = 8
	// laneMessagesMin is the smallest group worth the lane path: a single
	// message is no faster in a lane than alone.
	laneMessagesMin = 2
)

// compress8AVX2 compresses blocks[i] into the chaining value of lane i for
// all eight lanes at once, at counter zero, with each lane's block length
// and flags. cv is word-major: cv[w][i] is word w of lane i. The output
// (the new chaining value, or the hash on a ROOT block) replaces cv.
//
//go:noescape
func compress8AVX2(cv *[8][lanes]uint32, blocks *[lanes]*[blockSize]byte, blockLen *[lanes]uint32, flags *[lanes]uint32)

// transpose8AVX2 sets rows[i][w] to columns[w][i]: one lane's chaining
// value per row, the hash's bytes on a little-endian machine.
//
//go:noescape
func transpose8AVX2(rows *[lanes][8]uint32, columns *[8][lanes]uint32)

// zeroBlock is what a lane without a message compresses; its output is
// never read.
var zeroBlock [blockSize]byte

// laneState is the working memory of one group of up to eight messages.
type laneState struct {
	keyRows  [8][lanes]uint32 // the key, word-major: every lane's first chaining value
	cv       [8][lanes]uint32
	hashes   [lanes][8]uint32 // cv lane-major, once a lane has ended
	blocks   [lanes]*[blockSize]byte
	blockLen [lanes]uint32
	flags    [lanes]uint32

	messages  [lanes][]byte
	outs      [lanes]*[Size]byte
	last      [lanes]int // index of the lane's last block; -1 for no message
	lastBlock [lanes]*[blockSize]byte
	lastLen   [lanes]uint32
	tail      [lanes][blockSize]byte // zero-padded last blocks
}

// laneStates recycles laneState: its blocks point into itself (the padded
// tails), so it cannot live on the stack.
var laneStates = sync.Pool{New: func() any { return new(laneState) }}

// release returns s to laneStates without references to the caller's
// messages and outputs.
func (s *laneState) release() {
	s.blocks, s.lastBlock = [lanes]*[blockSize]byte{}, [lanes]*[blockSize]byte{}
	s.messages, s.outs = [lanes][]byte{}, [lanes]*[Size]byte{}
	laneStates.Put(s)
}

func sum256(out [][Size]byte, messages [][]byte, key *[8]uint32, flags uint32, keyBytes *[KeySize]byte) {
	if !useLanes {
		sumEach(out, messages, keyBytes)
		return
	}
	state := laneStates.Get().(*laneState)
	defer state.release()
	for w := range state.keyRows {
		for i := range lanes {
			state.keyRows[w][i] = key[w]
		}
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
		if n == lanes {
			state.hash(n, flags)
			n = 0
		}
	}
	if n >= laneMessagesMin {
		state.hash(n, flags)
		return
	}
	for i := range n {
		keyed = sumOne(state.outs[i], state.messages[i], keyBytes, keyed)
	}
}

// hash hashes s.messages[:n] into s.outs[:n], each a single chunk.
func (s *laneState) hash(n int, flags uint32) {
	s.cv = s.keyRows
	blocksMax := 0
	for i := range lanes {
		s.last[i] = -1
		if i < n {
			s.prepareLast(i)
			blocksMax = max(blocksMax, s.last[i]+1)
		}
	}
	for b := range blocksMax {
		start := uint32(0)
		if b == 0 {
			start = flagChunkStart
		}
		ended := false
		for i := range lanes {
			switch last := s.last[i]; {
			case b < last:
				s.blocks[i], s.blockLen[i], s.flags[i] = (*[blockSize]byte)(s.messages[i][b*blockSize:]), blockSize, flags|start
			case b == last:
				s.blocks[i], s.blockLen[i], s.flags[i] = s.lastBlock[i], s.lastLen[i], flags|start|flagChunkEnd|flagRoot
				ended = true
			default: // the lane's message has ended, or it has none
				s.blocks[i], s.blockLen[i], s.flags[i] = &zeroBlock, 0, 0
			}
		}
		compress8AVX2(&s.cv, &s.blocks, &s.blockLen, &s.flags)
		if !ended {
			continue
		}
		transpose8AVX2(&s.hashes, &s.cv)
		for i := range n {
			if s.last[i] == b {
				// A hash is its words in little-endian order, which is
				// how amd64 stores them.
				*s.outs[i] = *(*[Size]byte)(unsafe.Pointer(&s.hashes[i]))
			}
		}
	}
}

// prepareLast sets the index, length and address of lane i's last block:
// the message itself when the block is full, a zero-padded copy otherwise.
// An empty message is one empty block.
func (s *laneState) prepareLast(i int) {
	m := s.messages[i]
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
