package decimal

import "fmt"

// TextLengthMax is the longest text Parse accepts, in bytes. The longest
// canonical text is 21 bytes; the rest leaves room for padding zeros such as
// "000012.5000". The limit is checked first, so that an oversized or hostile
// input is rejected before it is scanned.
const TextLengthMax = 64

// Parse returns the value of text at exactly the given scale.
//
// The grammar is: an optional sign ("+" or "-"), one or more ASCII digits,
// and optionally a "." followed by one or more ASCII digits. Anything else is
// ErrSyntax: empty text, whitespace, exponents, thousands separators,
// underscores, "1." and ".5", non-ASCII digits.
//
// Parse never rounds. Fractional digits beyond scale are accepted only if they
// are all zeros ("1.500" at scale 2 is 1.50); otherwise the result is
// ErrScale. A value outside the int64 range of units is ErrOverflow.
//
// Checks run in this order, and the first failure is reported: length
// (ErrTextLength), scale (ErrScaleRange), syntax (ErrSyntax), fractional
// digits (ErrScale), range (ErrOverflow).
func Parse(text string, scale uint8) (Decimal, error) {
	if len(text) > TextLengthMax {
		return Decimal{}, fmt.Errorf("%w: %d bytes, limit %d", ErrTextLength, len(text), TextLengthMax)
	}
	if scale > ScaleMax {
		return Decimal{}, fmt.Errorf("%w: scale %d, limit %d", ErrScaleRange, scale, ScaleMax)
	}
	negative, integer, fraction, ok := split(text)
	if !ok {
		return Decimal{}, fmt.Errorf("%w: %q", ErrSyntax, text)
	}
	fraction = trimZeros(fraction, int(scale))
	if len(fraction) > int(scale) {
		return Decimal{}, fmt.Errorf("%w: %q at scale %d", ErrScale, text, scale)
	}
	units, ok := accumulate(negative, integer, fraction, int(scale))
	if !ok {
		return Decimal{}, fmt.Errorf("%w: %q at scale %d", ErrOverflow, text, scale)
	}
	return Decimal{units: units, scale: scale}, nil
}

// split checks the grammar and returns the sign and the two digit runs, the
// fraction empty when there is no ".".
func split(text string) (negative bool, integer, fraction string, ok bool) {
	rest := text
	if len(rest) > 0 && (rest[0] == '+' || rest[0] == '-') {
		negative = rest[0] == '-'
		rest = rest[1:]
	}
	integer, rest = digitRun(rest)
	if integer == "" {
		return false, "", "", false
	}
	if rest == "" {
		return negative, integer, "", true
	}
	if rest[0] != '.' {
		return false, "", "", false
	}
	fraction, rest = digitRun(rest[1:])
	if fraction == "" || rest != "" {
		return false, "", "", false
	}
	return negative, integer, fraction, true
}

// digitRun splits text after its leading run of ASCII digits.
func digitRun(text string) (digits, rest string) {
	i := 0
	for i < len(text) && isDigit(text[i]) {
		i++
	}
	return text[:i], text[i:]
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// trimZeros drops trailing zeros of fraction beyond the first keep digits:
// they carry no value, so "1.500" at scale 2 is exact.
func trimZeros(fraction string, keep int) string {
	for len(fraction) > keep && fraction[len(fraction)-1] == '0' {
		fraction = fraction[:len(fraction)-1]
	}
	return fraction
}

// accumulate returns the units of integer.fraction at scale, where
// len(fraction) <= scale, or false if they do not fit in int64.
//
// The magnitude is built in uint64 against a limit that depends on the sign,
// so that math.MinInt64 (magnitude 2^63) parses while 2^63 does not.
func accumulate(negative bool, integer, fraction string, scale int) (int64, bool) {
	limit := uint64(1<<63 - 1)
	if negative {
		limit = 1 << 63
	}
	m, ok := appendDigits(0, integer, limit)
	if !ok {
		return 0, false
	}
	m, ok = appendDigits(m, fraction, limit)
	if !ok {
		return 0, false
	}
	for range scale - len(fraction) {
		m, ok = appendDigit(m, 0, limit)
		if !ok {
			return 0, false
		}
	}
	units, err := signed(m, negative)
	return units, err == nil
}

func appendDigits(m uint64, digits string, limit uint64) (uint64, bool) {
	ok := true
	for i := 0; i < len(digits) && ok; i++ {
		m, ok = appendDigit(m, uint64(digits[i]-'0'), limit)
	}
	return m, ok
}

// appendDigit returns m*10 + digit, or false if that exceeds limit.
// m*10 + digit <= limit exactly when m <= (limit-digit)/10, so the check
// itself cannot overflow.
func appendDigit(m, digit, limit uint64) (uint64, bool) {
	if m > (limit-digit)/10 {
		return 0, false
	}
	return m*10 + digit, true
}
