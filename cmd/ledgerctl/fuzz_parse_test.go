package main

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
)

// requireInputError fails unless err is refused input: exit 2, and not a
// usage error (the argument was well formed, its value is not).
func requireInputError(t *testing.T, what string, err error) {
	t.Helper()
	if exit, code := classify(err); exit != exitUsage || code != codeInvalidInput {
		t.Fatalf("%s: error %v classifies as exit %d %s, want exit 2 %s", what, err, exit, code, codeInvalidInput)
	}
}

// FuzzReadData: --data TEXT|@FILE|- gives the text itself, the named file's
// bytes or standard input's; anything above the payload limit, and a file
// that cannot be opened or read, is an input error (exit 2).
func FuzzReadData(f *testing.F) {
	for _, seed := range []struct {
		data  string
		input []byte
		large bool
	}{
		{`{"event":"opened"}`, nil, false},
		{"", nil, false},
		{"-", []byte("\x00\x01binary\n"), false},
		{"-", nil, true},
		{"@payload.json", []byte(`{"a":1}`), false},
		{"@payload.json", nil, true},
		{"@missing.json", nil, false},
		{"@broken", []byte("read me"), false},
		{"@", nil, false},
		{"@@payload.json", []byte("x"), false},
		{"--", []byte("stdin"), false},
	} {
		f.Add(seed.data, seed.input, seed.large)
	}
	f.Fuzz(func(t *testing.T, data string, input []byte, large bool) {
		if large {
			// Just past the limit, whatever input holds.
			input = append(input, bytes.Repeat([]byte{'x'}, chain.PayloadSizeMaxDefault+1-len(input)%(chain.PayloadSizeMaxDefault+1))...)
		}
		errBroken := errors.New("device error")
		open := func(name string) (io.ReadCloser, error) {
			switch name {
			case "payload.json", "@payload.json":
				return io.NopCloser(bytes.NewReader(input)), nil
			case "broken":
				return io.NopCloser(io.MultiReader(bytes.NewReader(input), errorReader{errBroken})), nil
			}
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		payload, err := readDataFrom(data, bytes.NewReader(input), open)
		var want []byte
		switch {
		case data == "-" || data == "@payload.json" || data == "@@payload.json":
			want = input
		case data == "@broken" && len(input) <= chain.PayloadSizeMaxDefault:
			requireInputError(t, data, err)
			if !strings.Contains(err.Error(), errBroken.Error()) {
				t.Fatalf("%q: error %v does not name the cause", data, err)
			}
			return
		case data == "@broken":
			// The read stops at the limit, before the failure.
			want = input
		case strings.HasPrefix(data, "@"):
			requireInputError(t, data, err)
			if !strings.Contains(err.Error(), data) {
				t.Fatalf("%q: error %v does not name the file", data, err)
			}
			return
		default:
			if err != nil || string(payload) != data {
				t.Fatalf("text %q: got %q, %v", data, payload, err)
			}
			return
		}
		if len(want) > chain.PayloadSizeMaxDefault {
			requireInputError(t, data, err)
			if !errors.Is(err, chain.ErrPayloadTooLarge) || payload != nil {
				t.Fatalf("%q with %d bytes: %v", data, len(want), err)
			}
			return
		}
		if err != nil || !bytes.Equal(payload, want) {
			t.Fatalf("%q: got %d bytes, %v; want the %d bytes given", data, len(payload), err, len(want))
		}
	})
}

// errorReader fails every read.
type errorReader struct{ err error }

func (r errorReader) Read([]byte) (int, error) { return 0, r.err }

// FuzzParseQuantity: a stock quantity is accepted exactly when decimal.Parse
// takes it at the item's scale; what is accepted prints back to its value at
// that scale, and what is refused is an input error naming the item.
func FuzzParseQuantity(f *testing.F) {
	for _, seed := range []struct {
		text  string
		scale uint8
	}{
		{"10", 0}, {"42.5", 3}, {"-3", 0}, {"+7.250", 2}, {"1.2345", 3}, {"", 0}, {"1e3", 0}, {" 1", 0},
		{"9223372036854775807", 0}, {"9223372036854775808", 0}, {"-9223372036854775808", 0},
		{"0.000000000000000001", 18}, {"1", 19}, {"1", 255}, {"1,5", 1}, {"١", 0}, {strings.Repeat("0", 65), 0},
	} {
		f.Add(seed.text, seed.scale)
	}
	f.Fuzz(func(t *testing.T, text string, scale uint8) {
		q, err := parseQuantityText("SKU-1", text, scale)
		reference, referenceErr := decimal.Parse(text, scale)
		if (err == nil) != (referenceErr == nil) {
			t.Fatalf("%q at scale %d: %v, decimal.Parse %v", text, scale, err, referenceErr)
		}
		if err != nil {
			requireInputError(t, text, err)
			if !strings.Contains(err.Error(), "SKU-1") || !sameDecimalCause(err, referenceErr) {
				t.Fatalf("%q: error %v hides its item or its cause %v", text, err, referenceErr)
			}
			return
		}
		if q != reference || q.Scale() != scale {
			t.Fatalf("%q at scale %d: %v, want %v", text, scale, q, reference)
		}
		again, err := parseQuantityText("SKU-1", q.String(), scale)
		if err != nil || again != q {
			t.Fatalf("%q: printed %q parses back as %v, %v", text, q.String(), again, err)
		}
	})
}

// sameDecimalCause reports whether two errors wrap the same decimal
// sentinels.
func sameDecimalCause(a, b error) bool {
	for _, sentinel := range []error{decimal.ErrOverflow, decimal.ErrScaleRange, decimal.ErrScale,
		decimal.ErrSyntax, decimal.ErrTextLength} {
		if errors.Is(a, sentinel) != errors.Is(b, sentinel) {
			return false
		}
	}
	return true
}

// FuzzValAmounts: val's amounts at a declared scale (valDecimal) and its unit
// costs and rates at the places they are written with (valRate). Accepted
// values keep their written places and print back; refused ones are input
// errors.
func FuzzValAmounts(f *testing.F) {
	for _, seed := range []struct {
		text  string
		scale uint8
	}{
		{"12.50", 2}, {"4.2", 2}, {"0.125", 3}, {"100", 0}, {"-1.00", 2}, {"1.", 0}, {".5", 1}, {"1.2.3", 1},
		{"0." + strings.Repeat("1", 18), 18}, {"0." + strings.Repeat("1", 19), 18}, {"", 0}, {"9223372036854775807.5", 1},
	} {
		f.Add(seed.text, seed.scale)
	}
	f.Fuzz(func(t *testing.T, text string, scale uint8) {
		d, err := valDecimal("amount", text, scale)
		if err != nil {
			requireInputError(t, text, err)
		} else if d.Scale() != scale {
			t.Fatalf("valDecimal %q at %d: scale %d", text, scale, d.Scale())
		} else if again, err := valDecimal("amount", d.String(), scale); err != nil || again != d {
			t.Fatalf("valDecimal %q: printed %q parses back as %v, %v", text, d.String(), again, err)
		}

		rate, err := valRate("unit cost", text)
		switch {
		case text == "":
			if rate != nil || err != nil {
				t.Fatalf("an empty rate is no rate: %v, %v", rate, err)
			}
		case err != nil:
			requireInputError(t, text, err)
		default:
			places := 0
			if i := strings.IndexByte(text, '.'); i >= 0 {
				places = len(text) - i - 1
			}
			if int(rate.Scale()) != places {
				t.Fatalf("valRate %q: scale %d, written with %d places", text, rate.Scale(), places)
			}
			if again, err := decimal.Parse(rate.String(), rate.Scale()); err != nil || again != *rate {
				t.Fatalf("valRate %q: printed %q parses back as %v, %v", text, rate.String(), again, err)
			}
		}
	})
}

// FuzzParseSeq: a SEQ argument is accepted exactly when it is a decimal
// uint64 from 1 (strconv's grammar, so "+1" is refused); anything else is a
// usage error.
func FuzzParseSeq(f *testing.F) {
	for _, seed := range []string{"1", "0", "01", "+1", "-1", "18446744073709551615", "18446744073709551616", "", "1 ", "0x10", "٣"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		seq, err := parseSeq("SEQ", text)
		want, wantErr := strconv.ParseUint(text, 10, 64)
		if wantErr != nil || want == 0 {
			var usage *usageError
			if !errors.As(err, &usage) {
				t.Fatalf("%q: got %d, %v; want a usage error", text, seq, err)
			}
			return
		}
		if err != nil || seq != want {
			t.Fatalf("%q: got %d, %v; want %d", text, seq, err, want)
		}
	})
}
