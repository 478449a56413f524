package financial

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/chain"
)

// Each decoder is strict: whatever it accepts re-encodes to exactly the
// input, so one value has one encoding and a replayed request always
// fingerprints the same. Refusals are typed (ErrPayload, chain.ErrCorrupt).

func seedPostings() [][]byte {
	p := posting("k", "2026-03-10", dr("1400", "100.00", "EUR"), cr("2100", "60.00", "EUR"), cr("3000", "40.00", "EUR"))
	reversal := Posting{Date: DateMax, Reverses: 7, Lines: p.reversedLines()}
	multi := posting("m", "1900-01-01", dr("1000", "5", "JPY"), cr("4000", "5", "JPY"), dr("5000", "0.01", "USD"), cr("2100", "0.01", "USD"))
	return [][]byte{EncodePosting(&p), EncodePosting(&reversal), EncodePosting(&multi)}
}

func FuzzDecodePosting(f *testing.F) {
	for _, seed := range seedPostings() {
		f.Add(seed)
		f.Add(seed[:len(seed)-1])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := DecodePosting(data)
		if err != nil {
			if !errors.Is(err, ErrPayload) || !errors.Is(err, chain.ErrCorrupt) {
				t.Fatalf("untyped refusal: %v", err)
			}
			return
		}
		if again := EncodePosting(&p); !bytes.Equal(again, data) {
			t.Fatalf("re-encoding differs:\n%x\n%x", data, again)
		}
		if err := p.validateShape(false); err != nil {
			t.Fatalf("decoded posting fails validation: %v", err)
		}
		if _, err := p.totals(); err != nil {
			t.Fatalf("decoded posting does not balance: %v", err)
		}
	})
}

func FuzzDecodeAccount(f *testing.F) {
	for _, a := range []Account{{Code: "1400", Name: "Inventory", Type: Asset, NormalSide: Debit},
		{Code: "1500", Name: "Accumulated depreciation ä", Type: Asset, NormalSide: Credit}} {
		f.Add(EncodeAccount(&a))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := DecodeAccount(data)
		if err != nil {
			if !errors.Is(err, ErrPayload) || !errors.Is(err, chain.ErrCorrupt) {
				t.Fatalf("untyped refusal: %v", err)
			}
			return
		}
		if again := EncodeAccount(&a); !bytes.Equal(again, data) {
			t.Fatalf("re-encoding differs:\n%x\n%x", data, again)
		}
	})
}

func FuzzDecodeAccountClose(f *testing.F) {
	f.Add(EncodeAccountClose("1400"))
	f.Add([]byte{0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		code, err := DecodeAccountClose(data)
		if err != nil {
			if !errors.Is(err, ErrPayload) || !errors.Is(err, chain.ErrCorrupt) {
				t.Fatalf("untyped refusal: %v", err)
			}
			return
		}
		if again := EncodeAccountClose(code); !bytes.Equal(again, data) {
			t.Fatalf("re-encoding differs:\n%x\n%x", data, again)
		}
	})
}

func FuzzDecodeCurrency(f *testing.F) {
	for _, c := range []Currency{{Code: "EUR", Exponent: 2}, {Code: "JPY"}, {Code: "XAUGRAM", Exponent: ExponentMax}} {
		f.Add(EncodeCurrency(&c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeCurrency(data)
		if err != nil {
			if !errors.Is(err, ErrPayload) || !errors.Is(err, chain.ErrCorrupt) {
				t.Fatalf("untyped refusal: %v", err)
			}
			return
		}
		if again := EncodeCurrency(&c); !bytes.Equal(again, data) {
			t.Fatalf("re-encoding differs:\n%x\n%x", data, again)
		}
	})
}

func FuzzParseDate(f *testing.F) {
	for _, s := range []string{"2026-03-10", "1900-01-01", "2258-11-08", "2024-02-29", "2023-02-29", "2026-3-10", "", "1899-12-31"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		d, err := ParseDate(text)
		if err != nil {
			if !errors.Is(err, ErrInvalidDate) || !errors.Is(err, chain.ErrInvalid) {
				t.Fatalf("untyped refusal: %v", err)
			}
			return
		}
		if d.String() != text || d < DateMin || d > DateMax {
			t.Fatalf("%q parsed to %s (%d)", text, d, int32(d))
		}
	})
}

func FuzzParseLine(f *testing.F) {
	for _, s := range []string{"1400:100.00:EUR", "1400:100:EUR", "1400:100.001:EUR", "1400:5:JPY", "1400:0.00:EUR",
		"1400:-1:EUR", "1400:1:GBP", "14:00:1:EUR", "1400:92233720368547758.07:EUR", "1400:92233720368547758.08:EUR", ":1:EUR"} {
		f.Add(s, true)
	}
	exponentOf := func(currency string) (uint8, error) {
		switch currency {
		case "EUR":
			return 2, nil
		case "JPY":
			return 0, nil
		}
		return 0, notFound(ErrCurrencyNotFound, "currency %s", currency)
	}
	f.Fuzz(func(t *testing.T, text string, debit bool) {
		side := Credit
		if debit {
			side = Debit
		}
		l, err := ParseLine(side, text, exponentOf)
		if err != nil {
			if !errors.Is(err, chain.ErrInvalid) && !errors.Is(err, ErrCurrencyNotFound) {
				t.Fatalf("untyped refusal: %v", err)
			}
			return
		}
		if err := l.validate(1); err != nil {
			t.Fatalf("parsed line is invalid: %v", err)
		}
		exponent, _ := exponentOf(l.Currency)
		fields := strings.Split(text, ":")
		if l.Amount.Scale() != exponent || l.Side != side || !slices.Equal([]string{l.Account, l.Currency}, []string{fields[0], fields[2]}) {
			t.Fatalf("%q parsed to %+v", text, l)
		}
		canonical := l.Account + ":" + l.Amount.String() + ":" + l.Currency
		if again, err := ParseLine(side, canonical, exponentOf); err != nil || again != l {
			t.Fatalf("canonical %q parsed to %+v %v", canonical, again, err)
		}
	})
}

// The derived-state decoders read what an earlier transaction wrote, or what
// a damaged or tampered store holds: they never panic, refuse with
// ErrPayload and chain.ErrCorrupt, and whatever they accept re-encodes to
// exactly the input.

func checkStateRefusal(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, ErrPayload) || !errors.Is(err, chain.ErrCorrupt) {
		t.Fatalf("untyped refusal: %v", err)
	}
}

func FuzzDecodeBalanceState(f *testing.F) {
	for _, s := range []balanceState{{}, {balance: 125000, postings: 3, lastSeq: 9},
		{balance: -math.MaxInt64, postings: math.MaxUint64, lastSeq: 1}} {
		f.Add(s.encode())
	}
	f.Add(balanceState{balance: math.MinInt64}.encode())
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := decodeBalanceState(data)
		if err != nil {
			checkStateRefusal(t, err)
			return
		}
		if again := s.encode(); !bytes.Equal(again, data) {
			t.Fatalf("accepted %x, re-encodes as %x", data, again)
		}
		if _, ok := addInt64(s.balance, 0); !ok || s.balance == math.MinInt64 {
			t.Fatalf("accepted balance %d", s.balance)
		}
	})
}

func FuzzDecodeSeqValue(f *testing.F) {
	f.Add(encodeSeqValue(balanceState{balance: -60, postings: 2}))
	f.Add(encodeSeqValue(balanceState{balance: math.MaxInt64, postings: math.MaxUint64}))
	f.Add(encodeSeqValue(balanceState{balance: math.MinInt64}))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := decodeSeqValue(data)
		if err != nil {
			checkStateRefusal(t, err)
			return
		}
		if again := encodeSeqValue(s); !bytes.Equal(again, data) {
			t.Fatalf("accepted %x, re-encodes as %x", data, again)
		}
	})
}

func FuzzDecodeSumNode(f *testing.F) {
	f.Add(sumNode{total: wideOf(-5), postings: 1}.encode())
	f.Add(sumNode{total: wideOf(math.MaxInt64).add(wideOf(math.MaxInt64)), postings: 2}.encode())
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := decodeSumNode(data)
		if err != nil {
			checkStateRefusal(t, err)
			return
		}
		if again := n.encode(); !bytes.Equal(again, data) {
			t.Fatalf("accepted %x, re-encodes as %x", data, again)
		}
		// Whatever a node holds, reading it as a balance answers or
		// refuses; it never wraps.
		if v, ok := n.total.int64(); ok && wideOf(v) != n.total {
			t.Fatalf("node total %+v read as %d", n.total, v)
		}
	})
}

func FuzzDecodeAccountState(f *testing.F) {
	open := Account{Code: "1400", Name: "Inventory", Type: Asset, NormalSide: Debit, DefinedSeq: 1}
	closed := Account{Code: "2100", Name: "Goods received", Type: Liability, NormalSide: Credit,
		DefinedSeq: 2, Closed: true, ClosedSeq: 40}
	f.Add(encodeAccountState(&open))
	f.Add(encodeAccountState(&closed))
	f.Add(make([]byte, 15))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := decodeAccountState(data)
		if err != nil {
			checkStateRefusal(t, err)
			return
		}
		if again := encodeAccountState(&a); !bytes.Equal(again, data) {
			t.Fatalf("accepted %x, re-encodes as %x", data, again)
		}
		if a.Closed != (a.ClosedSeq != 0) {
			t.Fatalf("closed %v with closed seq %d", a.Closed, a.ClosedSeq)
		}
	})
}

func FuzzDecodeCurrencyState(f *testing.F) {
	for _, c := range []Currency{{Code: "EUR", Exponent: 2, DefinedSeq: 1}, {Code: "JPY", DefinedSeq: math.MaxUint64}} {
		f.Add(encodeCurrencyState(&c))
	}
	f.Add(make([]byte, 7))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := decodeCurrencyState(data)
		if err != nil {
			checkStateRefusal(t, err)
			return
		}
		if again := encodeCurrencyState(&c); !bytes.Equal(again, data) {
			t.Fatalf("accepted %x, re-encodes as %x", data, again)
		}
	})
}

// FuzzParseAccountType and FuzzParseSide: the CLI's names parse to exactly
// the value whose String they are; anything else is ErrInvalid.
func FuzzParseAccountType(f *testing.F) {
	for _, s := range []string{"asset", "liability", "equity", "income", "expense", "Asset", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		typ, err := ParseAccountType(text)
		if err != nil {
			if !errors.Is(err, ErrInvalidAccount) || !errors.Is(err, chain.ErrInvalid) {
				t.Fatalf("untyped refusal: %v", err)
			}
			return
		}
		if typ.String() != text {
			t.Fatalf("%q parsed as %v", text, typ)
		}
	})
}

func FuzzParseSide(f *testing.F) {
	for _, s := range []string{"debit", "credit", "Debit", "dr", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		side, err := ParseSide(text)
		if err != nil {
			if !errors.Is(err, ErrInvalidPosting) || !errors.Is(err, chain.ErrInvalid) {
				t.Fatalf("untyped refusal: %v", err)
			}
			return
		}
		if !side.valid() || side.String() != text {
			t.Fatalf("%q parsed as %v", text, side)
		}
	})
}
