package storagetest

import (
	"path/filepath"
	"testing"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// Factory opens a fresh, empty store for one test and closes it at cleanup.
type Factory struct {
	Name string
	Open func(t testing.TB) storage.Backend
}

// factories holds the registered backends; files of this package add theirs
// in init.
var factories = []Factory{{Name: "bolt", Open: OpenBolt}}

// Factories returns every registered backend. A backend that cannot run here
// (a database that is not configured) reports why through t and is left out.
func Factories(t testing.TB) []Factory {
	var usable []Factory
	for _, f := range factories {
		if f.Name != "bolt" && !available(t, f.Name) {
			continue
		}
		usable = append(usable, f)
	}
	return usable
}

// availability reports whether a non-default backend is configured; each
// backend's file registers its probe.
var availability = map[string]func(t testing.TB) bool{}

func available(t testing.TB, name string) bool {
	probe, ok := availability[name]
	return ok && probe(t)
}

// OpenBolt opens a bbolt file in a temporary folder. At cleanup it closes the
// file and runs bbolt's page consistency check on it.
func OpenBolt(t testing.TB) storage.Backend {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger.db")
	b, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatalf("open bolt: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		checked, err := bolt.Open(path, bolt.Options{ReadOnly: true})
		if err != nil {
			t.Errorf("reopen for consistency check: %v", err)
			return
		}
		defer checked.Close()
		if err := checked.Check(); err != nil {
			t.Errorf("consistency check: %v", err)
		}
	})
	return b
}
