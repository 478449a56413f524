package decimal

import "math/bits"

// MulDiv returns a×b/c rounded by mode.
//
// The product a×b is kept exactly in 128 bits, so the only overflow is that of
// the final result: MulDiv(math.MaxInt64, 3, 4, m) is fine although
// math.MaxInt64×3 is not an int64. This is the primitive behind
// "value = round(quantity × price)" and the proportional split of a FIFO layer,
// "round(layerValue × issued / layerQuantity)".
//
// Errors, checked in this order: ErrRoundingMode, ErrDivisionByZero (c == 0),
// ErrOverflow (the rounded quotient is not an int64).
func MulDiv(a, b, c int64, mode RoundingMode) (int64, error) {
	if !mode.valid() {
		return 0, ErrRoundingMode
	}
	if c == 0 {
		return 0, ErrDivisionByZero
	}
	hi, lo := bits.Mul64(magnitude(a), magnitude(b))
	q, ok := quotientRound(hi, lo, magnitude(c), mode)
	if !ok {
		return 0, ErrOverflow
	}
	return signed(q, (a < 0) != (b < 0) != (c < 0))
}

// MulRound returns a×b at the given scale, rounded by mode.
//
// The exact product has scale a.Scale()+b.Scale(), up to 36 decimal places,
// which no Decimal can hold; it is kept in 128 bits and then brought to scale,
// exactly when scale is at least the product's scale, otherwise by rounding.
// Example: 3.125 kg (scale 3) × 1.99 per kg (scale 2) at scale 2 is 6.22
// with HalfEven (exact product 6.21875).
//
// Errors: ErrRoundingMode, ErrScaleRange (scale > ScaleMax), ErrOverflow.
func MulRound(a, b Decimal, scale uint8, mode RoundingMode) (Decimal, error) {
	if !mode.valid() {
		return Decimal{}, ErrRoundingMode
	}
	if scale > ScaleMax {
		return Decimal{}, ErrScaleRange
	}
	negative := (a.units < 0) != (b.units < 0)
	hi, lo := bits.Mul64(magnitude(a.units), magnitude(b.units))
	productScale := a.scale + b.scale
	var m uint64
	if scale >= productScale {
		// Exact: multiply by 10^(scale-productScale), at most 10^18.
		var overflow uint64
		overflow, m = bits.Mul64(lo, power10[scale-productScale])
		if hi != 0 || overflow != 0 {
			return Decimal{}, ErrOverflow
		}
	} else {
		var ok bool
		m, ok = divideRound(hi, lo, productScale-scale, mode)
		if !ok {
			return Decimal{}, ErrOverflow
		}
	}
	units, err := signed(m, negative)
	if err != nil {
		return Decimal{}, err
	}
	return Decimal{units: units, scale: scale}, nil
}

// MulRatio returns d × numerator / denominator at d's scale, rounded by mode.
// The ratio is scale-free, so numerator and denominator must share a scale
// (ErrScaleMismatch otherwise); d's scale is kept. It is MulDiv on Decimals:
// the share of a FIFO layer's value for an issue is
// layerValue.MulRatio(issuedQuantity, layerQuantity, HalfEven).
//
// Errors: ErrRoundingMode, ErrScaleMismatch, ErrDivisionByZero, ErrOverflow.
func (d Decimal) MulRatio(numerator, denominator Decimal, mode RoundingMode) (Decimal, error) {
	if !mode.valid() {
		return Decimal{}, ErrRoundingMode
	}
	if numerator.scale != denominator.scale {
		return Decimal{}, ErrScaleMismatch
	}
	units, err := MulDiv(d.units, numerator.units, denominator.units, mode)
	if err != nil {
		return Decimal{}, err
	}
	return Decimal{units: units, scale: d.scale}, nil
}

// multiply returns a×b, or ErrOverflow if it is not an int64.
func multiply(a, b int64) (int64, error) {
	hi, lo := bits.Mul64(magnitude(a), magnitude(b))
	if hi != 0 {
		return 0, ErrOverflow
	}
	return signed(lo, (a < 0) != (b < 0))
}

// quotientRound returns the magnitude (hi·2^64 + lo) / divisor rounded by
// mode, or false if it does not fit in uint64. divisor must not be zero.
func quotientRound(hi, lo, divisor uint64, mode RoundingMode) (uint64, bool) {
	qhi, qlo, remainder := divide128(hi, lo, divisor)
	if qhi != 0 {
		return 0, false
	}
	return roundMagnitude(qlo, compareHalf(remainder, divisor), mode)
}

// divideRound returns the magnitude (hi·2^64 + lo) / 10^exponent rounded by
// mode, or false if it does not fit in uint64. exponent may be up to 38,
// beyond the 10^19 that fits in uint64: the product of two Decimals at
// ScaleMax has 36 decimal places.
func divideRound(hi, lo uint64, exponent uint8, mode RoundingMode) (uint64, bool) {
	if int(exponent) <= power10Max {
		return quotientRound(hi, lo, power10[exponent], mode)
	}
	// Divide by 10^19 and then by the rest, 10^(exponent-19). The second
	// divisor is even, so half of the whole divisor is (second/2)·10^19 and
	// the remainder r2·10^19 + r1 compares with it as the pair (r2, r1)
	// compares with (second/2, 0).
	second := power10[int(exponent)-power10Max]
	hi, lo, r1 := divide128(hi, lo, power10[power10Max])
	qhi, q, r2 := divide128(hi, lo, second)
	if qhi != 0 {
		return 0, false
	}
	position := belowHalf
	switch {
	case r2 > second/2 || r2 == second/2 && r1 > 0:
		position = aboveHalf
	case r2 == second/2:
		position = atHalf
	}
	return roundMagnitude(q, position, mode)
}

// divide128 returns the 128-bit quotient (qhi, qlo) and the remainder of
// (hi·2^64 + lo) / divisor, by long division in two 64-bit steps (bits.Div64
// alone panics when its quotient would not fit in 64 bits).
func divide128(hi, lo, divisor uint64) (qhi, qlo, remainder uint64) {
	qhi, remainder = bits.Div64(0, hi, divisor)
	qlo, remainder = bits.Div64(remainder, lo, divisor)
	return qhi, qlo, remainder
}
