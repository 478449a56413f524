//go:build amd64 && !purego

package blake3batch

import (
	"encoding/binary"
	"sync"

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

// zeroBlock is what a lane without a message compresses; its output is
// never read.
var zeroBlock [blockSize]byte

// laneState is the working memory of one group of up to eight messages.
type laneState struct {
	cv         [8][lanes]uint32
	blocks     [lanes]*[blockSize]byte
	blockLen   [lanes]uint32
	flags      [lanes]uint32
	blockCount [lanes]int
	tail       [lanes][blockSize]byte // zero-padded last blocks
	messages   [lanes][]byte
	outs       [lanes]*[Size]byte
}

func sum256(out [][Size]byte, messages [][]byte, key *[8]uint32, flags uint32, keyBytes *[KeySize]byte) {
	if !useLanes {
		sumEach(out, messages, keyBytes)
		return
	}
	state := laneStates.Get().(*laneState)
	defer state.release()
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
			state.hash(n, key, flags)
			n = 0
		}
	}
	if n >= laneMessagesMin {
		state.hash(n, key, flags)
		return
	}
	for i := range n {
		keyed = sumOne(state.outs[i], state.messages[i], keyBytes, keyed)
	}
}

// laneStates recycles laneState: its blocks point into itself (the padded
// tails), so it cannot live on the stack.
var laneStates = sync.Pool{New: func() any { return new(laneState) }}

// release returns s to laneStates without references to the caller's
// messages and outputs.
func (s *laneState) release() {
	s.blocks, s.messages, s.outs = [lanes]*[blockSize]byte{}, [lanes][]byte{}, [lanes]*[Size]byte{}
	laneStates.Put(s)
}

// hash hashes state.messages[:n] into state.outs[:n], each a single chunk.
func (s *laneState) hash(n int, key *[8]uint32, flags uint32) {
	for w := range s.cv {
		for i := range lanes {
			s.cv[w][i] = key[w]
		}
	}
	blocksMax := 0
	for i := range lanes {
		s.blockCount[i] = 0
		if i < n {
			// An empty message is still one (empty) block.
			s.blockCount[i] = max(1, (len(s.messages[i])+blockSize-1)/blockSize)
			blocksMax = max(blocksMax, s.blockCount[i])
		}
	}
	for b := range blocksMax {
		for i := range lanes {
			s.setBlock(i, b, flags)
		}
		compress8AVX2(&s.cv, &s.blocks, &s.blockLen, &s.flags)
		for i := range n {
			if b == s.blockCount[i]-1 {
				for w := range s.cv {
					binary.LittleEndian.PutUint32(s.outs[i][4*w:], s.cv[w][i])
				}
			}
		}
	}
}

// setBlock points lane i at block b of its message, with its length and
// flags; a lane whose message has ended compresses the zero block.
func (s *laneState) setBlock(i, b int, flags uint32) {
	if b >= s.blockCount[i] {
		s.blocks[i], s.blockLen[i], s.flags[i] = &zeroBlock, 0, 0
		return
	}
	rest := s.messages[i][b*blockSize:]
	if b == 0 {
		flags |= flagChunkStart
	}
	if b == s.blockCount[i]-1 {
		flags |= flagChunkEnd | flagRoot
	}
	s.flags[i] = flags
	if len(rest) >= blockSize {
		s.blocks[i], s.blockLen[i] = (*[blockSize]byte)(rest), blockSize
		return
	}
	s.tail[i] = [blockSize]byte{}
	copy(s.tail[i][:], rest)
	s.blocks[i], s.blockLen[i] = &s.tail[i], uint32(len(rest))
}
