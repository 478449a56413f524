package decimal_test

import (
	"errors"
	"fmt"
	"math/big"

	"github.com/ledgerworks/ledger/decimal"
)

// This file holds math/big reference implementations. They are written
// independently of the package (big.Int division and comparison, not 128-bit
// tricks), so that agreement between the two is evidence of correctness.

var (
	bigOne      = big.NewInt(1)
	bigTen      = big.NewInt(10)
	bigMinInt64 = new(big.Int).Lsh(big.NewInt(-1), 63)
	bigMaxInt64 = new(big.Int).Sub(new(big.Int).Lsh(bigOne, 63), bigOne)
)

// referenceQuotient returns numerator/denominator rounded by mode.
func referenceQuotient(numerator, denominator *big.Int, mode decimal.RoundingMode) *big.Int {
	quotient, remainder := new(big.Int).QuoRem(numerator, denominator, new(big.Int))
	if remainder.Sign() == 0 {
		return quotient
	}
	// Compare |2·remainder| with |denominator|.
	twice := new(big.Int).Abs(remainder)
	twice.Lsh(twice, 1)
	half := twice.Cmp(new(big.Int).Abs(denominator))
	var away bool
	switch mode {
	case decimal.HalfEven:
		away = half > 0 || half == 0 && quotient.Bit(0) == 1
	case decimal.HalfUp:
		away = half >= 0
	case decimal.Down:
		away = false
	default:
		panic(fmt.Sprintf("reference: unknown mode %d", mode))
	}
	if away {
		if numerator.Sign()*denominator.Sign() < 0 {
			quotient.Sub(quotient, bigOne)
		} else {
			quotient.Add(quotient, bigOne)
		}
	}
	return quotient
}

// referenceInt64 converts x, or reports ErrOverflow.
func referenceInt64(x *big.Int) (int64, error) {
	if x.Cmp(bigMinInt64) < 0 || x.Cmp(bigMaxInt64) > 0 {
		return 0, decimal.ErrOverflow
	}
	return x.Int64(), nil
}

func referencePower10(n int) *big.Int {
	return new(big.Int).Exp(bigTen, big.NewInt(int64(n)), nil)
}

// referenceMulDiv is MulDiv in math/big.
func referenceMulDiv(a, b, c int64, mode decimal.RoundingMode) (int64, error) {
	if c == 0 {
		return 0, decimal.ErrDivisionByZero
	}
	product := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
	return referenceInt64(referenceQuotient(product, big.NewInt(c), mode))
}

// referenceMulRound is MulRound in math/big: a×b×10^scale / 10^(sa+sb).
func referenceMulRound(a, b decimal.Decimal, scale uint8, mode decimal.RoundingMode) (int64, error) {
	product := new(big.Int).Mul(big.NewInt(a.Units()), big.NewInt(b.Units()))
	product.Mul(product, referencePower10(int(scale)))
	divisor := referencePower10(int(a.Scale()) + int(b.Scale()))
	return referenceInt64(referenceQuotient(product, divisor, mode))
}

// referenceRescale is Rescale in math/big.
func referenceRescale(d decimal.Decimal, to uint8, mode decimal.RoundingMode) (int64, error) {
	numerator := new(big.Int).Mul(big.NewInt(d.Units()), referencePower10(int(to)))
	return referenceInt64(referenceQuotient(numerator, referencePower10(int(d.Scale())), mode))
}

// referenceParse parses text with big.Rat (which accepts a superset of the
// grammar) and returns the units at scale, or the error Parse should report
// for syntactically valid text.
func referenceParse(text string, scale uint8) (int64, error) {
	value, ok := new(big.Rat).SetString(text)
	if !ok {
		return 0, errors.New("reference: big.Rat rejects the text")
	}
	value.Mul(value, new(big.Rat).SetInt(referencePower10(int(scale))))
	if !value.IsInt() {
		return 0, decimal.ErrScale
	}
	return referenceInt64(value.Num())
}

// sameResult reports whether a package result and a reference result agree:
// the same value, or the same sentinel error.
func sameResult(got int64, gotErr error, want int64, wantErr error) bool {
	if gotErr != nil || wantErr != nil {
		return errors.Is(gotErr, wantErr) && wantErr != nil
	}
	return got == want
}
