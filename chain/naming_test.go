package chain_test

import (
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/ledgerworks/ledger/chain"
)

func TestScopedName(t *testing.T) {
	name, err := chain.ScopedName("acme", "stock", "SKU-1", "WH 1")
	if err != nil || name != "acme/stock/SKU-1/WH 1" {
		t.Fatalf("%q %v", name, err)
	}
	if got := chain.SplitScopedName(name); !reflect.DeepEqual(got, []string{"acme", "stock", "SKU-1", "WH 1"}) {
		t.Fatalf("split %q", got)
	}
	if name, err := chain.ScopedName("t", "fin"); err != nil || name != "t/fin" {
		t.Fatalf("without parts: %q %v", name, err)
	}
	longest := strings.Repeat("x", chain.NameComponentLengthMax)
	if _, err := chain.ScopedName(longest, longest, longest); err != nil {
		t.Fatalf("longest components: %v", err)
	}
}

func TestScopedNameRefusesBlurredComponents(t *testing.T) {
	long := strings.Repeat("x", chain.NameComponentLengthMax+1)
	for _, c := range []struct {
		name           string
		tenant, domain string
		parts          []string
		field          string
	}{
		{"empty tenant", "", "stock", nil, "tenant"},
		{"empty domain", "acme", "", nil, "domain"},
		{"empty part", "acme", "stock", []string{"a", ""}, "name part 2"},
		{"slash in tenant", "acme/evil", "stock", nil, "tenant"},
		{"slash in domain", "acme", "stock/x", nil, "domain"},
		{"slash in part", "acme", "stock", []string{"SKU/1"}, "name part 1"},
		{"only a slash", "acme", "stock", []string{"/"}, "name part 1"},
		{"tenant too long", long, "stock", nil, "tenant"},
		{"part too long", "acme", "stock", []string{long}, "name part 1"},
		{"control character", "acme", "stock", []string{"a\tb"}, "name part 1"},
		{"invalid UTF-8", "acme\xff", "stock", nil, "tenant"},
		{"dot part", "acme", "stock", []string{"."}, "name part 1"},
		{"dot-dot tenant", "..", "stock", nil, "tenant"},
		{"dot-dot part", "acme", "stock", []string{"x", ".."}, "name part 2"},
		{"right-to-left override", "acme\u202e", "stock", nil, "tenant"},
		{"zero-width joiner", "acme", "stock", []string{"SKU\u200d1"}, "name part 1"},
		{"whole name too long", "acme", "stock", []string{long[:64], long[:64], long[:64], long[:64]}, "chain"},
	} {
		name, err := chain.ScopedName(c.tenant, c.domain, c.parts...)
		if name != "" {
			t.Errorf("%s: returned %q", c.name, name)
		}
		assertInvalid(t, err, chain.ErrInvalidChain, c.field)
	}
}

// Two different component lists never give the same chain id: either both
// are refused, or the ids differ and split back into their components.
func TestScopedNameNeverCollides(t *testing.T) {
	component := rapid.StringOfN(rapid.SampledFrom([]rune{'a', 'b', '/', ' ', 'é', '\n'}), 0, 4, -1)
	components := rapid.SliceOfN(component, 2, 4)
	rapid.Check(t, func(t *rapid.T) {
		a, b := components.Draw(t, "a"), components.Draw(t, "b")
		nameA, errA := chain.ScopedName(a[0], a[1], a[2:]...)
		nameB, errB := chain.ScopedName(b[0], b[1], b[2:]...)
		if errA == nil && !reflect.DeepEqual(chain.SplitScopedName(nameA), a) {
			t.Fatalf("%q splits into %q", nameA, chain.SplitScopedName(nameA))
		}
		if errA == nil && errB == nil && nameA == nameB && !reflect.DeepEqual(a, b) {
			t.Fatalf("%q and %q both give %q", a, b, nameA)
		}
		if errA == nil && chain.ValidateChain(nameA) != nil {
			t.Fatalf("%q is not a valid chain id", nameA)
		}
	})
}
