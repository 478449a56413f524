package bolt_test

import (
	"path/filepath"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage/bolt"
)

// TestOpenExistingWritesNothing: opening a current ledger for writing checks
// its format in a read transaction; only a new file needs a write (and its
// fsync).
func TestOpenExistingWritesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	txid := func() int {
		t.Helper()
		b, err := bolt.Open(path, bolt.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		id := 0
		b.View(func(btx *bbolt.Tx) error { id = btx.ID(); return nil })
		return id
	}
	b, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	created := txid()
	if created == 0 {
		t.Fatal("creating the file committed no transaction")
	}
	for range 3 {
		b, err := bolt.Open(path, bolt.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if got := txid(); got != created {
		t.Fatalf("three writable opens moved the file from transaction %d to %d; want no commit", created, got)
	}
}
