package decimal_test

import (
	"errors"
	"math"
	"math/big"
	"testing"

	"pgregory.net/rapid"

	"github.com/ledgerworks/ledger/decimal"
)

// units draws int64 values from three pools: the whole range, the edges where
// overflow and sign handling break, and small values where ties are common.
func units() *rapid.Generator[int64] {
	return rapid.OneOf(
		rapid.Int64(),
		rapid.SampledFrom([]int64{
			math.MinInt64, math.MinInt64 + 1, math.MinInt64 / 2, -1_000_000_000_000_000_000, -1, 0,
			1, 2, 1_000_000_000_000_000_000, math.MaxInt64 / 2, math.MaxInt64 - 1, math.MaxInt64,
		}),
		rapid.Int64Range(-1000, 1000),
	)
}

func scales() *rapid.Generator[uint8] { return rapid.Uint8Range(0, decimal.ScaleMax) }

func roundingModes() *rapid.Generator[decimal.RoundingMode] {
	return rapid.SampledFrom(modes[:])
}

func decimals() *rapid.Generator[decimal.Decimal] {
	return rapid.Custom(func(t *rapid.T) decimal.Decimal {
		return decimal.MustNew(units().Draw(t, "units"), scales().Draw(t, "scale"))
	})
}

func TestPropertyMulDivMatchesBig(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b, c := units().Draw(t, "a"), units().Draw(t, "b"), units().Draw(t, "c")
		mode := roundingModes().Draw(t, "mode")
		got, err := decimal.MulDiv(a, b, c, mode)
		want, wantErr := referenceMulDiv(a, b, c, mode)
		if !sameResult(got, err, want, wantErr) {
			t.Fatalf("MulDiv(%d, %d, %d, %v) = %d, %v; reference %d, %v", a, b, c, mode, got, err, want, wantErr)
		}
	})
}

// TestPropertyMulDivFitting draws c near a×b, so that most quotients fit and
// the rounding, not the overflow check, is what gets exercised.
func TestPropertyMulDivFitting(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := units().Draw(t, "a"), units().Draw(t, "b")
		// c = |a×b| / 2^shift, with shift chosen so that both c and the
		// quotient (about 2^shift) stay below 2^62 whenever possible.
		product := new(big.Int).Abs(new(big.Int).Mul(big.NewInt(a), big.NewInt(b)))
		length := product.BitLen()
		high := min(length, 62)
		shift := rapid.IntRange(min(max(0, length-62), high), high).Draw(t, "shift")
		c := product.Rsh(product, uint(shift)).Int64()
		if rapid.Bool().Draw(t, "negate") {
			c = -c
		}
		c += rapid.Int64Range(-3, 3).Draw(t, "jitter")
		if c == 0 {
			c = 1
		}
		mode := roundingModes().Draw(t, "mode")
		got, err := decimal.MulDiv(a, b, c, mode)
		want, wantErr := referenceMulDiv(a, b, c, mode)
		if !sameResult(got, err, want, wantErr) {
			t.Fatalf("MulDiv(%d, %d, %d, %v) = %d, %v; reference %d, %v", a, b, c, mode, got, err, want, wantErr)
		}
	})
}

func TestPropertyMulRoundMatchesBig(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := decimals().Draw(t, "a"), decimals().Draw(t, "b")
		scale := scales().Draw(t, "target")
		mode := roundingModes().Draw(t, "mode")
		got, err := decimal.MulRound(a, b, scale, mode)
		want, wantErr := referenceMulRound(a, b, scale, mode)
		if !sameResult(got.Units(), err, want, wantErr) || err == nil && got.Scale() != scale {
			t.Fatalf("MulRound(%v, %v, %d, %v) = %v, %v; reference %d, %v", a, b, scale, mode, got, err, want, wantErr)
		}
	})
}

func TestPropertyRescaleMatchesBig(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := decimals().Draw(t, "d")
		to := scales().Draw(t, "to")
		mode := roundingModes().Draw(t, "mode")
		got, err := d.Rescale(to, mode)
		want, wantErr := referenceRescale(d, to, mode)
		if !sameResult(got.Units(), err, want, wantErr) || err == nil && got.Scale() != to {
			t.Fatalf("Rescale(%v, %d, %v) = %v, %v; reference %d, %v", d, to, mode, got, err, want, wantErr)
		}
	})
}

// TestPropertyRoundingSymmetric checks that every mode rounds -x to exactly
// the negation of x, which is what makes reversals exact.
func TestPropertyRoundingSymmetric(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := rapid.Int64Range(math.MinInt64+1, math.MaxInt64).Draw(t, "a")
		b, c := units().Draw(t, "b"), units().Draw(t, "c")
		mode := roundingModes().Draw(t, "mode")
		positive, err := decimal.MulDiv(a, b, c, mode)
		negative, negativeErr := decimal.MulDiv(-a, b, c, mode)
		if err != nil || negativeErr != nil {
			return // MinInt64 results have no positive twin; the reference tests cover them
		}
		if negative != -positive {
			t.Fatalf("MulDiv(%d, %d, %d) = %d but MulDiv(%d, ...) = %d", a, b, c, positive, -a, negative)
		}
	})
}

func TestPropertyStringRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := decimals().Draw(t, "d")
		text := d.String()
		back, err := decimal.Parse(text, d.Scale())
		if err != nil || back != d {
			t.Fatalf("Parse(%q, %d) = %v, %v; want units %d", text, d.Scale(), back, err, d.Units())
		}
		// The canonical text denotes the same number as units × 10^-scale.
		want := new(big.Rat).SetFrac(big.NewInt(d.Units()), referencePower10(int(d.Scale())))
		got, ok := new(big.Rat).SetString(text)
		if !ok || got.Cmp(want) != 0 {
			t.Fatalf("String() = %q, which is not %s", text, want.RatString())
		}
		data, err := d.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if back, err := decimal.ParseJSON(data, d.Scale()); err != nil || back != d {
			t.Fatalf("ParseJSON(%s, %d) = %v, %v", data, d.Scale(), back, err)
		}
	})
}

// addSubtract applies Add or Sub and its math/big twin.
func addSubtract(t *rapid.T, name string, operation func(d, e decimal.Decimal) (decimal.Decimal, error),
	reference func(z, x, y *big.Int) *big.Int) {
	scale := scales().Draw(t, "scale")
	a, b := decimal.MustNew(units().Draw(t, "a"), scale), decimal.MustNew(units().Draw(t, "b"), scale)
	got, err := operation(a, b)
	want, wantErr := referenceInt64(reference(new(big.Int), big.NewInt(a.Units()), big.NewInt(b.Units())))
	if !sameResult(got.Units(), err, want, wantErr) || err == nil && got.Scale() != scale {
		t.Fatalf("%s(%v, %v) = %v, %v; reference %d, %v", name, a, b, got, err, want, wantErr)
	}
}

func TestPropertyAddMatchesBig(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		addSubtract(t, "Add", decimal.Decimal.Add, (*big.Int).Add)
	})
}

func TestPropertySubMatchesBig(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		addSubtract(t, "Sub", decimal.Decimal.Sub, (*big.Int).Sub)
	})
}

func TestPropertyNegAbsMatchBig(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := decimals().Draw(t, "d")
		negated, err := d.Neg()
		want, wantErr := referenceInt64(new(big.Int).Neg(big.NewInt(d.Units())))
		if !sameResult(negated.Units(), err, want, wantErr) {
			t.Fatalf("Neg(%v) = %v, %v; reference %d, %v", d, negated, err, want, wantErr)
		}
		absolute, err := d.Abs()
		want, wantErr = referenceInt64(new(big.Int).Abs(big.NewInt(d.Units())))
		if !sameResult(absolute.Units(), err, want, wantErr) {
			t.Fatalf("Abs(%v) = %v, %v; reference %d, %v", d, absolute, err, want, wantErr)
		}
	})
}

func TestPropertySumMatchesBig(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		scale := scales().Draw(t, "scale")
		all := rapid.SliceOfN(units(), 0, 8).Draw(t, "units")
		values := make([]decimal.Decimal, len(all))
		total := new(big.Int)
		for i, u := range all {
			values[i] = decimal.MustNew(u, scale)
			total.Add(total, big.NewInt(u))
		}
		got, err := decimal.Sum(scale, values...)
		want, wantErr := referenceInt64(total)
		if !sameResult(got.Units(), err, want, wantErr) || err == nil && got.Scale() != scale {
			t.Fatalf("Sum(%v) = %v, %v; reference %d, %v", all, got, err, want, wantErr)
		}
	})
}

func TestPropertyCmpMatchesBig(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		scale := scales().Draw(t, "scale")
		a, b := units().Draw(t, "a"), units().Draw(t, "b")
		got, err := decimal.MustNew(a, scale).Cmp(decimal.MustNew(b, scale))
		if want := big.NewInt(a).Cmp(big.NewInt(b)); err != nil || got != want {
			t.Fatalf("Cmp(%d, %d) = %d, %v; want %d", a, b, got, err, want)
		}
	})
}

// TestPropertyParseMatchesBig builds texts from digits, signs, points and
// padding, and checks Parse against big.Rat for every syntactically valid one.
func TestPropertyParseMatchesBig(t *testing.T) {
	digits := rapid.StringMatching(`[0-9]{1,22}`)
	rapid.Check(t, func(t *rapid.T) {
		text := rapid.SampledFrom([]string{"", "+", "-"}).Draw(t, "sign") + digits.Draw(t, "integer")
		if rapid.Bool().Draw(t, "point") {
			text += "." + digits.Draw(t, "fraction")
		}
		scale := scales().Draw(t, "scale")
		got, err := decimal.Parse(text, scale)
		if len(text) > decimal.TextLengthMax {
			if !errors.Is(err, decimal.ErrTextLength) {
				t.Fatalf("Parse of %d bytes: %v", len(text), err)
			}
			return
		}
		want, wantErr := referenceParse(text, scale)
		if !sameResult(got.Units(), err, want, wantErr) || err == nil && got.Scale() != scale {
			t.Fatalf("Parse(%q, %d) = %v, %v; reference %d, %v", text, scale, got, err, want, wantErr)
		}
	})
}
