package chain

import (
	"errors"
	"fmt"

	"github.com/ledgerworks/ledger/storage"
)

var (
	// ErrInvalid is matched by every error about a request the engine refuses
	// to store (see InvalidError). Nothing was written.
	ErrInvalid = errors.New("invalid request")

	// ErrInvalidChain: the chain id is empty, too long, not UTF-8 or holds a
	// control character, or (a new request's) breaks a rule for new names
	// (ErrUnsafeName).
	ErrInvalidChain = errors.New("invalid chain id")

	// ErrInvalidKey: the idempotency key is too long, not UTF-8 or holds a
	// control character, or (a new request's) a format character
	// (ErrUnsafeName).
	ErrInvalidKey = errors.New("invalid idempotency key")

	// ErrInvalidType: the payload type is empty, too long, not UTF-8 or holds
	// a control character, or (a new request's) a format character
	// (ErrUnsafeName).
	ErrInvalidType = errors.New("invalid payload type")

	// ErrUnsafeName: a new request's chain id, idempotency key or type is
	// text a ledger can hold but breaks a rule for new names (naming.go):
	// a chain id with an empty, "." or ".." component or a leading "/", or
	// a Unicode format character (category Cf, bidi controls such as
	// U+202E included) in any of the three. It comes with ErrInvalidChain,
	// ErrInvalidKey or ErrInvalidType. Entries already stored with such
	// names still read, verify, export and import.
	ErrUnsafeName = errors.New("name refused for new entries")

	// ErrPayloadTooLarge: the payload is larger than Options.PayloadSizeMax.
	ErrPayloadTooLarge = errors.New("payload too large")

	// ErrIdempotencyConflict: the chain already holds an entry with this
	// idempotency key and a different type or payload. The error is a
	// *ConflictError that names the existing entry. Nothing was written.
	ErrIdempotencyConflict = errors.New("idempotency conflict")

	// ErrNonCanonicalLine: an export line is valid JSON holding exactly the
	// Format v1 fields, but not in their one canonical spelling (a tool
	// parsed and re-serialised it). It comes with ErrCorrupt: the line is
	// refused.
	ErrNonCanonicalLine = errors.New("export line not in canonical form")

	// ErrNotFound: the chain, entry or key does not exist.
	ErrNotFound = errors.New("not found")

	// ErrCorrupt: stored bytes cannot be decoded, or the store itself is
	// damaged. Verify reports such entries as failures instead.
	ErrCorrupt = errors.New("corrupt ledger")

	// ErrClosed: the DB has been closed.
	ErrClosed = errors.New("ledger closed")

	// ErrLocked: another process holds the ledger file and the lock timeout
	// has passed. It is the storage layer's error, re-exported.
	ErrLocked = storage.ErrLocked

	// ErrReadOnly: a write was attempted on a DB opened read-only or inside
	// View.
	ErrReadOnly = errors.New("ledger opened read-only")

	// ErrVerification: Verify found at least one broken chain; the error is
	// a *VerificationError that lists the failures.
	ErrVerification = errors.New("verification failed")

	// ErrExecUnsupported: Tx.Exec on a backend that runs no SQL of the
	// caller's (the embedded default).
	ErrExecUnsupported = errors.New("the ledger's backend runs no SQL statement in a transaction")
)

// InvalidError says which field of a request was refused and why.
type InvalidError struct {
	Field  string // "chain", "idempotency_key", "type" or "payload"
	Reason string
	Err    error // one of the ErrInvalid… sentinels or ErrPayloadTooLarge
	Rule   error // ErrUnsafeName when a rule for new names refused it, else nil
}

func (e *InvalidError) Error() string {
	if e.Rule != nil {
		return fmt.Sprintf("%v: %s (%v)", e.Err, e.Reason, e.Rule)
	}
	return fmt.Sprintf("%v: %s", e.Err, e.Reason)
}

// Unwrap lets errors.Is match the specific sentinel, ErrInvalid and the
// rule, if any.
func (e *InvalidError) Unwrap() []error {
	if e.Rule != nil {
		return []error{e.Err, ErrInvalid, e.Rule}
	}
	return []error{e.Err, ErrInvalid}
}

// ConflictError is returned when an idempotency key is reused with a
// different request.
type ConflictError struct {
	Chain          string
	IdempotencyKey string
	ExistingSeq    uint64
	// Expected is the fingerprint of the stored entry, Calculated that of
	// the refused request.
	Expected, Calculated Hash
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("idempotency conflict: chain %q key %q is held by seq %d with a different request",
		e.Chain, e.IdempotencyKey, e.ExistingSeq)
}

// Is makes errors.Is(err, ErrIdempotencyConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrIdempotencyConflict }

// DecodeError is returned for stored or exported bytes that are not a valid
// entry.
type DecodeError struct {
	Chain  string
	Seq    uint64
	Reason string
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("undecodable entry %q seq %d: %s", e.Chain, e.Seq, e.Reason)
}

// Unwrap makes errors.Is(err, ErrCorrupt) true.
func (e *DecodeError) Unwrap() error { return ErrCorrupt }

// VerificationError lists what Verify found.
type VerificationError struct {
	Failures []Failure
}

func (e *VerificationError) Error() string {
	if len(e.Failures) == 0 {
		return ErrVerification.Error()
	}
	f := e.Failures[0]
	return fmt.Sprintf("%v: %d failure(s), first: chain %q seq %d: %s", ErrVerification, len(e.Failures), f.Chain, f.Seq, f.Reason)
}

// Unwrap makes errors.Is(err, ErrVerification) true.
func (e *VerificationError) Unwrap() error { return ErrVerification }

// storageError translates the storage layer's sentinels into the chain's.
func storageError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, storage.ErrNotFound):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case errors.Is(err, storage.ErrCorrupt):
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	case errors.Is(err, storage.ErrClosed):
		return fmt.Errorf("%w: %w", ErrClosed, err)
	case errors.Is(err, storage.ErrReadOnly):
		return fmt.Errorf("%w: %w", ErrReadOnly, err)
	}
	return err
}

// ErrTreeBehind: a chain's Merkle tree holds fewer entries than the chain
// (it was written with Options.NoTrees, or by a version without trees);
// opening the ledger for writing brings it up to date.
var ErrTreeBehind = errors.New("chain tree behind its entries")
