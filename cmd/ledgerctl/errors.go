package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ledgerworks/ledger/audit"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/checkpoint"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/merkle"
	"github.com/ledgerworks/ledger/valuations"
)

// Exit codes (docs/CLI.md). They are part of the command line's contract.
const (
	exitSuccess      = 0 // the command did what was asked
	exitVerification = 1 // verification found a broken chain or export
	exitUsage        = 2 // bad arguments, flags or input
	exitConflict     = 3 // an idempotency key is held by a different request
	exitNotFound     = 4 // the chain, entry or key does not exist
	exitStorage      = 5 // the ledger cannot be read or written: locked, corrupt, missing, I/O
)

// JSON error codes (the "code" of {"error":{…}} on stderr).
const (
	codeVerification = "VERIFICATION_FAILED"
	codeUsage        = "USAGE"
	codeInvalidInput = "INVALID_INPUT"
	codeConflict     = "IDEMPOTENCY_CONFLICT"
	codeNotFound     = "NOT_FOUND"
	codeLocked       = "LOCKED"
	codeCorrupt      = "CORRUPT"
	codeStorage      = "STORAGE"
	codeCanceled     = "CANCELED"
	// codeProofRefused: a proof or a checkpoint did not verify (a bad
	// signature, another origin, a root or size that does not match), or
	// the ledger cannot show that it extends a checkpoint.
	codeProofRefused = "PROOF_REFUSED"
	// codeTreeBehind: a chain's Merkle tree does not cover its entries;
	// opening the ledger for writing brings it up to date.
	codeTreeBehind = "TREE_BEHIND"
	// codeIncomplete: a valuation chain holds a half-written operation that
	// cannot be completed or ordered (valuations.ErrIncomplete). No retry
	// or other input fixes it; an operator has to look at the named entry.
	codeIncomplete = "INCOMPLETE_OPERATION"
)

var (
	// errVerificationFailed: verify (or import's check of its file) found
	// failures; they have been printed on stdout.
	errVerificationFailed = errors.New("verification failed")

	// errLedgerMissing: the ledger file does not exist and the command does
	// not create one.
	errLedgerMissing = errors.New("ledger does not exist")

	// errInvalidInput: an input the user gave (a file to read, a saved head,
	// an import that does not continue the ledger) is not acceptable.
	errInvalidInput = errors.New("invalid input")
)

// usageError is an argument or flag that cannot be parsed.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usageErrorf returns a usage error (exit 2).
func usageErrorf(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// invalidInputf returns an error about the user's input (exit 2). The
// format may wrap a cause with %w.
func invalidInputf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errInvalidInput}, args...)...)
}

// classify maps an error to its exit code and JSON code. The order matters:
// the most specific class wins.
func classify(err error) (exitCode int, code string) {
	var usage *usageError
	switch {
	case errors.Is(err, errVerificationFailed):
		return exitVerification, codeVerification
	case errors.Is(err, checkpoint.ErrMalformed), errors.Is(err, audit.ErrMalformed):
		return exitUsage, codeInvalidInput
	case isProofRefusal(err):
		return exitVerification, codeProofRefused
	case errors.Is(err, chain.ErrTreeBehind):
		return exitStorage, codeTreeBehind
	case errors.As(err, &usage):
		return exitUsage, codeUsage
	case errors.Is(err, valuations.ErrIncomplete):
		// Before the input classes: its cause may be an input error of
		// the entry it could not apply, which is not the caller's input.
		return exitStorage, codeIncomplete
	case errors.Is(err, chain.ErrInvalid), errors.Is(err, errInvalidInput), isDecimalError(err):
		return exitUsage, codeInvalidInput
	case errors.Is(err, chain.ErrIdempotencyConflict):
		return exitConflict, codeConflict
	case errors.Is(err, errLedgerMissing):
		return exitStorage, codeStorage
	case errors.Is(err, chain.ErrNotFound):
		return exitNotFound, codeNotFound
	case errors.Is(err, chain.ErrLocked):
		return exitStorage, codeLocked
	case errors.Is(err, chain.ErrCorrupt):
		return exitStorage, codeCorrupt
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return exitStorage, codeCanceled
	}
	return exitStorage, codeStorage
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

// errorJSON is the shape of an error on stderr with -o json.
type errorJSON struct {
	Error errorBodyJSON `json:"error"`
}

type errorBodyJSON struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// ExistingSeq names the entry that holds a conflicting idempotency key.
	ExistingSeq uint64 `json:"existing_seq,omitempty"`
}

// reportError prints err on stderr and returns its exit code.
func reportError(stderr io.Writer, asJSON bool, err error) int {
	exitCode, code := classify(err)
	message := oneLine(err.Error())
	if !asJSON {
		fmt.Fprintf(stderr, "ledgerctl: %s\n", message)
		return exitCode
	}
	body := errorBodyJSON{Code: code, Message: message}
	body.ExistingSeq = existingSeq(err)
	if writeJSON(stderr, errorJSON{Error: body}) != nil {
		fmt.Fprintf(stderr, "ledgerctl: %s\n", message)
	}
	return exitCode
}

// existingSeq returns the seq of the entry that holds a conflicting
// idempotency key (or operation id), or 0.
func existingSeq(err error) uint64 {
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

// oneLine keeps an error message on one line of stderr.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// isNotFound reports whether err says a chain, entry or key does not exist.
func isNotFound(err error) bool { return errors.Is(err, chain.ErrNotFound) }
