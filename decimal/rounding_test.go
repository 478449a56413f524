package decimal_test

import (
	"errors"
	"math"
	"testing"

	"github.com/ledgerworks/ledger/decimal"
)

// modes lists every rounding mode in the order of the want arrays below.
var modes = [...]decimal.RoundingMode{decimal.HalfEven, decimal.HalfUp, decimal.Down}

func TestRescaleDown(t *testing.T) {
	tests := []struct {
		units    int64
		from, to uint8
		want     [len(modes)]int64 // HalfEven, HalfUp, Down
	}{
		{125, 3, 2, [3]int64{12, 13, 12}}, // tie, even neighbour below
		{135, 3, 2, [3]int64{14, 14, 13}}, // tie, even neighbour above
		{129, 3, 2, [3]int64{13, 13, 12}}, // above half
		{121, 3, 2, [3]int64{12, 12, 12}}, // below half
		{120, 3, 2, [3]int64{12, 12, 12}}, // exact
		{5, 3, 2, [3]int64{0, 1, 0}},      // tie at zero
		{15, 3, 2, [3]int64{2, 2, 1}},     // tie, odd
		{-125, 3, 2, [3]int64{-12, -13, -12}},
		{-135, 3, 2, [3]int64{-14, -14, -13}},
		{-129, 3, 2, [3]int64{-13, -13, -12}},
		{-121, 3, 2, [3]int64{-12, -12, -12}},
		{-5, 3, 2, [3]int64{0, -1, 0}},
		{1249, 3, 1, [3]int64{12, 12, 12}}, // 1.249: no double rounding via 1.25
		{1250, 3, 1, [3]int64{12, 13, 12}},
		{1251, 3, 1, [3]int64{13, 13, 12}},
		{-1251, 3, 1, [3]int64{-13, -13, -12}},
		{math.MaxInt64, 3, 2, [3]int64{922337203685477581, 922337203685477581, 922337203685477580}},
		{math.MinInt64, 3, 2, [3]int64{-922337203685477581, -922337203685477581, -922337203685477580}},
		{math.MaxInt64, 18, 0, [3]int64{9, 9, 9}},
		{math.MinInt64, 18, 0, [3]int64{-9, -9, -9}},
		{500_000_000_000_000_000, 18, 0, [3]int64{0, 1, 0}},
		{1_500_000_000_000_000_000, 18, 0, [3]int64{2, 2, 1}},
		{-2_500_000_000_000_000_000, 18, 0, [3]int64{-2, -3, -2}},
		{-500_000_000_000_000_001, 18, 0, [3]int64{-1, -1, 0}},
	}
	for _, test := range tests {
		for i, mode := range modes {
			got, err := decimal.MustNew(test.units, test.from).Rescale(test.to, mode)
			if err != nil || got != decimal.MustNew(test.want[i], test.to) {
				t.Errorf("Rescale(%v, %d, %v) = %v, %v; want units %d",
					decimal.MustNew(test.units, test.from), test.to, mode, got, err, test.want[i])
			}
		}
	}
}

func TestRescaleUp(t *testing.T) {
	tests := []struct {
		units    int64
		from, to uint8
		want     int64
		err      error
	}{
		{1, 0, 2, 100, nil},
		{-35, 1, 3, -3500, nil},
		{0, 0, 18, 0, nil},
		{9, 0, 18, 9_000_000_000_000_000_000, nil},
		{-9, 0, 18, -9_000_000_000_000_000_000, nil},
		{10, 0, 18, 0, decimal.ErrOverflow},
		{-10, 0, 18, 0, decimal.ErrOverflow},
		{math.MaxInt64, 2, 2, math.MaxInt64, nil},
		{math.MinInt64, 5, 5, math.MinInt64, nil},
		{math.MaxInt64, 0, 1, 0, decimal.ErrOverflow},
		{math.MinInt64, 0, 1, 0, decimal.ErrOverflow},
		{922337203685477580, 0, 1, 9223372036854775800, nil},
		{922337203685477581, 0, 1, 0, decimal.ErrOverflow},
		{-922337203685477580, 0, 1, -9223372036854775800, nil},
		{-922337203685477581, 0, 1, 0, decimal.ErrOverflow},
		{1, 0, decimal.ScaleMax + 1, 0, decimal.ErrScaleRange},
	}
	for _, test := range tests {
		for _, mode := range modes {
			got, err := decimal.MustNew(test.units, test.from).Rescale(test.to, mode)
			if test.err != nil {
				if !errors.Is(err, test.err) {
					t.Errorf("Rescale(%d@%d, %d) = %v, %v; want error %v", test.units, test.from, test.to, got, err, test.err)
				}
				continue
			}
			if err != nil || got.Units() != test.want || got.Scale() != test.to {
				t.Errorf("Rescale(%d@%d, %d) = %v, %v; want units %d", test.units, test.from, test.to, got, err, test.want)
			}
		}
	}
}

func TestRoundingModeInvalid(t *testing.T) {
	invalid := decimal.RoundingMode(3)
	if got := invalid.String(); got != "RoundingMode(3)" {
		t.Errorf("String = %q", got)
	}
	d := decimal.MustNew(125, 3)
	if _, err := d.Rescale(2, invalid); !errors.Is(err, decimal.ErrRoundingMode) {
		t.Errorf("Rescale: %v", err)
	}
	// Even an exact rescale refuses an unknown mode: the mode is checked
	// before the data, so a bad configuration fails on every input.
	if _, err := d.Rescale(3, invalid); !errors.Is(err, decimal.ErrRoundingMode) {
		t.Errorf("Rescale up: %v", err)
	}
	if _, err := decimal.MulDiv(1, 1, 1, invalid); !errors.Is(err, decimal.ErrRoundingMode) {
		t.Errorf("MulDiv: %v", err)
	}
	if _, err := decimal.MulRound(d, d, 2, invalid); !errors.Is(err, decimal.ErrRoundingMode) {
		t.Errorf("MulRound: %v", err)
	}
	if _, err := d.MulRatio(d, d, invalid); !errors.Is(err, decimal.ErrRoundingMode) {
		t.Errorf("MulRatio: %v", err)
	}
}

func TestRoundingModeString(t *testing.T) {
	want := [...]string{"half-even", "half-up", "down"}
	for i, mode := range modes {
		if got := mode.String(); got != want[i] {
			t.Errorf("mode %d String = %q, want %q", mode, got, want[i])
		}
	}
	var zero decimal.RoundingMode
	if zero != decimal.HalfEven {
		t.Error("the zero RoundingMode is not HalfEven")
	}
}
