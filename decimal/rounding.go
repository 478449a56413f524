package decimal

import (
	"math"
	"strconv"
)

// RoundingMode selects how a result that falls between two representable
// values is rounded. All modes are symmetric: rounding -x gives the negation
// of rounding x, so a reversal of a rounded amount is exactly its negation.
type RoundingMode uint8

const (
	// HalfEven rounds to the nearest value and a tie to the neighbour whose
	// last digit is even: 0.125 → 0.12, 0.135 → 0.14, -0.125 → -0.12.
	// It is the zero value and the project default (banker's rounding)
	// because ties do not drift upward when many amounts are summed.
	HalfEven RoundingMode = iota

	// HalfUp rounds to the nearest value and a tie away from zero:
	// 0.125 → 0.13, -0.125 → -0.13. It is the rule most people learn at
	// school and some tax authorities prescribe.
	HalfUp

	// Down truncates toward zero: 0.129 → 0.12, -0.129 → -0.12.
	Down

	roundingModeCount
)

// String returns "half-even", "half-up" or "down".
func (mode RoundingMode) String() string {
	switch mode {
	case HalfEven:
		return "half-even"
	case HalfUp:
		return "half-up"
	case Down:
		return "down"
	default:
		return "RoundingMode(" + strconv.Itoa(int(mode)) + ")"
	}
}

// valid reports whether mode is one of the declared constants. An unknown mode
// is an error rather than a silent fallback to HalfEven, because a corrupt
// configuration value should be noticed, not absorbed into the books.
func (mode RoundingMode) valid() bool { return mode < roundingModeCount }

// Rescale returns d at scale to. Increasing the scale is exact and fails only
// with ErrOverflow (1 at scale 0 becomes 1.00 at scale 2, units 100).
// Decreasing the scale rounds by mode (1.235 → 1.24 with HalfEven).
func (d Decimal) Rescale(to uint8, mode RoundingMode) (Decimal, error) {
	if !mode.valid() {
		return Decimal{}, ErrRoundingMode
	}
	if to > ScaleMax {
		return Decimal{}, ErrScaleRange
	}
	if to >= d.scale {
		units, err := multiply(d.units, int64(power10[to-d.scale]))
		if err != nil {
			return Decimal{}, err
		}
		return Decimal{units: units, scale: to}, nil
	}
	m, ok := divideRound(0, magnitude(d.units), d.scale-to, mode)
	if !ok {
		return Decimal{}, ErrOverflow
	}
	units, err := signed(m, d.units < 0)
	if err != nil {
		return Decimal{}, err
	}
	return Decimal{units: units, scale: to}, nil
}

// power10[n] is 10^n for every n whose power fits in uint64.
var power10 = [...]uint64{
	1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9,
	1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19,
}

// power10Max is the largest n in power10.
const power10Max = len(power10) - 1

// halfway classifies a remainder against half of its divisor.
type halfway int8

const (
	belowHalf halfway = -1 // includes a zero remainder
	atHalf    halfway = 0
	aboveHalf halfway = 1
)

// compareHalf classifies remainder (< divisor) against divisor/2. Comparing
// remainder with divisor-remainder avoids computing 2*remainder, which
// overflows for divisors above 2^63 such as 10^19.
func compareHalf(remainder, divisor uint64) halfway {
	other := divisor - remainder
	switch {
	case remainder < other:
		return belowHalf
	case remainder == other:
		return atHalf
	default:
		return aboveHalf
	}
}

// roundMagnitude rounds the truncated magnitude q of a quotient whose
// remainder is classified by position, or returns false if rounding up
// overflows uint64. Working on magnitudes is what makes every mode symmetric.
func roundMagnitude(q uint64, position halfway, mode RoundingMode) (uint64, bool) {
	up := false
	switch mode {
	case HalfEven:
		up = position == aboveHalf || position == atHalf && q%2 == 1
	case HalfUp:
		up = position != belowHalf
	case Down:
		up = false
	}
	if !up {
		return q, true
	}
	if q == math.MaxUint64 {
		return 0, false
	}
	return q + 1, true
}
