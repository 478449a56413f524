package financial

import (
	"errors"
	"fmt"

	"github.com/ledgerworks/ledger/chain"
)

// Every error about a request is an *Error that matches one of these
// sentinels and, with errors.Is, the chain error that classifies it:
// chain.ErrInvalid for a request that is refused (nothing was written),
// chain.ErrNotFound for a lookup of something that does not exist, and
// chain.ErrCorrupt for stored bytes that cannot be decoded. Idempotency
// conflicts are the chain's *chain.ConflictError.
var (
	// ErrInvalidBook: the tenant or book name cannot scope a chain id.
	ErrInvalidBook = errors.New("invalid book")

	// ErrInvalidAccount: an account code, name, type or normal side is
	// malformed or outside its limit.
	ErrInvalidAccount = errors.New("invalid account")

	// ErrInvalidCurrency: a currency code or exponent is malformed.
	ErrInvalidCurrency = errors.New("invalid currency")

	// ErrInvalidDate: a date is malformed or outside DateMin..DateMax.
	ErrInvalidDate = errors.New("invalid date")

	// ErrInvalidPosting: a posting field other than a line's amount is
	// malformed (empty key, memo too long, too few or too many lines, a
	// line's side or account code).
	ErrInvalidPosting = errors.New("invalid posting")

	// ErrAmount: a line's amount is zero or negative. Lines carry positive
	// amounts; the side says which way they go.
	ErrAmount = errors.New("amount not positive")

	// ErrExponent: an amount's scale differs from its currency's minor-unit
	// exponent (100.0 for a currency with cents).
	ErrExponent = errors.New("amount scale differs from currency exponent")

	// ErrUnbalanced: the debits and credits of a posting differ in some
	// currency. There is no tolerance: they must be equal to the minor unit.
	ErrUnbalanced = errors.New("posting does not balance")

	// ErrOverflow: a posting total or an account balance would leave the
	// int64 range of minor units. It also matches decimal.ErrOverflow.
	ErrOverflow = errors.New("amount overflow")

	// ErrAccountNotFound: the account code is not defined in the book. For
	// a posting line it is an input error (chain.ErrInvalid), for a lookup
	// a not-found error (chain.ErrNotFound).
	ErrAccountNotFound = errors.New("account not defined")

	// ErrAccountClosed: a posting names a closed account. Closed accounts
	// keep their balance and history but take no new postings.
	ErrAccountClosed = errors.New("account closed")

	// ErrCurrencyNotFound: the currency is not defined in the book; input
	// or not-found error as for ErrAccountNotFound.
	ErrCurrencyNotFound = errors.New("currency not defined")

	// ErrPostingNotFound: no posting has that journal seq or key.
	ErrPostingNotFound = errors.New("posting not found")

	// ErrNotReversible: the posting to reverse is itself a reversal. Post
	// the original again instead of reversing its reversal.
	ErrNotReversible = errors.New("posting cannot be reversed")

	// ErrPayload: stored payload bytes are not a valid payload of their type.
	ErrPayload = errors.New("invalid payload")
)

// Error says what was refused and why. Unwrap returns the specific sentinel
// and its class (chain.ErrInvalid, chain.ErrNotFound or chain.ErrCorrupt),
// plus Cause when there is one.
type Error struct {
	Err    error // one of the sentinels above
	Class  error // chain.ErrInvalid, chain.ErrNotFound or chain.ErrCorrupt
	Line   int   // 1-based posting line the error is about; 0 when none
	Detail string
	Cause  error // an underlying error (decimal, chain), or nil
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("financial: %v: line %d: %s", e.Err, e.Line, e.Detail)
	}
	return fmt.Sprintf("financial: %v: %s", e.Err, e.Detail)
}

// Unwrap lets errors.Is match the sentinel, its class and the cause.
func (e *Error) Unwrap() []error {
	if e.Cause != nil {
		return []error{e.Err, e.Class, e.Cause}
	}
	return []error{e.Err, e.Class}
}

func invalid(sentinel error, format string, args ...any) *Error {
	return &Error{Err: sentinel, Class: chain.ErrInvalid, Detail: fmt.Sprintf(format, args...)}
}

func lineInvalid(line int, sentinel error, format string, args ...any) *Error {
	e := invalid(sentinel, format, args...)
	e.Line = line
	return e
}

func notFound(sentinel error, format string, args ...any) *Error {
	return &Error{Err: sentinel, Class: chain.ErrNotFound, Detail: fmt.Sprintf(format, args...)}
}

func corrupt(format string, args ...any) *Error {
	return &Error{Err: ErrPayload, Class: chain.ErrCorrupt, Detail: fmt.Sprintf(format, args...)}
}

// invalidClass is the class of every refused request.
var invalidClass = chain.ErrInvalid

// corruptClass is the class of undecodable stored bytes.
var corruptClass = chain.ErrCorrupt
