//go:build amd64 && !purego

package merkle

// blocksSHANI runs SHA-256's compression over the n 64-byte blocks at p
// with the SHA extensions, updating state (the eight words a..h).
//
//go:noescape
func blocksSHANI(state *[8]uint32, p *byte, n int)

func cpuid(leaf, sub uint32) (a, b, c, d uint32)

// haveSHANI reports whether the CPU has the SHA extensions (and SSSE3 and
// SSE4.1, which the compression uses beside them).
func haveSHANI() bool {
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return false
	}
	_, _, c1, _ := cpuid(1, 0)
	_, b7, _, _ := cpuid(7, 0)
	const ssse3, sse41, sha = 1 << 9, 1 << 19, 1 << 29
	return c1&ssse3 != 0 && c1&sse41 != 0 && b7&sha != 0
}

// useSHANI is whether the tree's hashes take the short path; tests turn it
// off to check the other.
var useSHANI = haveSHANI()

func compress(state *[8]uint32, blocks []byte) {
	blocksSHANI(state, &blocks[0], len(blocks)/64)
}
