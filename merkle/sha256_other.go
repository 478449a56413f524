//go:build !amd64 || purego

package merkle

// useSHANI is false: every hash goes through crypto/sha256.
var useSHANI = false

func haveSHANI() bool { return false }

func compress(state *[8]uint32, blocks []byte) { panic("merkle: no SHA-256 compression here") }
