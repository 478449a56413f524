// Package decimal is exact fixed-point arithmetic for quantities and money.
//
// A Decimal is an int64 count of units together with a scale: the value is
// units × 10^-scale. 12.50 is units 1250 at scale 2; 3 kg at scale 3 is units
// 3000. There is no floating point anywhere in the package, no hidden
// rounding, and no wrap-around: every operation either returns the exact
// result, a result rounded by a RoundingMode the caller named, or an error.
//
// # Basics
//
// Values are created with New (from units) or Parse (from text), always at a
// scale the caller declares: the scale belongs to the kind of amount (money in
// a currency with cents has scale 2, a quantity in kilograms measured to the
// gram has scale 3), not to a particular value.
//
//	price, err := decimal.Parse("19.99", 2) // units 1999, scale 2
//	quantity := decimal.MustNew(3125, 3)    // 3.125
//	total, err := price.Add(price)          // 39.98
//	value, err := decimal.MulRound(quantity, price, 2, decimal.HalfEven)
//	fmt.Println(value)                      // 62.47 (exactly 62.46875)
//
// Add, Sub and Cmp require both operands to have the same scale and return
// ErrScaleMismatch otherwise; change a scale explicitly with Rescale. Neg and
// Abs keep the scale. Sum adds many values of one scale in 128 bits, so
// only the final total has to fit.
//
// Multiplication and division are where rounding happens, and the caller
// always names the mode:
//
//   - MulDiv(a, b, c, mode) computes a×b/c on int64 with an exact 128-bit
//     intermediate and one rounding of the quotient. It is the core of
//     "value = round(quantity × rate)" and of proportional splits.
//   - MulRound(a, b, scale, mode) multiplies two Decimals (a quantity by a
//     unit price, say) into a target scale. The exact product may have up to
//     36 decimal places; it is rounded once, never truncated silently.
//   - d.MulRatio(numerator, denominator, mode) scales d by a ratio of two
//     Decimals of one scale and keeps d's scale. The value of a FIFO issue is
//     layerValue.MulRatio(issued, layerQuantity, HalfEven).
//   - d.Rescale(to, mode) changes the scale, exactly when increasing it,
//     rounding when decreasing it.
//
// # Text and JSON
//
// String returns the canonical text: an optional "-", at least one integer
// digit, and exactly Scale() fractional digits ("12", "-0.50", "0.000").
// Parse(d.String(), d.Scale()) == d for every Decimal.
//
// Parse accepts [+|-]digits[.digits] in ASCII, at most TextLengthMax bytes.
// It rejects (ErrSyntax) empty text, whitespace, exponents ("1e3"),
// separators ("1,000", "1_000"), a bare point on either side ("1.", ".5"),
// and anything non-ASCII. Leading zeros ("007") and a negative zero ("-0.00",
// which is zero) are accepted. Parse never rounds: fractional digits beyond
// the scale must be zeros ("1.500" at scale 2 is 1.50; "1.505" is ErrScale).
//
// MarshalJSON writes the canonical text as a JSON string ("12.50"), never a
// JSON number. There is no UnmarshalJSON, because the text does not carry the
// scale; decode with ParseJSON(data, scale), typically from a
// json.RawMessage.
//
// # Rounding
//
// Three modes, all symmetric around zero (rounding -x gives -(rounding x)):
//
//	mode      0.125→2dp  0.135→2dp  0.129→2dp  -0.125→2dp
//	HalfEven  0.12       0.14       0.13       -0.12
//	HalfUp    0.13       0.14       0.13       -0.13
//	Down      0.12       0.13       0.12       -0.12
//
// HalfEven (banker's rounding) is the zero value and the project default:
// ties go to the even neighbour, so rounding errors do not accumulate in
// one direction over many postings. HalfUp rounds ties away from zero. Down
// truncates toward zero. Every operation rounds at most once, from the exact
// result; no intermediate result is rounded. A RoundingMode that is none of
// these constants is ErrRoundingMode, never a silent default.
//
// # Limits and overflow
//
// Units are int64: from math.MinInt64 to math.MaxInt64, about ±9.22 × 10^18
// units. At scale 2 that is ±92 233 720 368 547 758.07; at scale 18, ±9.22.
// ScaleMax is 18, the largest scale at which 1 is still representable. Any
// result outside the range is ErrOverflow; nothing wraps. math.MinInt64 is a
// valid value, but its Neg and Abs are ErrOverflow, as in the integers.
//
// Intermediate products never overflow: MulDiv, MulRound and MulRatio hold
// the full 128-bit product, so only the final, rounded result has to fit.
//
// # Errors
//
// Every error is, or wraps, one sentinel from errors.go; test with errors.Is.
// Arithmetic returns the bare sentinel and does not allocate. Parse and
// ParseJSON wrap the sentinel with the offending text and scale, for humans.
//
// # Caveats
//
//   - == compares the representation: 1.5 at scale 1 and 1.50 at scale 2 are
//     different values of the struct. Bring both to one scale with Rescale
//     first; Cmp refuses mixed scales rather than guessing.
//   - The zero value is 0 at scale 0. A zero amount of money is New(0, 2),
//     not Decimal{}: adding Decimal{} to a scale-2 value is ErrScaleMismatch.
//   - Rounding per line and then summing is not the same as summing and then
//     rounding. Decide which one the books require; this package does
//     exactly what it is told, once per call.
//   - There is no general division of two Decimals. Division that must round
//     is always a proportion in this domain (a share of a layer's value, a
//     unit cost); express it with MulDiv or MulRatio so the rounding point
//     is explicit.
//   - JSON numbers are not accepted, on purpose: "12.5" as a JSON number has
//     passed through float64 in too many tools to be trusted.
package decimal
