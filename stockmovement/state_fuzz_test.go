package stockmovement

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/chain"
)

// The derived-state decoders read what a transaction wrote earlier, or what
// a damaged or tampered store holds: they never panic, refuse with
// ErrMalformed, and whatever they accept re-encodes to exactly the input.
// Seed corpora live in testdata/fuzz/<FuzzName>/.

func FuzzDecodeBalanceState(f *testing.F) {
	for _, b := range []balanceState{{}, {units: 12_500, seq: 3, timeUnixNano: 1_764_000_000_000_000_000},
		{units: -7, seq: math.MaxUint64, timeUnixNano: -1}, {units: math.MinInt64, seq: 1}} {
		f.Add(b.encode())
	}
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := decodeBalanceState(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("untyped refusal: %v", err)
			}
			return
		}
		if again := b.encode(); !bytes.Equal(again, data) {
			t.Fatalf("accepted %x, re-encodes as %x", data, again)
		}
	})
}

// definitionState is how appendCatalog stores a definition: the catalog seq
// and the payload.
func definitionState(seq uint64, payload []byte) []byte {
	return append(binary.BigEndian.AppendUint64(nil, seq), payload...)
}

func FuzzDecodeItemState(f *testing.F) {
	f.Add(definitionState(1, EncodeItem(Item{ID: "SKU-1", Name: "Bolts", Scale: 3})))
	f.Add(definitionState(math.MaxUint64, EncodeItem(Item{ID: "ä", Scale: 0, AllowNegative: true})))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := decodeItemState(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("untyped refusal: %v", err)
			}
			return
		}
		if again := definitionState(d.Seq, EncodeItem(d.Item)); !bytes.Equal(again, data) {
			t.Fatalf("accepted %x, re-encodes as %x", data, again)
		}
		if err := ValidateItem(d.Item); err != nil {
			t.Fatalf("accepted an invalid item: %v", err)
		}
	})
}

func FuzzDecodeLocationState(f *testing.F) {
	f.Add(definitionState(2, EncodeLocation(Location{ID: "WH-1", Name: "Main warehouse"})))
	f.Add(definitionState(0, EncodeLocation(Location{ID: "x"})))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := decodeLocationState(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("untyped refusal: %v", err)
			}
			return
		}
		if again := definitionState(d.Seq, EncodeLocation(d.Location)); !bytes.Equal(again, data) {
			t.Fatalf("accepted %x, re-encodes as %x", data, again)
		}
		if err := ValidateLocation(d.Location); err != nil {
			t.Fatalf("accepted an invalid location: %v", err)
		}
	})
}

// FuzzParseStateKey: Check classifies every state key of the package with
// parseStateKey. A reversal marker it accepts is rebuilt exactly by
// reversedKey; every other key it accepts starts with its tenant and kind.
func FuzzParseStateKey(f *testing.F) {
	f.Add(stateKey("acme", stateBalance, "SKU-1", "WH-1"))
	f.Add(stateKey("acme", stateTotal, "SKU-1"))
	f.Add(stateKey("acme", stateItem, "SKU-1"))
	f.Add(reversedKey("acme", "SKU-1", "WH-1", 42))
	f.Add([]byte("stock/acme/reversed/a/b/short"))
	f.Add([]byte("stock/"))
	f.Fuzz(func(t *testing.T, key []byte) {
		tenant, kind, parts, ok := parseStateKey(key)
		if !ok {
			return
		}
		if strings.Contains(tenant, "/") {
			t.Fatalf("tenant %q of %q holds a separator", tenant, key)
		}
		if kind == stateReversed {
			if len(parts) != 3 || len(parts[2]) != 8 {
				t.Fatalf("marker %q split into %q", key, parts)
			}
			again := reversedKey(tenant, parts[0], parts[1], binary.BigEndian.Uint64([]byte(parts[2])))
			if !bytes.Equal(again, key) {
				t.Fatalf("marker %q rebuilds as %q", key, again)
			}
			return
		}
		if !bytes.HasPrefix(key, stateKey(tenant, kind)) {
			t.Fatalf("key %q parsed as tenant %q kind %q", key, tenant, kind)
		}
	})
}

// FuzzParseMovementChain: a chain name it accepts is exactly the one
// MovementChain builds from the parts.
func FuzzParseMovementChain(f *testing.F) {
	for _, parts := range [][3]string{{"acme", "SKU-1", "WH-1"}, {"t", "ä", "x y"}} {
		name, err := MovementChain(parts[0], parts[1], parts[2])
		if err != nil {
			f.Fatal(err)
		}
		f.Add(name)
	}
	catalog, _ := CatalogChain("acme")
	f.Add(catalog)
	f.Add("acme/fin/a/b")
	f.Fuzz(func(t *testing.T, name string) {
		tenant, item, location, ok := ParseMovementChain(name)
		if !ok {
			return
		}
		again, err := MovementChain(tenant, item, location)
		if errors.Is(err, chain.ErrUnsafeName) {
			// A name stored before the rules for new names (a "." or ".."
			// component) is still read as a movement chain; only a new one
			// cannot be built. Its parts must still be the name's own.
			if joined := strings.Join([]string{tenant, Domain, item, location}, chain.NameSeparator); joined != name {
				t.Fatalf("%q parsed into parts that join as %q", name, joined)
			}
			return
		}
		if err != nil {
			t.Fatalf("%q parsed into parts MovementChain refuses: %v", name, err)
		}
		if again != name {
			t.Fatalf("%q rebuilds as %q", name, again)
		}
		if _, err := chain.ScopedName(tenant, Domain, item, location); err != nil {
			t.Fatal(err)
		}
	})
}
