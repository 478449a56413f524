package keyindex

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"testing"
)

// TestFilterBytesMayContain checks that a filter probed where it lies as
// stored (little-endian words, at any alignment, as in a run's bucket in
// the file's map) answers as the words it was built as: every key added
// may be held, and a key not added gets the same answer from both.
func TestFilterBytesMayContain(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, count := range []uint64{1, 100, 10_000} {
		words := FilterWords(count)
		digest := func(i uint64, salt uint64) []byte {
			d := make([]byte, 16)
			binary.LittleEndian.PutUint64(d, i*0x9e3779b97f4a7c15^salt)
			binary.LittleEndian.PutUint64(d[8:], (i+salt)*0xbf58476d1ce4e5b9)
			return d
		}
		for i := range count {
			FilterAdd(words, i%7, digest(i, 0))
		}
		for offset := range 8 {
			stored := make([]byte, offset, offset+len(words)*8)
			for _, w := range words {
				stored = binary.LittleEndian.AppendUint64(stored, w)
			}
			f := stored[offset:]
			for i := range count {
				if !FilterBytesMayContain(f, i%7, digest(i, 0)) {
					t.Fatalf("count %d offset %d: key %d added, the stored filter rules it out", count, offset, i)
				}
			}
			for range 2000 {
				id, d := rng.Uint64N(7), digest(rng.Uint64(), 1)
				if got, want := FilterBytesMayContain(f, id, d), wordsMayContain(words, id, d); got != want {
					t.Fatalf("count %d offset %d: stored filter says %v, its words %v", count, offset, got, want)
				}
			}
		}
	}
}

// wordsMayContain is the probe of a filter held as words, the layout
// FilterAdd writes: the oracle of FilterBytesMayContain.
func wordsMayContain(f []uint64, chainID uint64, digest []byte) bool {
	h1, h2 := FilterHashes(chainID, digest)
	block, _ := bits.Mul64(h1, uint64(len(f)/FilterBlockWords))
	words := f[block*FilterBlockWords : (block+1)*FilterBlockWords]
	for i := range filterProbes {
		bit := (h2 >> (9 * i)) & 511
		if words[bit/64]&(1<<(bit%64)) == 0 {
			return false
		}
	}
	return true
}
