package audit

import (
	"encoding/hex"
	"errors"
	"fmt"
)

var (
	// ErrMalformed: a proof file that cannot be parsed, or whose fields
	// contradict each other.
	ErrMalformed = errors.New("audit: malformed proof")
	// ErrChainMissing: a chain of the old checkpoint that the proof does
	// not carry into the new one.
	ErrChainMissing = errors.New("audit: chain of the old checkpoint missing")
	// ErrOriginChanged: two checkpoints of different origins.
	ErrOriginChanged = errors.New("audit: checkpoints of different origins")
	// ErrCheckpointUnknown: a checkpoint whose tree heads the ledger did not
	// record (it was not made from this ledger, or the record is gone).
	ErrCheckpointUnknown = errors.New("audit: checkpoint unknown to this ledger")
)

// ErrEntryHashMismatch is matched by every *EntryHashMismatchError.
var ErrEntryHashMismatch = errors.New("audit: entry hash mismatch")

// EntryHashMismatchError is an entry whose fields do not hash to the hash
// it carries.
type EntryHashMismatchError struct {
	Chain      string
	Seq        uint64
	Expected   [32]byte // the hash the proof carries
	Calculated [32]byte // the hash of the entry's fields
}

func (e *EntryHashMismatchError) Error() string {
	return fmt.Sprintf("audit: entry hash mismatch: %q seq %d: expected %s, calculated %s", e.Chain, e.Seq,
		hex.EncodeToString(e.Expected[:]), hex.EncodeToString(e.Calculated[:]))
}

// Is makes errors.Is(err, ErrEntryHashMismatch) hold.
func (e *EntryHashMismatchError) Is(target error) bool { return target == ErrEntryHashMismatch }

// ErrSmallerSize is matched by every *SmallerSizeError.
var ErrSmallerSize = errors.New("audit: smaller size")

// SmallerSizeError is a newer checkpoint (or ledger) that holds less than
// an older one: fewer chains, or fewer entries of one chain.
type SmallerSizeError struct {
	Chain    string // empty for the checkpoints' number of chains
	Expected uint64 // at least this (the old size)
	Got      uint64 // the new size
}

func (e *SmallerSizeError) Error() string {
	if e.Chain == "" {
		return fmt.Sprintf("audit: new checkpoint holds %d chains, the old one %d", e.Got, e.Expected)
	}
	return fmt.Sprintf("audit: chain %q: new size %d below the old size %d", e.Chain, e.Got, e.Expected)
}

// Is makes errors.Is(err, ErrSmallerSize) hold.
func (e *SmallerSizeError) Is(target error) bool { return target == ErrSmallerSize }

// ProofError places a refusal in a proof: which part failed.
type ProofError struct {
	Part string // "entry inclusion", "chain inclusion", "old chain inclusion", "consistency", ...
	Err  error
}

func (e *ProofError) Error() string { return fmt.Sprintf("audit: %s: %v", e.Part, e.Err) }
func (e *ProofError) Unwrap() error { return e.Err }
