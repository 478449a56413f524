//go:build amd64 && !purego

package blake3batch

import "unsafe"

// elements16AVX512 hashes sixteen multiset elements in keyed mode under
// key (word-major, as keyRows): lane i's message words 0 to 3 are
// digest[w][i] and words 4 and 5 seq[w][i], 24 bytes zero-padded. Each
// hash's eight words are added, zero-extended, to acc[w][i] for the lanes
// whose bit is set in lanes. See gen.go.
//
//go:noescape
func elements16AVX512(acc *[8][lanesMax]uint64, key *[8][lanesMax]uint32, digest *[4][lanesMax]uint32, seq *[2][lanesMax]uint32, lanes uint64)

// elementLanes is the working memory of Elements' lane paths: the digest
// compression of AddKeyDigests, whose chaining values are the digests'
// words in the rows the element compression reads.
type elementLanes struct {
	keyRows  [8][lanesMax]uint32 // the key in every lane, word-major
	cv       [8][lanesMax]uint32
	seqs     [2][lanesMax]uint32
	blocks   [lanesMax]*[blockSize]byte
	blockLen [lanesMax]uint32
	flags    [lanesMax]uint32
}

// The lanes carry elementGroup elements.
const _ = uint(lanesMax-elementGroup) + uint(elementGroup-lanesMax)

func (l *elementLanes) setKey(key *[KeySize]byte) {
	words := keyWords(key)
	l.keyRows = rows(&words)
}

// wide reports whether the elements go through the lanes: only sixteen
// lanes are worth it, eight (AVX2) take the whole-message path.
func (l *elementLanes) wide() bool { return laneWidth == lanesMax }

// elements hashes e's first n pending elements in the lanes.
func (l *elementLanes) elements(e *Elements, n int) {
	elements16AVX512(&e.acc, &l.keyRows, &e.digests, &e.seqs, 1<<n-1)
}

// keyDigests adds the elements of up to sixteen digest messages (see
// AddKeyDigests). blocks holds a block per length, as AddKeyDigests
// checked.
func (l *elementLanes) keyDigests(e *Elements, blocks []byte, lengths []uint8, seqs []uint64) {
	n := len(lengths)
	base := unsafe.Pointer(unsafe.SliceData(blocks))
	for i, length := range lengths {
		l.blocks[i] = (*[blockSize]byte)(unsafe.Add(base, i*blockSize))
		l.blockLen[i], l.flags[i] = uint32(length), flagChunkStart|flagChunkEnd|flagRoot
		l.seqs[0][i], l.seqs[1][i] = seqWords(seqs[i])
	}
	for i := n; i < lanesMax; i++ {
		l.blocks[i], l.blockLen[i], l.flags[i] = zeroBlock, 0, 0
	}
	compress16AVX512(&l.cv, &ivRows, &l.blocks, 0, &l.blockLen, &l.flags)
	e.count += uint64(n)
	if e.added >= elementFoldAfter {
		e.fold()
	}
	e.added++
	elements16AVX512(&e.acc, &l.keyRows, (*[4][lanesMax]uint32)(l.cv[:4]), &l.seqs, 1<<n-1)
}
