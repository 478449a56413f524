package decimal

import "errors"

// Every error returned by this package is, or wraps, exactly one of these
// sentinels, so callers can branch with errors.Is. Arithmetic returns the bare
// sentinel (no allocation on a hot path); Parse wraps it with the offending
// text, because a human will read that message.
var (
	// ErrOverflow reports a result that does not fit in int64 units at the
	// requested scale. Nothing ever wraps around: this error is returned
	// instead.
	ErrOverflow = errors.New("decimal: overflow")

	// ErrDivisionByZero reports a zero divisor (MulDiv, MulRatio).
	ErrDivisionByZero = errors.New("decimal: division by zero")

	// ErrScaleRange reports a scale above ScaleMax.
	ErrScaleRange = errors.New("decimal: scale out of range")

	// ErrScaleMismatch reports two operands with different scales. Mixing
	// scales is almost always a bug in the caller (money at scale 2 added to a
	// quantity at scale 3), so the package refuses rather than guesses.
	ErrScaleMismatch = errors.New("decimal: scale mismatch")

	// ErrScale reports text with more significant fractional digits than the
	// requested scale. Parse never rounds: silently dropping a digit of money
	// is worse than refusing the input.
	ErrScale = errors.New("decimal: too many fractional digits for scale")

	// ErrSyntax reports text that is not a plain decimal number as described
	// in the package documentation.
	ErrSyntax = errors.New("decimal: invalid syntax")

	// ErrTextLength reports text longer than TextLengthMax. It is checked
	// before anything else, so hostile input costs nothing to reject.
	ErrTextLength = errors.New("decimal: text too long")

	// ErrRoundingMode reports a RoundingMode value that is not one of the
	// declared constants.
	ErrRoundingMode = errors.New("decimal: unknown rounding mode")
)
