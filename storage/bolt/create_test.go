package bolt_test

import (
	"os"
	"path/filepath"
	"testing"

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
