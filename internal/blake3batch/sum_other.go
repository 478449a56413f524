//go:build !amd64 || purego

package blake3batch

// sum256 hashes one message at a time: this build has no lane path.
func sum256(out [][Size]byte, messages [][]byte, _ *[8]uint32, _ uint32, key *[KeySize]byte) {
	sumEach(out, messages, key)
}

// sum256Blocks hashes one message at a time: this build has no lane path.
func sum256Blocks(out [][Size]byte, blocks []byte, lengths []uint8, _ *[8]uint32, _ uint32, key *[KeySize]byte) {
	sumBlocksEach(out, blocks, lengths, key)
}

// Lanes is how many messages Sum256 hashes side by side: 1, since this
// build has no lane path.
func Lanes() int { return 1 }
