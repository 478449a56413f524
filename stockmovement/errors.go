package stockmovement

import (
	"errors"
	"fmt"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
)

// Every error this package returns about a caller's input is an *Error (or an
// *InsufficientStockError) that matches one of these sentinels and, in
// addition, the chain sentinel of its class: chain.ErrInvalid for refused
// input (exit code 2 in ledgerctl), chain.ErrNotFound for a missing item,
// location or movement (exit code 4). Idempotency conflicts are
// *chain.ConflictError values (chain.ErrIdempotencyConflict). Nothing is
// written when any of them is returned.
var (
	// ErrInvalidName: a tenant, item or location id is empty, too long, not
	// UTF-8, holds a control character or the separator "/".
	ErrInvalidName = errors.New("invalid name")

	// ErrInvalidKey: the idempotency key is missing, longer than
	// KeyLengthMax, not UTF-8 or holds a control character. Every movement
	// needs a key: without one a retry would move stock twice.
	ErrInvalidKey = errors.New("invalid idempotency key")

	// ErrInvalidText: a reference, note, reason or display name is too long,
	// not UTF-8 or holds a control character.
	ErrInvalidText = errors.New("invalid text")

	// ErrMissingReason: an adjustment has no reason.
	ErrMissingReason = errors.New("adjustment without a reason")

	// ErrInvalidScale: an item's declared scale exceeds decimal.ScaleMax.
	ErrInvalidScale = errors.New("invalid scale")

	// ErrScaleMismatch: a quantity is not at its item's declared scale.
	ErrScaleMismatch = errors.New("quantity not at the item's scale")

	// ErrScaleChange: an item definition would change the item's scale.
	// Running quantities are stored at the declared scale, so it is fixed
	// once the item is defined.
	ErrScaleChange = errors.New("item scale cannot change")

	// ErrZeroQuantity: a movement of nothing.
	ErrZeroQuantity = errors.New("zero quantity")

	// ErrNegativeQuantity: a receipt, issue or transfer quantity is not
	// positive (its direction is given by the operation, not the sign).
	ErrNegativeQuantity = errors.New("quantity must be positive")

	// ErrOverflow: a quantity, balance or item total does not fit the item's
	// int64 units.
	ErrOverflow = errors.New("quantity overflow")

	// ErrNegativeStock: the movement would leave a negative balance and the
	// item's policy does not allow it. The error is an
	// *InsufficientStockError that names the shortfall.
	ErrNegativeStock = errors.New("negative stock refused")

	// ErrSameLocation: a transfer's source and target are the same location.
	ErrSameLocation = errors.New("transfer within one location")

	// ErrInvalidReference: a reversal names a chain that is not a stock
	// movement chain, or seq 0.
	ErrInvalidReference = errors.New("invalid movement reference")

	// ErrCrossTenant: a reversal names a movement of another tenant.
	ErrCrossTenant = errors.New("movement belongs to another tenant")

	// ErrNotReversible: the referenced entry is a reversal, or not a stock
	// movement at all.
	ErrNotReversible = errors.New("movement cannot be reversed")

	// ErrAlreadyReversed: the movement was reversed before, under another
	// idempotency key. A movement is reversed at most once.
	ErrAlreadyReversed = errors.New("movement already reversed")

	// ErrItemNotFound: the tenant has no item with that id.
	ErrItemNotFound = errors.New("item not found")

	// ErrLocationNotFound: the tenant has no location with that id.
	ErrLocationNotFound = errors.New("location not found")

	// ErrMovementNotFound: a reversal names a seq the chain does not hold.
	ErrMovementNotFound = errors.New("movement not found")

	// ErrSeqBeyondHead: a point-in-time balance asks for a seq the chain has
	// not reached.
	ErrSeqBeyondHead = errors.New("seq beyond the chain's head")

	// ErrMalformed: bytes are not a valid stock payload. Read from the
	// ledger, it also matches chain.ErrCorrupt.
	ErrMalformed = errors.New("malformed stock payload")

	// ErrIncompleteTransfer: one half of a transfer exists without the other.
	// This package writes both halves in one transaction, so it means the
	// ledger was written by something else; it matches chain.ErrCorrupt.
	ErrIncompleteTransfer = errors.New("transfer half without its counterpart")
)

// class returns the chain sentinel that an error with this sentinel also
// matches.
func class(sentinel error) error {
	switch sentinel {
	case ErrItemNotFound, ErrLocationNotFound, ErrMovementNotFound, ErrSeqBeyondHead:
		return chain.ErrNotFound
	case ErrMalformed, ErrIncompleteTransfer:
		return chain.ErrCorrupt
	default:
		return chain.ErrInvalid
	}
}

// Error is an error of this package: which operation failed, the sentinel
// that says why, and a message naming the offending value.
type Error struct {
	Op     string // "receive", "issue", "adjust", "transfer", "reverse", "define item", …
	Err    error  // one of the sentinels above
	Detail string // the offending value, for humans
}

func newError(op string, sentinel error, format string, args ...any) *Error {
	return &Error{Op: op, Err: sentinel, Detail: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("stockmovement: %s: %v", e.Op, e.Err)
	}
	return fmt.Sprintf("stockmovement: %s: %v: %s", e.Op, e.Err, e.Detail)
}

// Unwrap lets errors.Is match both the sentinel and its chain class
// (chain.ErrInvalid, chain.ErrNotFound or chain.ErrCorrupt).
func (e *Error) Unwrap() []error { return []error{e.Err, class(e.Err)} }

// InsufficientStockError is returned when a movement would leave a negative
// balance at a location whose item does not allow it.
type InsufficientStockError struct {
	Op       string
	Tenant   string
	Item     string
	Location string
	// Balance is the balance before the movement, Change the movement's
	// signed quantity, Shortfall how much is missing (Balance+Change < 0 by
	// exactly Shortfall).
	Balance, Change, Shortfall decimal.Decimal
}

func (e *InsufficientStockError) Error() string {
	return fmt.Sprintf("stockmovement: %s: %v: item %q at location %q has %s, change %s is short by %s",
		e.Op, ErrNegativeStock, e.Item, e.Location, e.Balance, e.Change, e.Shortfall)
}

// Unwrap lets errors.Is match ErrNegativeStock and chain.ErrInvalid.
func (e *InsufficientStockError) Unwrap() []error { return []error{ErrNegativeStock, chain.ErrInvalid} }
