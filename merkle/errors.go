package merkle

import (
	"encoding/hex"
	"errors"
	"fmt"
)

var (
	// ErrIndexOutOfRange: an inclusion proof of a leaf at or past the size.
	ErrIndexOutOfRange = errors.New("merkle: leaf index not below tree size")
	// ErrSizeOrder: a consistency proof from a larger tree to a smaller one.
	ErrSizeOrder = errors.New("merkle: first tree size larger than second")
	// ErrProofLength: a proof with more or fewer hashes than its sizes need.
	ErrProofLength = errors.New("merkle: wrong number of hashes in proof")
	// ErrRootMismatch is matched by every *RootMismatchError.
	ErrRootMismatch = errors.New("merkle: root mismatch")
)

// RootMismatchError is a proof that leads to another root than the one it
// is checked against.
type RootMismatchError struct {
	// Which root: "root" for an inclusion proof, "first root" or
	// "second root" for a consistency proof.
	Which      string
	Expected   Hash // the root the proof was checked against
	Calculated Hash // the root the proof leads to
}

func (e *RootMismatchError) Error() string {
	return fmt.Sprintf("merkle: %s mismatch: expected %s, calculated %s",
		e.Which, hex.EncodeToString(e.Expected[:]), hex.EncodeToString(e.Calculated[:]))
}

// Is makes errors.Is(err, ErrRootMismatch) hold.
func (e *RootMismatchError) Is(target error) bool { return target == ErrRootMismatch }

// proofLengthError is ErrProofLength with the lengths.
func proofLengthError(got, want int) error {
	return fmt.Errorf("%w: %d hashes, want %d", ErrProofLength, got, want)
}
