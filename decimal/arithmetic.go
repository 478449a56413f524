package decimal

import "math/bits"

// Add returns d+e. Both must have the same scale (ErrScaleMismatch); a sum
// outside the int64 range of units is ErrOverflow.
func (d Decimal) Add(e Decimal) (Decimal, error) {
	if d.scale != e.scale {
		return Decimal{}, ErrScaleMismatch
	}
	sum := d.units + e.units // wraps on overflow; detected just below
	// Overflow happened exactly when both operands have the same sign and
	// the sum's sign differs from it.
	if (d.units^sum)&(e.units^sum) < 0 {
		return Decimal{}, ErrOverflow
	}
	return Decimal{units: sum, scale: d.scale}, nil
}

// Sub returns d-e. Both must have the same scale (ErrScaleMismatch); a
// difference outside the int64 range of units is ErrOverflow.
func (d Decimal) Sub(e Decimal) (Decimal, error) {
	if d.scale != e.scale {
		return Decimal{}, ErrScaleMismatch
	}
	difference := d.units - e.units // wraps on overflow; detected just below
	// Overflow happened exactly when the operands have different signs and
	// the difference's sign differs from d's.
	if (d.units^e.units)&(d.units^difference) < 0 {
		return Decimal{}, ErrOverflow
	}
	return Decimal{units: difference, scale: d.scale}, nil
}

// Neg returns -d. The only failure is ErrOverflow for units math.MinInt64,
// whose negation is not an int64.
func (d Decimal) Neg() (Decimal, error) {
	units, err := signed(magnitude(d.units), d.units > 0)
	if err != nil {
		return Decimal{}, err
	}
	return Decimal{units: units, scale: d.scale}, nil
}

// Abs returns |d|. The only failure is ErrOverflow for units math.MinInt64.
func (d Decimal) Abs() (Decimal, error) {
	units, err := signed(magnitude(d.units), false)
	if err != nil {
		return Decimal{}, err
	}
	return Decimal{units: units, scale: d.scale}, nil
}

// Cmp returns -1, 0 or +1 as d is less than, equal to or greater than e.
// Both must have the same scale (ErrScaleMismatch), like every other binary
// operation; Sign and IsZero compare with zero at any scale.
func (d Decimal) Cmp(e Decimal) (int, error) {
	if d.scale != e.scale {
		return 0, ErrScaleMismatch
	}
	switch {
	case d.units < e.units:
		return -1, nil
	case d.units > e.units:
		return 1, nil
	default:
		return 0, nil
	}
}

// Sum returns the sum of values, each of which must have the given scale
// (ErrScaleMismatch). The scale is a parameter so that an empty list has a
// well-defined result: zero at that scale.
//
// Unlike a chain of Add, Sum accumulates in 128 bits, so it fails with
// ErrOverflow only if the final total is out of range, never because of the
// order of its terms: a trial balance that nets to zero sums to zero.
func Sum(scale uint8, values ...Decimal) (Decimal, error) {
	if scale > ScaleMax {
		return Decimal{}, ErrScaleRange
	}
	// A two's complement 128-bit accumulator: 2^64 terms of magnitude up to
	// 2^63 cannot overflow it.
	var hi, lo uint64
	for _, v := range values {
		if v.scale != scale {
			return Decimal{}, ErrScaleMismatch
		}
		var carry uint64
		lo, carry = bits.Add64(lo, uint64(v.units), 0)
		hi, _ = bits.Add64(hi, uint64(v.units>>63), carry) // sign extension
	}
	// The total is an int64 exactly when hi is the sign extension of lo.
	if hi != uint64(int64(lo)>>63) {
		return Decimal{}, ErrOverflow
	}
	return Decimal{units: int64(lo), scale: scale}, nil
}
