package decimal_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/decimal"
)

// The seed corpora live in testdata/fuzz/<FuzzName>/ and run with every
// go test. To search further:
//
//	go test -run='^$' -fuzz=FuzzParse -fuzztime=30s ./decimal

// inGrammar reports whether text matches the documented syntax of Parse,
// [+-]?[0-9]+(\.[0-9]+)?, written independently of it. It avoids regexp: with
// a regexp here, minimizing new inputs stalled the fuzzer for whole runs.
func inGrammar(text string) bool {
	if strings.HasPrefix(text, "+") || strings.HasPrefix(text, "-") {
		text = text[1:]
	}
	integer, fraction, hasPoint := strings.Cut(text, ".")
	isDigits := func(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }
	return isDigits(integer) && (!hasPoint || isDigits(fraction))
}

var sentinels = []error{
	decimal.ErrOverflow, decimal.ErrDivisionByZero, decimal.ErrScaleRange, decimal.ErrScaleMismatch,
	decimal.ErrScale, decimal.ErrSyntax, decimal.ErrTextLength, decimal.ErrRoundingMode,
}

func isSentinel(err error) bool {
	for _, sentinel := range sentinels {
		if errors.Is(err, sentinel) {
			return true
		}
	}
	return false
}

// FuzzParse checks that Parse never panics, fails only with a sentinel,
// accepts exactly the documented grammar, agrees with big.Rat on the value,
// and that every accepted value round-trips through String.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, text string, scale uint8) {
		d, err := decimal.Parse(text, scale)
		switch {
		case len(text) > decimal.TextLengthMax:
			if !errors.Is(err, decimal.ErrTextLength) {
				t.Fatalf("Parse of %d bytes: %v, want ErrTextLength", len(text), err)
			}
			return
		case scale > decimal.ScaleMax:
			if !errors.Is(err, decimal.ErrScaleRange) {
				t.Fatalf("Parse(%q, %d): %v, want ErrScaleRange", text, scale, err)
			}
			return
		case !inGrammar(text):
			if !errors.Is(err, decimal.ErrSyntax) {
				t.Fatalf("Parse(%q, %d) = %v, %v; want ErrSyntax", text, scale, d, err)
			}
			return
		}
		if err != nil && !isSentinel(err) {
			t.Fatalf("Parse(%q, %d): %v is not a sentinel error", text, scale, err)
		}
		want, wantErr := referenceParse(text, scale)
		if !sameResult(d.Units(), err, want, wantErr) {
			t.Fatalf("Parse(%q, %d) = %v, %v; reference %d, %v", text, scale, d, err, want, wantErr)
		}
		if err != nil {
			return
		}
		back, err := decimal.Parse(d.String(), scale)
		if err != nil || back != d || d.Scale() != scale {
			t.Fatalf("Parse(%q, %d) = %v, but Parse(%q) = %v, %v", text, scale, d, d.String(), back, err)
		}
	})
}

// FuzzMulDiv checks MulDiv against the math/big reference for any inputs,
// including rounding modes that do not exist.
func FuzzMulDiv(f *testing.F) {
	f.Fuzz(func(t *testing.T, a, b, c int64, modeValue uint8) {
		mode := decimal.RoundingMode(modeValue)
		got, err := decimal.MulDiv(a, b, c, mode)
		if modeValue >= uint8(len(modes)) {
			if !errors.Is(err, decimal.ErrRoundingMode) {
				t.Fatalf("MulDiv with mode %d: %d, %v; want ErrRoundingMode", modeValue, got, err)
			}
			return
		}
		want, wantErr := referenceMulDiv(a, b, c, mode)
		if !sameResult(got, err, want, wantErr) {
			t.Fatalf("MulDiv(%d, %d, %d, %v) = %d, %v; reference %d, %v", a, b, c, mode, got, err, want, wantErr)
		}
	})
}

// FuzzMulRound checks MulRound, whose products of up to 36 decimal places
// take the two-step division path, against the math/big reference.
func FuzzMulRound(f *testing.F) {
	f.Fuzz(func(t *testing.T, aUnits int64, aScale uint8, bUnits int64, bScale, scale, modeValue uint8) {
		a, err := decimal.New(aUnits, aScale%(decimal.ScaleMax+1))
		if err != nil {
			t.Fatal(err)
		}
		b, err := decimal.New(bUnits, bScale%(decimal.ScaleMax+1))
		if err != nil {
			t.Fatal(err)
		}
		mode := decimal.RoundingMode(modeValue % uint8(len(modes)))
		got, err := decimal.MulRound(a, b, scale, mode)
		if scale > decimal.ScaleMax {
			if !errors.Is(err, decimal.ErrScaleRange) {
				t.Fatalf("MulRound at scale %d: %v, %v; want ErrScaleRange", scale, got, err)
			}
			return
		}
		want, wantErr := referenceMulRound(a, b, scale, mode)
		if !sameResult(got.Units(), err, want, wantErr) || err == nil && got.Scale() != scale {
			t.Fatalf("MulRound(%v, %v, %d, %v) = %v, %v; reference %d, %v", a, b, scale, mode, got, err, want, wantErr)
		}
	})
}
