// Package errcode names the stable code of an error of the engine or a
// domain package: the "code" of the command line's JSON errors and of the
// HTTP API's problem bodies. Both classify through Of, so an error means
// the same on either side; each maps the codes to its own exit codes or
// HTTP statuses.
package errcode

import (
	"context"
	"errors"

	"github.com/ledgerworks/ledger/audit"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/checkpoint"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/merkle"
	"github.com/ledgerworks/ledger/valuations"
)

// The codes.
const (
	Verification = "VERIFICATION_FAILED"
	Usage        = "USAGE"
	InvalidInput = "INVALID_INPUT"
	Conflict     = "IDEMPOTENCY_CONFLICT"
	NotFound     = "NOT_FOUND"
	Locked       = "LOCKED"
	Corrupt      = "CORRUPT"
	Storage      = "STORAGE"
	Canceled     = "CANCELED"
	// ProofRefused: a proof or a checkpoint did not verify (a bad
	// signature, another origin, a root or size that does not match), or
	// the ledger cannot show that it extends a checkpoint.
	ProofRefused = "PROOF_REFUSED"
	// TreeBehind: a chain's Merkle tree does not cover its entries;
	// opening the ledger for writing brings it up to date.
	TreeBehind = "TREE_BEHIND"
	// Incomplete: a valuation chain holds a half-written operation that
	// cannot be completed or ordered (valuations.ErrIncomplete). No retry
	// or other input fixes it; an operator has to look at the named entry.
	Incomplete = "INCOMPLETE_OPERATION"
)

// Local are the classes a caller adds at their place in the order: the
// command line's verification failure, usage errors, input errors and
// missing ledger. The zero value adds none.
type Local struct {
	Verification error            // → Verification, before every other class
	Usage        func(error) bool // → Usage, after the proof classes
	Input        error            // → InvalidInput, with the engine's
	Missing      error            // → Storage, before NotFound
}

// Of returns err's code. The order matters: the most specific class wins.
// An error of no class is Storage.
func Of(err error, local Local) string {
	is := func(target error) bool { return target != nil && errors.Is(err, target) }
	switch {
	case is(local.Verification):
		return Verification
	case errors.Is(err, checkpoint.ErrMalformed), errors.Is(err, audit.ErrMalformed):
		return InvalidInput
	case isProofRefusal(err):
		return ProofRefused
	case errors.Is(err, chain.ErrTreeBehind):
		return TreeBehind
	case local.Usage != nil && local.Usage(err):
		return Usage
	case errors.Is(err, valuations.ErrIncomplete):
		// Before the input classes: its cause may be an input error of
		// the entry it could not apply, which is not the caller's input.
		return Incomplete
	case errors.Is(err, chain.ErrInvalid), is(local.Input), isDecimalError(err):
		return InvalidInput
	case errors.Is(err, chain.ErrIdempotencyConflict):
		return Conflict
	case is(local.Missing):
		return Storage
	case errors.Is(err, chain.ErrNotFound):
		return NotFound
	case errors.Is(err, chain.ErrLocked):
		return Locked
	case errors.Is(err, chain.ErrCorrupt):
		return Corrupt
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return Canceled
	}
	return Storage
}

// isProofRefusal reports a proof or checkpoint that does not verify.
func isProofRefusal(err error) bool {
	var origin *checkpoint.OriginMismatchError
	if errors.As(err, &origin) {
		return true
	}
	for _, target := range []error{checkpoint.ErrSignature, merkle.ErrRootMismatch, merkle.ErrProofLength,
		merkle.ErrIndexOutOfRange, merkle.ErrSizeOrder, audit.ErrEntryHashMismatch, audit.ErrSmallerSize,
		audit.ErrChainMissing, audit.ErrOriginChanged, audit.ErrCheckpointUnknown} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// isDecimalError reports an amount or quantity that cannot be parsed or
// computed exactly (too many digits, overflow): the input's fault.
func isDecimalError(err error) bool {
	for _, target := range []error{decimal.ErrOverflow, decimal.ErrDivisionByZero, decimal.ErrScaleRange,
		decimal.ErrScaleMismatch, decimal.ErrScale, decimal.ErrSyntax, decimal.ErrTextLength} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// ExistingSeq returns the seq of the entry that holds a conflicting
// idempotency key (or operation id), or 0.
func ExistingSeq(err error) uint64 {
	var conflict *chain.ConflictError
	if errors.As(err, &conflict) {
		return conflict.ExistingSeq
	}
	var operationConflict *valuations.ConflictError
	if errors.As(err, &operationConflict) {
		return operationConflict.ExistingSeq
	}
	return 0
}
