package merkle

import (
	"crypto/sha256"
	"math/rand/v2"
	"testing"
)

// TestHashesMatchSHA256 checks both paths of HashLeaf and HashChildren
// (the direct compression where the CPU has the SHA extensions, and
// crypto/sha256) against crypto/sha256 of the prefixed message, for random
// entry hashes and nodes and for leaves of other lengths.
func TestHashesMatchSHA256(t *testing.T) {
	defer func(old bool) { useSHANI = old }(useSHANI)
	for _, fast := range []bool{false, true} {
		if fast && !haveSHANI() {
			t.Log("no SHA extensions on this CPU: only crypto/sha256's path checked")
			continue
		}
		useSHANI = fast
		rng := rand.New(rand.NewPCG(7, 8))
		for i := range 5000 {
			var l, r Hash
			for j := range l {
				l[j], r[j] = byte(rng.Uint32()), byte(rng.Uint32())
			}
			if got, want := HashLeaf(l[:]), sha256.Sum256(append([]byte{0}, l[:]...)); got != want {
				t.Fatalf("SHA extensions %v: leaf %d: %x, want %x", fast, i, got, want)
			}
			if got, want := HashChildren(&l, &r), sha256.Sum256(append(append([]byte{1}, l[:]...), r[:]...)); got != want {
				t.Fatalf("SHA extensions %v: node %d: %x, want %x", fast, i, got, want)
			}
			data := l[:rng.IntN(HashSize)]
			if got, want := HashLeaf(data), sha256.Sum256(append([]byte{0}, data...)); got != want {
				t.Fatalf("SHA extensions %v: leaf of %d bytes: %x, want %x", fast, len(data), got, want)
			}
		}
	}
}

var hashSink Hash

// BenchmarkHash is a leaf and a node, an append's hashes on average,
// through each path.
func BenchmarkHash(b *testing.B) {
	defer func(old bool) { useSHANI = old }(useSHANI)
	for _, fast := range []bool{false, true} {
		name := "crypto-sha256"
		if fast {
			name = "sha-extensions"
			if !haveSHANI() {
				continue
			}
		}
		b.Run(name, func(b *testing.B) {
			useSHANI = fast
			var l, r Hash
			for i := range b.N {
				l[0] = byte(i)
				hashSink = HashLeaf(l[:])
				hashSink = HashChildren(&l, &r)
			}
		})
	}
}
