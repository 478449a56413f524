package stockmovement_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/ledgerworks/ledger/stockmovement"
)

// The decoders are strict and canonical: whatever they accept re-encodes to
// exactly the input, and whatever they refuse is ErrMalformed. Seed corpora
// live in testdata/fuzz/<FuzzName>/.

func FuzzDecodeMovement(f *testing.F) {
	for _, m := range sampleMovements() {
		f.Add(stockmovement.EncodeMovement(m))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := stockmovement.DecodeMovement(data)
		if err != nil {
			if !errors.Is(err, stockmovement.ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		if again := stockmovement.EncodeMovement(m); !bytes.Equal(again, data) {
			t.Fatalf("accepted %x, re-encodes to %x", data, again)
		}
	})
}

func FuzzDecodeItem(f *testing.F) {
	f.Add(stockmovement.EncodeItem(stockmovement.Item{ID: "kg", Name: "Flour", Scale: 3, AllowNegative: true}))
	f.Fuzz(func(t *testing.T, data []byte) {
		it, err := stockmovement.DecodeItem(data)
		if err != nil {
			if !errors.Is(err, stockmovement.ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		if again := stockmovement.EncodeItem(it); !bytes.Equal(again, data) {
			t.Fatalf("accepted %x, re-encodes to %x", data, again)
		}
	})
}

func FuzzDecodeLocation(f *testing.F) {
	f.Add(stockmovement.EncodeLocation(stockmovement.Location{ID: "WH-1", Name: "Main"}))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := stockmovement.DecodeLocation(data)
		if err != nil {
			if !errors.Is(err, stockmovement.ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		if again := stockmovement.EncodeLocation(l); !bytes.Equal(again, data) {
			t.Fatalf("accepted %x, re-encodes to %x", data, again)
		}
	})
}
