package decimal

// ScaleMax is the largest scale (number of decimal places) a Decimal may have.
// 10^18 is the largest power of ten that fits in int64, so every scale up to
// ScaleMax can still represent the value 1 exactly.
const ScaleMax = 18

// Decimal is the exact value units × 10^-scale.
//
// The zero value is 0 at scale 0. Decimal is a small value type: pass and
// return it by value. The == operator compares the representation, not the
// value: 1.5 at scale 1 and 1.50 at scale 2 are different under ==, and Cmp
// refuses to compare them (ErrScaleMismatch).
type Decimal struct {
	units int64
	scale uint8
}

// New returns units × 10^-scale, or ErrScaleRange if scale exceeds ScaleMax.
func New(units int64, scale uint8) (Decimal, error) {
	if scale > ScaleMax {
		return Decimal{}, ErrScaleRange
	}
	return Decimal{units: units, scale: scale}, nil
}

// MustNew is New for constants and tests: it panics where New returns an
// error.
func MustNew(units int64, scale uint8) Decimal {
	d, err := New(units, scale)
	if err != nil {
		panic(err)
	}
	return d
}

// Units returns the integer count of 10^-scale steps: 1250 for 12.50.
func (d Decimal) Units() int64 { return d.units }

// Scale returns the number of decimal places.
func (d Decimal) Scale() uint8 { return d.scale }

// Sign returns -1, 0 or +1.
func (d Decimal) Sign() int {
	switch {
	case d.units < 0:
		return -1
	case d.units > 0:
		return 1
	default:
		return 0
	}
}

// IsZero reports whether the value is zero, at any scale.
func (d Decimal) IsZero() bool { return d.units == 0 }

// textLengthCanonicalMax bounds String's output: a sign, 19 digits (2^63 has
// 19) and a point. A scale of at most 18 means the leading "0" of values below
// one never pushes past 19 digits.
const textLengthCanonicalMax = 1 + 19 + 1

// String returns the canonical text of d at its scale: an optional "-", at
// least one integer digit, and exactly Scale() fractional digits after a ".".
// Examples: "12", "-0.50", "0.000". Parse(d.String(), d.Scale()) returns d.
func (d Decimal) String() string {
	var buffer [textLengthCanonicalMax]byte
	return string(d.Append(buffer[:0]))
}

// Append appends the canonical text of d (see String) to buffer and returns
// the extended buffer. It allocates only if buffer lacks capacity.
func (d Decimal) Append(buffer []byte) []byte {
	// Digits are produced least significant first, right to left. At least
	// scale+1 digits are written so that values below one get their "0".
	var digits [19]byte
	m := magnitude(d.units)
	start := len(digits)
	for count := 0; m > 0 || count <= int(d.scale); count++ {
		start--
		digits[start] = '0' + byte(m%10)
		m /= 10
	}
	if d.units < 0 {
		buffer = append(buffer, '-')
	}
	point := len(digits) - int(d.scale)
	buffer = append(buffer, digits[start:point]...)
	if d.scale > 0 {
		buffer = append(buffer, '.')
		buffer = append(buffer, digits[point:]...)
	}
	return buffer
}

// magnitude returns |v| as uint64. It is exact for math.MinInt64, whose
// magnitude 2^63 does not fit in int64: that is why all sign handling in this
// package goes through uint64 magnitudes.
func magnitude(v int64) uint64 {
	if v < 0 {
		return -uint64(v)
	}
	return uint64(v)
}

// signed returns the int64 with the given magnitude and sign, or ErrOverflow.
// A negative result may have magnitude 2^63 (math.MinInt64); a positive one
// at most 2^63-1.
func signed(m uint64, negative bool) (int64, error) {
	if negative {
		if m > 1<<63 {
			return 0, ErrOverflow
		}
		return int64(-m), nil
	}
	if m > 1<<63-1 {
		return 0, ErrOverflow
	}
	return int64(m), nil
}
