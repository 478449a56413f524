package valuations

import (
	"errors"
	"fmt"

	"github.com/ledgerworks/ledger/chain"
)

// Input errors: each is returned inside an *Error that also matches
// chain.ErrInvalid, so a caller that only knows the engine can still tell bad
// input from an operating failure. Nothing is written when one is returned.
var (
	// ErrInvalidItem: an item definition is malformed (empty id, unknown
	// method, scale or currency out of range) or changes what may not change.
	ErrInvalidItem = errors.New("invalid item definition")

	// ErrInvalidOperation: a request is malformed: an empty or too long
	// operation id, a missing or surplus field, a transfer to its own source.
	ErrInvalidOperation = errors.New("invalid operation")

	// ErrScale: an amount does not have the scale the item declares
	// (quantity scale, currency minor unit, rate places).
	ErrScale = errors.New("wrong scale")

	// ErrZeroQuantity: a quantity is zero or negative; direction is given by
	// the operation, never by the sign.
	ErrZeroQuantity = errors.New("quantity must be positive")

	// ErrNegativeAmount: a unit cost or a receipt value is negative.
	ErrNegativeAmount = errors.New("negative cost or value")

	// ErrOverflow: a quantity, value or rate would leave the int64 range of
	// its scale. Nothing wraps; the operation is refused.
	ErrOverflow = errors.New("arithmetic overflow")

	// ErrInvalidPayload: an entry payload is not a canonical payload of this
	// package (wrong type, unknown field, non-canonical bytes).
	ErrInvalidPayload = errors.New("invalid valuation payload")
)

// Business rule violations: input errors too (they match chain.ErrInvalid),
// with their own sentinels so callers can tell them apart from malformed
// requests. Their messages name the offending amount.
var (
	// ErrInsufficientStock: an issue, transfer or reversal needs more than
	// the location holds and the item does not allow negative stock. The
	// message names the shortfall.
	ErrInsufficientStock = errors.New("insufficient stock")

	// ErrNoRate: an issue beyond the stock needs an estimate, but the
	// location has never received anything and the caller gave no rate.
	ErrNoRate = errors.New("no rate to value negative stock")

	// ErrNegativeValue: the operation would leave a positive quantity with a
	// negative value, or a FIFO layer with a negative value.
	ErrNegativeValue = errors.New("stock value would become negative")

	// ErrNoStock: a value-only adjustment needs a positive quantity: value is
	// exactly zero at quantity zero.
	ErrNoStock = errors.New("no stock to adjust")

	// ErrMethodChange: the valuation method may change only while every
	// location of the item holds quantity zero.
	ErrMethodChange = errors.New("valuation method change needs zero quantity")

	// ErrNotReversible: the operation cannot be undone by a reversal (its
	// FIFO layer was consumed, it settled or created negative stock, or it is
	// itself a reversal). A compensating operation is the way out.
	ErrNotReversible = errors.New("operation not reversible")

	// ErrAlreadyReversed: the operation has been reversed before.
	ErrAlreadyReversed = errors.New("operation already reversed")

	// ErrPendingLimit: more than PendingIssuesMax issues await settlement at
	// one location.
	ErrPendingLimit = errors.New("too many unsettled negative-stock issues")
)

// Not-found errors: they match chain.ErrNotFound.
var (
	// ErrUnknownItem: the item has no definition for this tenant.
	ErrUnknownItem = errors.New("unknown item")

	// ErrUnknownOperation: a reversal names an operation the location does
	// not hold, or a read names a seq the chain does not hold.
	ErrUnknownOperation = errors.New("unknown operation")
)

// Other sentinels.
var (
	// ErrOperationConflict: the operation id is held by a different request.
	// The error is a *ConflictError; it matches chain.ErrIdempotencyConflict.
	ErrOperationConflict = errors.New("operation id reused with a different request")

	// ErrIncomplete: a chain holds an entry this package never applied to
	// its state (a half-written operation), and it cannot be completed: two
	// different half-written operations interleave, or the entry is not a
	// valuation entry. It is an operating failure, not bad input; the error
	// names the chain and seq.
	ErrIncomplete = errors.New("unapplied valuation entry")
)

// Error is the error type of every input and not-found error of this
// package. It matches its sentinel and the engine's class (chain.ErrInvalid
// or chain.ErrNotFound) with errors.Is.
type Error struct {
	Err    error  // one of the sentinels above
	Class  error  // chain.ErrInvalid or chain.ErrNotFound
	Detail string // what was refused, with the offending value
}

func (e *Error) Error() string { return "valuations: " + e.Err.Error() + ": " + e.Detail }

// Unwrap lets errors.Is match both the sentinel and the engine's class.
func (e *Error) Unwrap() []error { return []error{e.Err, e.Class} }

// invalid returns an input error.
func invalid(sentinel error, format string, args ...any) error {
	return &Error{Err: sentinel, Class: chain.ErrInvalid, Detail: fmt.Sprintf(format, args...)}
}

// notFound returns a not-found error.
func notFound(sentinel error, format string, args ...any) error {
	return &Error{Err: sentinel, Class: chain.ErrNotFound, Detail: fmt.Sprintf(format, args...)}
}

// ConflictError says which entry holds the operation id with a different
// request.
type ConflictError struct {
	OperationID string
	Chain       string
	Key         string
	ExistingSeq uint64
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("valuations: operation %q: key %q of chain %q (seq %d) holds a different request",
		e.OperationID, e.Key, e.Chain, e.ExistingSeq)
}

// Unwrap makes errors.Is match ErrOperationConflict and
// chain.ErrIdempotencyConflict.
func (e *ConflictError) Unwrap() []error {
	return []error{ErrOperationConflict, chain.ErrIdempotencyConflict}
}

// IncompleteError names an entry that could not be brought into the state.
type IncompleteError struct {
	Chain  string
	Seq    uint64
	Reason string
	Err    error // the cause, when there is one
}

func (e *IncompleteError) Error() string {
	s := fmt.Sprintf("valuations: %v: chain %q seq %d: %s", ErrIncomplete, e.Chain, e.Seq, e.Reason)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap matches ErrIncomplete and the cause.
func (e *IncompleteError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrIncomplete}
	}
	return []error{ErrIncomplete, e.Err}
}

// codes names the sentinels for machine-readable output (ledgerctl -o json,
// test vectors).
var codes = []struct {
	code string
	err  error
}{
	{"invalid_item", ErrInvalidItem}, {"invalid_operation", ErrInvalidOperation}, {"scale", ErrScale},
	{"zero_quantity", ErrZeroQuantity}, {"negative_amount", ErrNegativeAmount}, {"overflow", ErrOverflow},
	{"invalid_payload", ErrInvalidPayload}, {"insufficient_stock", ErrInsufficientStock}, {"no_rate", ErrNoRate},
	{"negative_value", ErrNegativeValue}, {"no_stock", ErrNoStock}, {"method_change", ErrMethodChange},
	{"not_reversible", ErrNotReversible}, {"already_reversed", ErrAlreadyReversed},
	{"pending_limit", ErrPendingLimit}, {"unknown_item", ErrUnknownItem},
	{"unknown_operation", ErrUnknownOperation}, {"conflict", ErrOperationConflict}, {"incomplete", ErrIncomplete},
}

// Code returns a short snake_case name for the package's sentinel that err
// matches ("insufficient_stock", "conflict", …), or "" for other errors.
func Code(err error) string {
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return ""
}
