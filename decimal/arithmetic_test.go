package decimal_test

import (
	"errors"
	"math"
	"testing"

	"github.com/ledgerworks/ledger/decimal"
)

func TestNew(t *testing.T) {
	d, err := decimal.New(-1250, 2)
	if err != nil || d.Units() != -1250 || d.Scale() != 2 || d.Sign() != -1 || d.IsZero() {
		t.Fatalf("New(-1250, 2) = %v (units %d scale %d sign %d zero %t), %v",
			d, d.Units(), d.Scale(), d.Sign(), d.IsZero(), err)
	}
	if _, err := decimal.New(1, decimal.ScaleMax); err != nil {
		t.Fatalf("New at ScaleMax: %v", err)
	}
	if _, err := decimal.New(1, decimal.ScaleMax+1); !errors.Is(err, decimal.ErrScaleRange) {
		t.Fatalf("New above ScaleMax: %v, want ErrScaleRange", err)
	}
	var zero decimal.Decimal
	if !zero.IsZero() || zero.Sign() != 0 || zero.Scale() != 0 || zero.String() != "0" {
		t.Fatalf("zero value is %q", zero)
	}
	if decimal.MustNew(7, 0).Sign() != 1 {
		t.Fatal("Sign of 7 is not 1")
	}
}

func TestMustNewPanics(t *testing.T) {
	defer func() {
		r := recover()
		if err, ok := r.(error); !ok || !errors.Is(err, decimal.ErrScaleRange) {
			t.Fatalf("MustNew above ScaleMax panicked with %v, want ErrScaleRange", r)
		}
	}()
	decimal.MustNew(1, decimal.ScaleMax+1)
}

// binaryTest is a case for a binary operation on units at scale 2; want is
// ignored when err is set.
type binaryTest struct {
	a, b, want int64
	err        error
}

func TestAdd(t *testing.T) {
	tests := []binaryTest{
		{1, 2, 3, nil},
		{-150, 50, -100, nil},
		{math.MaxInt64, 0, math.MaxInt64, nil},
		{math.MaxInt64 - 1, 1, math.MaxInt64, nil},
		{math.MaxInt64, 1, 0, decimal.ErrOverflow},
		{math.MaxInt64, math.MaxInt64, 0, decimal.ErrOverflow},
		{math.MinInt64 + 1, -1, math.MinInt64, nil},
		{math.MinInt64, -1, 0, decimal.ErrOverflow},
		{math.MinInt64, math.MinInt64, 0, decimal.ErrOverflow},
		{math.MinInt64, math.MaxInt64, -1, nil},
		{math.MaxInt64, math.MinInt64, -1, nil},
	}
	for _, test := range tests {
		got, err := decimal.MustNew(test.a, 2).Add(decimal.MustNew(test.b, 2))
		checkBinary(t, "Add", test, got, err)
	}
}

func TestSub(t *testing.T) {
	tests := []binaryTest{
		{3, 2, 1, nil},
		{-150, 50, -200, nil},
		{0, math.MaxInt64, -math.MaxInt64, nil},
		{-1, math.MaxInt64, math.MinInt64, nil},
		{-2, math.MaxInt64, 0, decimal.ErrOverflow},
		{0, math.MinInt64, 0, decimal.ErrOverflow},
		{-1, math.MinInt64, math.MaxInt64, nil},
		{math.MaxInt64, -1, 0, decimal.ErrOverflow},
		{math.MaxInt64, math.MaxInt64, 0, nil},
		{math.MinInt64, math.MinInt64, 0, nil},
		{math.MinInt64, 1, 0, decimal.ErrOverflow},
		{math.MaxInt64, math.MinInt64, 0, decimal.ErrOverflow},
	}
	for _, test := range tests {
		got, err := decimal.MustNew(test.a, 2).Sub(decimal.MustNew(test.b, 2))
		checkBinary(t, "Sub", test, got, err)
	}
}

func checkBinary(t *testing.T, name string, test binaryTest, got decimal.Decimal, err error) {
	t.Helper()
	if test.err != nil {
		if !errors.Is(err, test.err) || got != (decimal.Decimal{}) {
			t.Errorf("%s(%d, %d) = %v, %v; want error %v", name, test.a, test.b, got, err, test.err)
		}
		return
	}
	if err != nil || got != decimal.MustNew(test.want, 2) {
		t.Errorf("%s(%d, %d) = %v, %v; want units %d", name, test.a, test.b, got, err, test.want)
	}
}

func TestScaleMismatch(t *testing.T) {
	a, b := decimal.MustNew(1, 2), decimal.MustNew(1, 3)
	if _, err := a.Add(b); !errors.Is(err, decimal.ErrScaleMismatch) {
		t.Errorf("Add: %v", err)
	}
	if _, err := a.Sub(b); !errors.Is(err, decimal.ErrScaleMismatch) {
		t.Errorf("Sub: %v", err)
	}
	if _, err := a.Cmp(b); !errors.Is(err, decimal.ErrScaleMismatch) {
		t.Errorf("Cmp: %v", err)
	}
	if _, err := decimal.Sum(2, a, b); !errors.Is(err, decimal.ErrScaleMismatch) {
		t.Errorf("Sum: %v", err)
	}
	if _, err := a.MulRatio(a, b, decimal.HalfEven); !errors.Is(err, decimal.ErrScaleMismatch) {
		t.Errorf("MulRatio: %v", err)
	}
}

func TestNegAbs(t *testing.T) {
	tests := []struct {
		units, negated, absolute int64
	}{
		{0, 0, 0},
		{5, -5, 5},
		{-5, 5, 5},
		{math.MaxInt64, -math.MaxInt64, math.MaxInt64},
		{math.MinInt64 + 1, math.MaxInt64, math.MaxInt64},
	}
	for _, test := range tests {
		d := decimal.MustNew(test.units, 3)
		if got, err := d.Neg(); err != nil || got != decimal.MustNew(test.negated, 3) {
			t.Errorf("Neg(%d) = %v, %v; want units %d", test.units, got, err, test.negated)
		}
		if got, err := d.Abs(); err != nil || got != decimal.MustNew(test.absolute, 3) {
			t.Errorf("Abs(%d) = %v, %v; want units %d", test.units, got, err, test.absolute)
		}
	}
	minimum := decimal.MustNew(math.MinInt64, 3)
	if got, err := minimum.Neg(); !errors.Is(err, decimal.ErrOverflow) {
		t.Errorf("Neg(MinInt64) = %v, %v; want ErrOverflow", got, err)
	}
	if got, err := minimum.Abs(); !errors.Is(err, decimal.ErrOverflow) {
		t.Errorf("Abs(MinInt64) = %v, %v; want ErrOverflow", got, err)
	}
}

func TestCmp(t *testing.T) {
	tests := []struct {
		a, b int64
		want int
	}{
		{1, 2, -1},
		{2, 1, 1},
		{7, 7, 0},
		{math.MinInt64, math.MaxInt64, -1},
		{math.MaxInt64, math.MinInt64, 1},
		{-1, 0, -1},
	}
	for _, test := range tests {
		got, err := decimal.MustNew(test.a, 4).Cmp(decimal.MustNew(test.b, 4))
		if err != nil || got != test.want {
			t.Errorf("Cmp(%d, %d) = %d, %v; want %d", test.a, test.b, got, err, test.want)
		}
	}
}

func TestSum(t *testing.T) {
	d := func(units int64) decimal.Decimal { return decimal.MustNew(units, 2) }
	tests := []struct {
		values []decimal.Decimal
		want   int64
		err    error
	}{
		{nil, 0, nil},
		{[]decimal.Decimal{d(5)}, 5, nil},
		{[]decimal.Decimal{d(100), d(-250), d(25)}, -125, nil},
		// The running total leaves the int64 range and comes back: a chain
		// of Add would fail here, Sum must not.
		{[]decimal.Decimal{d(math.MaxInt64), d(math.MaxInt64), d(math.MinInt64), d(math.MinInt64)}, -2, nil},
		{[]decimal.Decimal{d(math.MinInt64), d(-1), d(1)}, math.MinInt64, nil},
		{[]decimal.Decimal{d(math.MaxInt64), d(1)}, 0, decimal.ErrOverflow},
		{[]decimal.Decimal{d(math.MinInt64), d(-1)}, 0, decimal.ErrOverflow},
		{[]decimal.Decimal{d(math.MinInt64), d(math.MinInt64)}, 0, decimal.ErrOverflow},
	}
	for i, test := range tests {
		got, err := decimal.Sum(2, test.values...)
		if test.err != nil {
			if !errors.Is(err, test.err) {
				t.Errorf("case %d: Sum = %v, %v; want error %v", i, got, err, test.err)
			}
			continue
		}
		if err != nil || got != d(test.want) {
			t.Errorf("case %d: Sum = %v, %v; want units %d", i, got, err, test.want)
		}
	}
	if _, err := decimal.Sum(decimal.ScaleMax + 1); !errors.Is(err, decimal.ErrScaleRange) {
		t.Errorf("Sum above ScaleMax: %v", err)
	}
}
