package bolt

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestCreateNamesOnlyAFormattedFile: while a new ledger is being formatted
// (where a process killed before left an unreadable file), nothing exists
// under its name yet.
func TestCreateNamesOnlyAFormattedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	called := false
	hook := func(name string) {
		if filepath.Dir(name) != filepath.Dir(path) {
			return // another test's ledger
		}
		called = true
		if name == path {
			t.Errorf("formatted at %s, want a temporary name", name)
		}
		if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s exists before it is formatted (%v)", path, err)
		}
	}
	createdTemporary.Store(&hook)
	t.Cleanup(func() { createdTemporary.Store(nil) })
	b, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if !called {
		t.Fatal("a new ledger was not formatted under a temporary name")
	}
}
