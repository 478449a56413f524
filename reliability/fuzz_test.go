package reliability

import (
	"errors"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/stockmovement"
)

// Fuzz targets for the public parsers that have none in their own package.
// Seed corpora are in testdata/fuzz/<Name>/.

// FuzzParseHash: ParseHash accepts exactly 64 hex digits, and an accepted
// hash prints back as the same digits in lower case (the spelling of
// `ledgerctl head` and of exports).
func FuzzParseHash(f *testing.F) {
	f.Fuzz(func(t *testing.T, text string) {
		h, err := chain.ParseHash(text)
		if err != nil {
			return
		}
		if len(text) != 2*chain.HashSize {
			t.Fatalf("ParseHash accepted %d characters", len(text))
		}
		if h.String() != strings.ToLower(text) {
			t.Fatalf("ParseHash(%q) prints as %q", text, h.String())
		}
	})
}

// FuzzParseMovementChain: a name is a movement chain exactly when
// MovementChain builds it from the components ParseMovementChain returns,
// so Check and Reverse can never mistake another domain's or another
// tenant's chain for a movement chain.
func FuzzParseMovementChain(f *testing.F) {
	f.Fuzz(func(t *testing.T, name string) {
		tenant, item, location, ok := stockmovement.ParseMovementChain(name)
		built, err := stockmovement.MovementChain(tenant, item, location)
		if ok && errors.Is(err, chain.ErrUnsafeName) {
			// A name stored before the rules for new names (a "." or ".."
			// component) is still read as a movement chain; only a new one
			// cannot be built. Its parts must still be the name's own.
			built, err = strings.Join([]string{tenant, stockmovement.Domain, item, location}, chain.NameSeparator), nil
		}
		if ok && (err != nil || built != name) {
			t.Fatalf("ParseMovementChain(%q) = %q %q %q, which builds %q (%v)", name, tenant, item, location, built, err)
		}
		if !ok && err == nil && built == name {
			t.Fatalf("ParseMovementChain refused %q, which MovementChain builds", name)
		}
	})
}

// FuzzParseJSON: ParseJSON accepts only what MarshalJSON could have
// written at that scale, and a decoded value encodes back to the same bytes.
func FuzzParseJSON(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte, scale uint8) {
		d, err := decimal.ParseJSON(data, scale)
		if err != nil {
			return
		}
		if d.Scale() != scale {
			t.Fatalf("ParseJSON(%q, %d) has scale %d", data, scale, d.Scale())
		}
		encoded, err := d.MarshalJSON()
		if err != nil {
			t.Fatalf("MarshalJSON of %v: %v", d, err)
		}
		again, err := decimal.ParseJSON(encoded, scale)
		if err != nil || again != d {
			t.Fatalf("ParseJSON(%q) = %v encodes as %s, which parses as %v (%v)", data, d, encoded, again, err)
		}
	})
}
