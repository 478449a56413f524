package bolt_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage/bolt"
)

// TestCreateLeavesOnlyAFormattedFile: a writable Open of a missing path
// leaves exactly the ledger file in its folder, formatted before it got its
// name, so a read-only Open right after reads it.
func TestCreateLeavesOnlyAFormattedFile(t *testing.T) {
	folder := t.TempDir()
	path := filepath.Join(folder, "ledger.db")
	b, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	names, err := os.ReadDir(folder)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 || names[0].Name() != "ledger.db" {
		t.Fatalf("folder holds %v, want only ledger.db", names)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != bolt.FileMode {
		t.Errorf("mode %v, want %v", info.Mode().Perm(), bolt.FileMode)
	}
	r, err := bolt.Open(path, bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open of a new ledger: %v", err)
	}
	r.Close()
}

// TestCreateKeepsAnExistingFile: a writable Open of an existing ledger
// neither replaces nor reformats it.
func TestCreateKeepsAnExistingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	b, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err = bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) {
		t.Error("a writable open of an existing ledger replaced the file")
	}
}

// TestOpenFormatsAFileLeftUnformatted: a file bbolt initialized but the
// ledger never formatted (a process killed between the two, before files
// were formatted under a temporary name) is formatted by a writable Open.
func TestOpenFormatsAFileLeftUnformatted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	raw, err := bbolt.Open(path, bolt.FileMode, bolt.BboltOptions(bolt.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	raw.Close()
	if _, err := bolt.Open(path, bolt.Options{ReadOnly: true}); err == nil {
		t.Fatal("a read-only open of an unformatted file succeeded")
	}
	b, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatalf("writable open of an unformatted file: %v", err)
	}
	b.Close()
	r, err := bolt.Open(path, bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open after formatting: %v", err)
	}
	r.Close()
}

// TestOpenRemovesLeftoverTemporaries: a writable Open removes the temporary
// file a killed creation left, once it is old and unlocked, and keeps a
// recent one (a creation may be about to lock it), a locked one (a creation
// is formatting it) and another ledger's; a read-only Open removes nothing.
func TestOpenRemovesLeftoverTemporaries(t *testing.T) {
	folder := t.TempDir()
	path := filepath.Join(folder, "ledger.db")
	open := func(readOnly bool) {
		t.Helper()
		b, err := bolt.Open(path, bolt.Options{ReadOnly: readOnly})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
	open(false)
	old := time.Now().Add(-time.Hour)
	leftover := func(name string, modified time.Time) string {
		t.Helper()
		full := filepath.Join(folder, name)
		if err := os.WriteFile(full, make([]byte, 4096), bolt.FileMode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(full, modified, modified); err != nil {
			t.Fatal(err)
		}
		return full
	}
	stale := leftover(".ledger.db.new-1", old)
	recent := leftover(".ledger.db.new-2", time.Now())
	other := leftover(".other.db.new-3", old)
	locked := filepath.Join(folder, ".ledger.db.new-4")
	formatting, err := bbolt.Open(locked, bolt.FileMode, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer formatting.Close()
	if err := os.Chtimes(locked, old, old); err != nil {
		t.Fatal(err)
	}
	exists := func(name string) bool {
		_, err := os.Lstat(name)
		return err == nil
	}

	open(true)
	if !exists(stale) {
		t.Fatal("a read-only Open removed a leftover")
	}
	open(false)
	if exists(stale) {
		t.Error("the old, unlocked leftover is still there")
	}
	if !exists(recent) || !exists(other) || !exists(locked) {
		t.Errorf("removed a file in use or another ledger's: recent %v, other %v, locked %v",
			exists(recent), exists(other), exists(locked))
	}
}
