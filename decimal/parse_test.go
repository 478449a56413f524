package decimal_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/decimal"
)

func TestParseAccepts(t *testing.T) {
	tests := []struct {
		text  string
		scale uint8
		units int64
	}{
		{"0", 0, 0},
		{"12", 0, 12},
		{"12", 2, 1200},
		{"+7", 0, 7},
		{"-3.5", 1, -35},
		{"-3.5", 3, -3500},
		{"0.125", 3, 125},
		{"1.500", 2, 150},
		{"1.5000000000000000000000000000", 1, 15},
		{"-0", 0, 0},
		{"-0.00", 2, 0},
		{"+0.0", 1, 0},
		{"007", 0, 7},
		{"0000.10", 2, 10},
		{"9223372036854775807", 0, math.MaxInt64},
		{"-9223372036854775808", 0, math.MinInt64},
		{"92233720368547758.07", 2, math.MaxInt64},
		{"-92233720368547758.08", 2, math.MinInt64},
		{"9.223372036854775807", 18, math.MaxInt64},
		{"-9.223372036854775808", 18, math.MinInt64},
		{"0.000000000000000001", 18, 1},
		{"1", 18, 1_000_000_000_000_000_000},
		{"-9", 18, -9_000_000_000_000_000_000},
		{strings.Repeat("0", decimal.TextLengthMax-1) + "1", 0, 1},
	}
	for _, test := range tests {
		got, err := decimal.Parse(test.text, test.scale)
		if err != nil {
			t.Errorf("Parse(%q, %d): unexpected error %v", test.text, test.scale, err)
			continue
		}
		if got.Units() != test.units || got.Scale() != test.scale {
			t.Errorf("Parse(%q, %d) = units %d scale %d, want units %d scale %d",
				test.text, test.scale, got.Units(), got.Scale(), test.units, test.scale)
		}
	}
}

func TestParseRejects(t *testing.T) {
	tests := []struct {
		text  string
		scale uint8
		want  error
	}{
		{"", 2, decimal.ErrSyntax},
		{"+", 0, decimal.ErrSyntax},
		{"-", 0, decimal.ErrSyntax},
		{"--1", 0, decimal.ErrSyntax},
		{"+-1", 0, decimal.ErrSyntax},
		{" 1", 0, decimal.ErrSyntax},
		{"1 ", 0, decimal.ErrSyntax},
		{"1\n", 0, decimal.ErrSyntax},
		{"\t1", 0, decimal.ErrSyntax},
		{"- 1", 0, decimal.ErrSyntax},
		{"1.", 2, decimal.ErrSyntax},
		{".5", 2, decimal.ErrSyntax},
		{"-.5", 2, decimal.ErrSyntax},
		{".", 2, decimal.ErrSyntax},
		{"1..2", 2, decimal.ErrSyntax},
		{"1.2.3", 2, decimal.ErrSyntax},
		{"1e3", 0, decimal.ErrSyntax},
		{"1E3", 0, decimal.ErrSyntax},
		{"1.5e-1", 2, decimal.ErrSyntax},
		{"1,000", 0, decimal.ErrSyntax},
		{"1,5", 1, decimal.ErrSyntax},
		{"1_000", 0, decimal.ErrSyntax},
		{"1'000", 0, decimal.ErrSyntax},
		{"0x10", 0, decimal.ErrSyntax},
		{"12abc", 0, decimal.ErrSyntax},
		{"abc", 0, decimal.ErrSyntax},
		{"1.5x", 0, decimal.ErrSyntax}, // syntax is reported before scale
		{"NaN", 0, decimal.ErrSyntax},
		{"Inf", 0, decimal.ErrSyntax},
		{"1/2", 0, decimal.ErrSyntax},
		{"١٢", 0, decimal.ErrSyntax},         // Arabic-Indic digits
		{"１２", 0, decimal.ErrSyntax},         // fullwidth digits
		{"1\u00a0000", 0, decimal.ErrSyntax}, // no-break space
		{"\x00", 0, decimal.ErrSyntax},
		{"1.5", 0, decimal.ErrScale},
		{"0.125", 2, decimal.ErrScale},
		{"1.505", 2, decimal.ErrScale},
		{"-0.001", 2, decimal.ErrScale},
		{"0.0000000000000000001", 18, decimal.ErrScale},
		{"9223372036854775808", 0, decimal.ErrOverflow},
		{"-9223372036854775809", 0, decimal.ErrOverflow},
		{"92233720368547758.08", 2, decimal.ErrOverflow},
		{"-92233720368547758.09", 2, decimal.ErrOverflow},
		{"10", 18, decimal.ErrOverflow},
		{"-10", 18, decimal.ErrOverflow},
		{"99999999999999999999", 0, decimal.ErrOverflow},
		{"18446744073709551616", 0, decimal.ErrOverflow}, // 2^64: wraps to 0 in uint64
		{"1", decimal.ScaleMax + 1, decimal.ErrScaleRange},
		{"1", math.MaxUint8, decimal.ErrScaleRange},
		{strings.Repeat("0", decimal.TextLengthMax) + "1", 0, decimal.ErrTextLength},
		{strings.Repeat(" ", 1000), 0, decimal.ErrTextLength},
	}
	for _, test := range tests {
		got, err := decimal.Parse(test.text, test.scale)
		if !errors.Is(err, test.want) {
			t.Errorf("Parse(%q, %d) = %v, %v; want error %v", test.text, test.scale, got, err, test.want)
		}
		if got != (decimal.Decimal{}) {
			t.Errorf("Parse(%q, %d) returned %v with its error, want the zero Decimal", test.text, test.scale, got)
		}
	}
}

func TestParseErrorNamesInput(t *testing.T) {
	_, err := decimal.Parse("12x", 2)
	if err == nil || !strings.Contains(err.Error(), `"12x"`) {
		t.Fatalf("error %v does not quote the input", err)
	}
}

func TestString(t *testing.T) {
	tests := []struct {
		units int64
		scale uint8
		want  string
	}{
		{0, 0, "0"},
		{0, 2, "0.00"},
		{12, 0, "12"},
		{-50, 2, "-0.50"},
		{1250, 2, "12.50"},
		{-1, 3, "-0.001"},
		{1, 18, "0.000000000000000001"},
		{-1, 18, "-0.000000000000000001"},
		{math.MaxInt64, 0, "9223372036854775807"},
		{math.MinInt64, 0, "-9223372036854775808"},
		{math.MaxInt64, 2, "92233720368547758.07"},
		{math.MinInt64, 18, "-9.223372036854775808"},
		{math.MaxInt64, 18, "9.223372036854775807"},
		{100, 2, "1.00"},
		{-100, 1, "-10.0"},
	}
	for _, test := range tests {
		d := decimal.MustNew(test.units, test.scale)
		if got := d.String(); got != test.want {
			t.Errorf("MustNew(%d, %d).String() = %q, want %q", test.units, test.scale, got, test.want)
		}
		if got := string(d.Append([]byte("x="))); got != "x="+test.want {
			t.Errorf("Append = %q, want %q", got, "x="+test.want)
		}
		back, err := decimal.Parse(test.want, test.scale)
		if err != nil || back != d {
			t.Errorf("Parse(%q, %d) = %v, %v; want %v", test.want, test.scale, back, err, d)
		}
	}
}

// TestStringRoundTripExtremes checks the round trip at every scale for the
// values where digit handling is most likely to go wrong.
func TestStringRoundTripExtremes(t *testing.T) {
	units := []int64{math.MinInt64, math.MinInt64 + 1, -1, 0, 1, math.MaxInt64 - 1, math.MaxInt64,
		999_999_999_999_999_999, 1_000_000_000_000_000_000, -1_000_000_000_000_000_000}
	for scale := uint8(0); scale <= decimal.ScaleMax; scale++ {
		for _, u := range units {
			d := decimal.MustNew(u, scale)
			back, err := decimal.Parse(d.String(), scale)
			if err != nil || back != d {
				t.Errorf("Parse(%q, %d) = %v, %v; want units %d", d.String(), scale, back, err, u)
			}
		}
	}
}

func TestJSON(t *testing.T) {
	d := decimal.MustNew(-1250, 2)
	data, err := d.MarshalJSON()
	if err != nil || string(data) != `"-12.50"` {
		t.Fatalf("MarshalJSON = %s, %v; want \"-12.50\"", data, err)
	}
	back, err := decimal.ParseJSON(data, 2)
	if err != nil || back != d {
		t.Fatalf("ParseJSON(%s, 2) = %v, %v; want %v", data, back, err, d)
	}
}

func TestParseJSONRejects(t *testing.T) {
	tests := []struct {
		data  string
		scale uint8
		want  error
	}{
		{``, 2, decimal.ErrSyntax},
		{`"`, 2, decimal.ErrSyntax},
		{`12.50`, 2, decimal.ErrSyntax}, // a JSON number
		{`null`, 2, decimal.ErrSyntax},
		{` "12.50"`, 2, decimal.ErrSyntax},
		{`"12.50" `, 2, decimal.ErrSyntax},
		{`"\u0031"`, 0, decimal.ErrSyntax},
		{`""`, 2, decimal.ErrSyntax},
		{`"12.505"`, 2, decimal.ErrScale},
		{`"9223372036854775808"`, 0, decimal.ErrOverflow},
		{`"1"`, decimal.ScaleMax + 1, decimal.ErrScaleRange},
		{`"` + strings.Repeat("1", decimal.TextLengthMax+1) + `"`, 0, decimal.ErrTextLength},
	}
	for _, test := range tests {
		got, err := decimal.ParseJSON([]byte(test.data), test.scale)
		if !errors.Is(err, test.want) {
			t.Errorf("ParseJSON(%s, %d) = %v, %v; want error %v", test.data, test.scale, got, err, test.want)
		}
	}
}
