package decimal_test

import (
	"errors"
	"math"
	"testing"

	"github.com/ledgerworks/ledger/decimal"
)

func TestMulDiv(t *testing.T) {
	overflow := [3]error{decimal.ErrOverflow, decimal.ErrOverflow, decimal.ErrOverflow}
	tests := []struct {
		a, b, c int64
		want    [len(modes)]int64 // HalfEven, HalfUp, Down
		err     [len(modes)]error
	}{
		{a: 10, b: 3, c: 4, want: [3]int64{8, 8, 7}},        // 7.5
		{a: 10, b: 5, c: 4, want: [3]int64{12, 13, 12}},     // 12.5
		{a: -10, b: 5, c: 4, want: [3]int64{-12, -13, -12}}, // -12.5
		{a: 10, b: -5, c: 4, want: [3]int64{-12, -13, -12}},
		{a: 10, b: 5, c: -4, want: [3]int64{-12, -13, -12}},
		{a: -10, b: -5, c: -4, want: [3]int64{-12, -13, -12}},
		{a: -10, b: -5, c: 4, want: [3]int64{12, 13, 12}},
		{a: 7, b: 1, c: 3, want: [3]int64{2, 2, 2}},     // 2.33
		{a: 8, b: 1, c: 3, want: [3]int64{3, 3, 2}},     // 2.67
		{a: -8, b: 1, c: 3, want: [3]int64{-3, -3, -2}}, // -2.67
		{a: 0, b: math.MinInt64, c: -1, want: [3]int64{0, 0, 0}},
		{a: 6, b: 7, c: 1, want: [3]int64{42, 42, 42}},
		// Products far beyond int64 whose quotients fit.
		{a: math.MaxInt64, b: math.MaxInt64, c: math.MaxInt64, want: [3]int64{math.MaxInt64, math.MaxInt64, math.MaxInt64}},
		{a: math.MinInt64, b: math.MinInt64, c: math.MinInt64, want: [3]int64{math.MinInt64, math.MinInt64, math.MinInt64}},
		{a: math.MaxInt64, b: 3, c: 4, want: [3]int64{6917529027641081855, 6917529027641081855, 6917529027641081855}},
		{a: math.MaxInt64, b: 2, c: 2, want: [3]int64{math.MaxInt64, math.MaxInt64, math.MaxInt64}},
		{a: math.MinInt64, b: 1, c: 1, want: [3]int64{math.MinInt64, math.MinInt64, math.MinInt64}},
		{a: math.MinInt64, b: -1, c: -1, want: [3]int64{math.MinInt64, math.MinInt64, math.MinInt64}},
		{a: math.MinInt64, b: 1, c: -1, err: overflow},
		{a: math.MinInt64, b: -1, c: 1, err: overflow},
		{a: math.MaxInt64, b: 2, c: 1, err: overflow},
		{a: math.MaxInt64, b: math.MaxInt64, c: 1, err: overflow}, // quotient beyond 64 bits
		{a: math.MinInt64, b: math.MinInt64, c: 2, err: overflow}, // 2^125
		// (2^64-1)/2 = 2^63 - 0.5: rounding decides between MaxInt64 and
		// overflow, and for a negative result between MinInt64 and its
		// neighbour.
		{a: 65535, b: 281479271743489, c: 2, want: [3]int64{0, 0, math.MaxInt64},
			err: [3]error{decimal.ErrOverflow, decimal.ErrOverflow, nil}},
		{a: 65535, b: 281479271743489, c: -2, want: [3]int64{math.MinInt64, math.MinInt64, math.MinInt64 + 1}},
		// (2^64-1) + 1/2 and (2^64-1) + 4/7: the truncated quotient is the
		// largest uint64, so rounding it up must not wrap to zero.
		{a: 31, b: 1190112520884487201, c: 2, err: overflow},
		{a: 83, b: 1555749500192371823, c: 7, err: overflow},
		{a: -83, b: 1555749500192371823, c: 7, err: overflow},
	}
	for _, test := range tests {
		for i, mode := range modes {
			got, err := decimal.MulDiv(test.a, test.b, test.c, mode)
			if test.err[i] != nil {
				if !errors.Is(err, test.err[i]) || got != 0 {
					t.Errorf("MulDiv(%d, %d, %d, %v) = %d, %v; want error %v", test.a, test.b, test.c, mode, got, err, test.err[i])
				}
			} else if err != nil || got != test.want[i] {
				t.Errorf("MulDiv(%d, %d, %d, %v) = %d, %v; want %d", test.a, test.b, test.c, mode, got, err, test.want[i])
			}
			// The hand-written expectation must agree with the reference too,
			// so that a wrong table cannot hide a wrong implementation.
			want, wantErr := referenceMulDiv(test.a, test.b, test.c, mode)
			if !sameResult(got, err, want, wantErr) {
				t.Errorf("MulDiv(%d, %d, %d, %v) = %d, %v; reference %d, %v", test.a, test.b, test.c, mode, got, err, want, wantErr)
			}
		}
	}
}

func TestMulDivByZero(t *testing.T) {
	for _, mode := range modes {
		if got, err := decimal.MulDiv(5, 7, 0, mode); !errors.Is(err, decimal.ErrDivisionByZero) || got != 0 {
			t.Errorf("MulDiv(5, 7, 0, %v) = %d, %v", mode, got, err)
		}
	}
}

func TestMulRound(t *testing.T) {
	d := decimal.MustNew
	tests := []struct {
		a, b  decimal.Decimal
		scale uint8
		want  [len(modes)]int64 // HalfEven, HalfUp, Down; units at scale
		err   error
	}{
		{a: d(3125, 3), b: d(1999, 2), scale: 2, want: [3]int64{6247, 6247, 6246}},             // 62.46875
		{a: d(3125, 3), b: d(199, 2), scale: 2, want: [3]int64{622, 622, 621}},                 // 6.21875
		{a: d(5, 1), b: d(25, 2), scale: 2, want: [3]int64{12, 13, 12}},                        // 0.125
		{a: d(-5, 1), b: d(25, 2), scale: 2, want: [3]int64{-12, -13, -12}},                    // -0.125
		{a: d(5, 1), b: d(-35, 2), scale: 2, want: [3]int64{-18, -18, -17}},                    // -0.175
		{a: d(2, 0), b: d(3, 0), scale: 2, want: [3]int64{600, 600, 600}},                      // exact, upscaled
		{a: d(-2, 1), b: d(3, 0), scale: 1, want: [3]int64{-6, -6, -6}},                        // exact, same scale
		{a: d(1e18, 18), b: d(1e18, 18), scale: 18, want: [3]int64{1e18, 1e18, 1e18}},          // 36 places to 18
		{a: d(1e18, 18), b: d(1e18, 18), scale: 0, want: [3]int64{1, 1, 1}},                    // 36 places to 0
		{a: d(5e17, 18), b: d(5e18, 18), scale: 0, want: [3]int64{2, 3, 2}},                    // 2.5
		{a: d(7e17, 18), b: d(5e18, 18), scale: 0, want: [3]int64{4, 4, 3}},                    // 3.5
		{a: d(500_000_000_000_000_001, 18), b: d(5e18, 18), scale: 0, want: [3]int64{3, 3, 2}}, // 2.5 + 5e-18
		{a: d(499_999_999_999_999_999, 18), b: d(5e18, 18), scale: 0, want: [3]int64{2, 2, 2}}, // 2.5 - 5e-18
		{a: d(-500_000_000_000_000_001, 18), b: d(5e18, 18), scale: 0, want: [3]int64{-3, -3, -2}},
		{a: d(math.MaxInt64, 18), b: d(math.MaxInt64, 18), scale: 0, want: [3]int64{85, 85, 85}},
		{a: d(math.MinInt64, 18), b: d(math.MinInt64, 18), scale: 17, want: [3]int64{8507059173023461587, 8507059173023461587, 8507059173023461586}},
		{a: d(math.MinInt64, 18), b: d(math.MinInt64, 18), scale: 18, err: decimal.ErrOverflow}, // 85.07...
		{a: d(math.MaxInt64, 0), b: d(1, 0), scale: 1, err: decimal.ErrOverflow},
		{a: d(math.MaxInt64, 0), b: d(2, 0), scale: 0, err: decimal.ErrOverflow},
		{a: d(math.MinInt64, 0), b: d(1, 0), scale: 0, want: [3]int64{math.MinInt64, math.MinInt64, math.MinInt64}},
		{a: d(math.MinInt64, 0), b: d(-1, 0), scale: 0, err: decimal.ErrOverflow},
		{a: d(1, 0), b: d(1, 0), scale: decimal.ScaleMax + 1, err: decimal.ErrScaleRange},
	}
	for _, test := range tests {
		for i, mode := range modes {
			got, err := decimal.MulRound(test.a, test.b, test.scale, mode)
			if test.err != nil {
				if !errors.Is(err, test.err) {
					t.Errorf("MulRound(%v, %v, %d, %v) = %v, %v; want error %v", test.a, test.b, test.scale, mode, got, err, test.err)
				}
			} else if err != nil || got.Units() != test.want[i] || got.Scale() != test.scale {
				t.Errorf("MulRound(%v, %v, %d, %v) = %v, %v; want units %d", test.a, test.b, test.scale, mode, got, err, test.want[i])
			}
			if test.scale > decimal.ScaleMax {
				continue
			}
			want, wantErr := referenceMulRound(test.a, test.b, test.scale, mode)
			if !sameResult(got.Units(), err, want, wantErr) {
				t.Errorf("MulRound(%v, %v, %d, %v) = %v, %v; reference %d, %v", test.a, test.b, test.scale, mode, got, err, want, wantErr)
			}
		}
	}
}

func TestMulRatio(t *testing.T) {
	layerValue := decimal.MustNew(10000, 2)   // 100.00
	layerQuantity := decimal.MustNew(3000, 3) // 3.000
	tests := []struct {
		issued decimal.Decimal
		want   string
	}{
		{decimal.MustNew(1000, 3), "33.33"},
		{decimal.MustNew(2000, 3), "66.67"},
		{decimal.MustNew(3000, 3), "100.00"},
		{decimal.MustNew(0, 3), "0.00"},
		{decimal.MustNew(-1500, 3), "-50.00"},
	}
	for _, test := range tests {
		got, err := layerValue.MulRatio(test.issued, layerQuantity, decimal.HalfEven)
		if err != nil || got.String() != test.want || got.Scale() != 2 {
			t.Errorf("MulRatio(%v / %v) = %v, %v; want %s", test.issued, layerQuantity, got, err, test.want)
		}
	}
	if _, err := layerValue.MulRatio(layerQuantity, decimal.MustNew(0, 3), decimal.HalfEven); !errors.Is(err, decimal.ErrDivisionByZero) {
		t.Errorf("MulRatio by zero: %v", err)
	}
	big := decimal.MustNew(math.MaxInt64, 2)
	if _, err := big.MulRatio(decimal.MustNew(2, 0), decimal.MustNew(1, 0), decimal.HalfEven); !errors.Is(err, decimal.ErrOverflow) {
		t.Errorf("MulRatio overflow: %v", err)
	}
}
