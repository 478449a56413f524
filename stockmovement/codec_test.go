package stockmovement_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/stockmovement"
)

// sampleMovements covers every kind with every field it may carry.
func sampleMovements() []stockmovement.Movement {
	d := func(units int64) decimal.Decimal { return decimal.MustNew(units, 3) }
	return []stockmovement.Movement{
		{Kind: stockmovement.KindReceipt, Quantity: d(12500), Balance: d(12500), Reference: "GRN-42", Note: "first delivery"},
		{Kind: stockmovement.KindIssue, Quantity: d(-2250), Balance: d(10250)},
		{Kind: stockmovement.KindAdjustment, Quantity: d(-250), Balance: d(10000), Reason: "count", Note: "Zählung"},
		{Kind: stockmovement.KindTransferOut, Quantity: d(-4000), Balance: d(6000), Counterpart: "WH-2", Reference: "TR-1"},
		{Kind: stockmovement.KindTransferIn, Quantity: d(4000), Balance: d(4000), Counterpart: "WH-1", Reference: "TR-1"},
		{Kind: stockmovement.KindReversal, Quantity: d(4000), Balance: d(10000), Counterpart: "WH-2",
			OriginalChain: "acme/stock/SKU-1/WH-1", OriginalSeq: 4},
		{Kind: stockmovement.KindIssue, Quantity: decimal.MustNew(-math.MaxInt64, 0), Balance: decimal.MustNew(math.MinInt64, 0)},
	}
}

// TestMovementGolden pins the v1 layout: any change to these bytes is a new
// payload version, not an edit of v1.
func TestMovementGolden(t *testing.T) {
	m := stockmovement.Movement{Kind: stockmovement.KindTransferOut, Quantity: decimal.MustNew(-4000, 3),
		Balance: decimal.MustNew(6000, 3), Reference: "TR-1", Note: "n", Counterpart: "B"}
	want := "04" + "03" + "fffffffffffff060" + "0000000000000000" +
		"0004" + hex.EncodeToString([]byte("TR-1")) + "0001" + "6e" + "0000" + "0001" + "42" + "0000" +
		"0000000000001770"
	if got := hex.EncodeToString(stockmovement.EncodeMovement(m)); got != want {
		t.Fatalf("encoding\n got %s\nwant %s", got, want)
	}
}

func TestMovementRoundTrip(t *testing.T) {
	for _, m := range sampleMovements() {
		data := stockmovement.EncodeMovement(m)
		got, err := stockmovement.DecodeMovement(data)
		if err != nil {
			t.Fatalf("%+v: %v", m, err)
		}
		if got != m {
			t.Fatalf("round trip: %+v, want %+v", got, m)
		}
		if again := stockmovement.EncodeMovement(got); !bytes.Equal(again, data) {
			t.Fatalf("not deterministic: %x then %x", data, again)
		}
	}
}

func TestMovementDecodeRejects(t *testing.T) {
	valid := stockmovement.EncodeMovement(sampleMovements()[0])
	edit := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), valid...)) }
	encodeRaw := func(m stockmovement.Movement) []byte {
		// Encode without validation by patching a valid encoding's fixed
		// fields is not enough for field presence, so build by hand.
		var b []byte
		b = append(b, byte(m.Kind), m.Quantity.Scale())
		b = append(b, be64(uint64(m.Quantity.Units()))...)
		b = append(b, be64(m.OriginalSeq)...)
		for _, s := range []string{m.Reference, m.Note, m.Reason, m.Counterpart, m.OriginalChain} {
			b = append(b, byte(len(s)>>8), byte(len(s)))
			b = append(b, s...)
		}
		return append(b, be64(uint64(m.Balance.Units()))...)
	}
	d := func(units int64) decimal.Decimal { return decimal.MustNew(units, 0) }
	cases := map[string][]byte{
		"empty":                        nil,
		"truncated":                    valid[:len(valid)-1],
		"trailing byte":                append(append([]byte(nil), valid...), 0),
		"unknown kind":                 edit(func(b []byte) []byte { b[0] = 7; return b }),
		"kind zero":                    edit(func(b []byte) []byte { b[0] = 0; return b }),
		"scale 19":                     edit(func(b []byte) []byte { b[1] = 19; return b }),
		"length too long":              edit(func(b []byte) []byte { b[18], b[19] = 0xff, 0xff; return b }),
		"oversized":                    make([]byte, 1<<16),
		"zero quantity":                encodeRaw(stockmovement.Movement{Kind: stockmovement.KindReceipt, Quantity: d(0), Balance: d(0)}),
		"min quantity":                 encodeRaw(stockmovement.Movement{Kind: stockmovement.KindIssue, Quantity: d(math.MinInt64), Balance: d(0)}),
		"negative receipt":             encodeRaw(stockmovement.Movement{Kind: stockmovement.KindReceipt, Quantity: d(-1), Balance: d(0)}),
		"positive issue":               encodeRaw(stockmovement.Movement{Kind: stockmovement.KindIssue, Quantity: d(1), Balance: d(0)}),
		"receipt with reason":          encodeRaw(stockmovement.Movement{Kind: stockmovement.KindReceipt, Quantity: d(1), Balance: d(1), Reason: "x"}),
		"adjustment without reason":    encodeRaw(stockmovement.Movement{Kind: stockmovement.KindAdjustment, Quantity: d(1), Balance: d(1)}),
		"transfer without counterpart": encodeRaw(stockmovement.Movement{Kind: stockmovement.KindTransferIn, Quantity: d(1), Balance: d(1)}),
		"counterpart with separator":   encodeRaw(stockmovement.Movement{Kind: stockmovement.KindTransferIn, Quantity: d(1), Balance: d(1), Counterpart: "a/b"}),
		"receipt with original": encodeRaw(stockmovement.Movement{Kind: stockmovement.KindReceipt, Quantity: d(1), Balance: d(1),
			OriginalChain: "t/stock/i/l", OriginalSeq: 1}),
		"reversal without seq": encodeRaw(stockmovement.Movement{Kind: stockmovement.KindReversal, Quantity: d(1), Balance: d(1),
			OriginalChain: "t/stock/i/l"}),
		"reversal of a non-movement chain": encodeRaw(stockmovement.Movement{Kind: stockmovement.KindReversal, Quantity: d(1), Balance: d(1),
			OriginalChain: "t/stock/catalog", OriginalSeq: 1}),
		"note not UTF-8":         encodeRaw(stockmovement.Movement{Kind: stockmovement.KindReceipt, Quantity: d(1), Balance: d(1), Note: "\xc3"}),
		"reference with newline": encodeRaw(stockmovement.Movement{Kind: stockmovement.KindReceipt, Quantity: d(1), Balance: d(1), Reference: "a\nb"}),
		"note too long": encodeRaw(stockmovement.Movement{Kind: stockmovement.KindReceipt, Quantity: d(1), Balance: d(1),
			Note: strings.Repeat("n", stockmovement.NoteLengthMax+1)}),
	}
	for name, data := range cases {
		_, err := stockmovement.DecodeMovement(data)
		if !errors.Is(err, stockmovement.ErrMalformed) || !errors.Is(err, chain.ErrCorrupt) {
			t.Errorf("%s: got %v", name, err)
		}
	}
}

func TestEncodeInvalidPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	stockmovement.EncodeMovement(stockmovement.Movement{Kind: stockmovement.KindReceipt})
}

func TestCatalogCodecs(t *testing.T) {
	items := []stockmovement.Item{{ID: "SKU-1"}, {ID: "kg", Name: "Mehl, Type 405", Scale: 3, AllowNegative: true},
		{ID: strings.Repeat("x", stockmovement.IDLengthMax), Scale: decimal.ScaleMax}}
	for _, it := range items {
		data := stockmovement.EncodeItem(it)
		got, err := stockmovement.DecodeItem(data)
		if err != nil || got != it {
			t.Fatalf("item %+v: %+v %v", it, got, err)
		}
	}
	if got := hex.EncodeToString(stockmovement.EncodeItem(stockmovement.Item{ID: "a", Name: "b", Scale: 3, AllowNegative: true})); got != "0001610001620301" {
		t.Fatalf("item golden %s", got)
	}
	valid := stockmovement.EncodeItem(stockmovement.Item{ID: "a", Scale: 3})
	for name, data := range map[string][]byte{
		"unknown flag":  append(append([]byte(nil), valid[:len(valid)-1]...), 2),
		"scale 19":      append(append([]byte(nil), valid[:len(valid)-2]...), 19, 0),
		"trailing":      append(append([]byte(nil), valid...), 0),
		"truncated":     valid[:len(valid)-1],
		"empty id":      {0, 0, 0, 0, 0, 0},
		"id with slash": {0, 3, 'a', '/', 'b', 0, 0, 0, 0},
	} {
		if _, err := stockmovement.DecodeItem(data); !errors.Is(err, stockmovement.ErrMalformed) {
			t.Errorf("item %s: %v", name, err)
		}
	}
	l := stockmovement.Location{ID: "WH-1", Name: "Main warehouse"}
	if got, err := stockmovement.DecodeLocation(stockmovement.EncodeLocation(l)); err != nil || got != l {
		t.Fatalf("location: %+v %v", got, err)
	}
	for name, data := range map[string][]byte{
		"trailing":  append(stockmovement.EncodeLocation(l), 0),
		"truncated": {0, 4, 'W', 'H'},
		"control":   {0, 1, 0x07, 0, 0},
	} {
		if _, err := stockmovement.DecodeLocation(data); !errors.Is(err, stockmovement.ErrMalformed) {
			t.Errorf("location %s: %v", name, err)
		}
	}
}

func TestChainNames(t *testing.T) {
	name, err := stockmovement.MovementChain("acme", "SKU-1", "WH-1")
	if err != nil || name != "acme/stock/SKU-1/WH-1" {
		t.Fatalf("%q %v", name, err)
	}
	tenant, item, location, ok := stockmovement.ParseMovementChain(name)
	if !ok || tenant != "acme" || item != "SKU-1" || location != "WH-1" {
		t.Fatal("parse")
	}
	for _, bad := range [][3]string{{"a/b", "i", "l"}, {"a", "i/x", "l"}, {"a", "i", ""}, {"", "i", "l"},
		{"a", strings.Repeat("i", stockmovement.IDLengthMax+1), "l"}, {"a", "i\x00", "l"}} {
		if _, err := stockmovement.MovementChain(bad[0], bad[1], bad[2]); !errors.Is(err, stockmovement.ErrInvalidName) || !errors.Is(err, chain.ErrInvalid) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	catalog, err := stockmovement.CatalogChain("acme")
	if err != nil || catalog != "acme/stock/catalog" {
		t.Fatalf("%q %v", catalog, err)
	}
	for _, notMovement := range []string{catalog, "acme/fin/x/y", "acme/stock/a/b/c", "acme/stock//b"} {
		if _, _, _, ok := stockmovement.ParseMovementChain(notMovement); ok {
			t.Errorf("%q parsed as a movement chain", notMovement)
		}
	}
}

func be64(v uint64) []byte {
	return []byte{byte(v >> 56), byte(v >> 48), byte(v >> 40), byte(v >> 32), byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
}
