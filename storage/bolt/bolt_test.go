package bolt_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt"
	"github.com/ledgerworks/ledger/storage/storagetest"
)

func TestConformance(t *testing.T) {
	storagetest.Run(t, storagetest.OpenBolt)
}

func TestFileMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	b, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", info.Mode().Perm())
	}
}

func TestLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	b, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// bbolt's flock is per open file description, so a second Open in the
	// same process contends like another process would.
	_, err = bolt.Open(path, bolt.Options{LockTimeout: 50 * time.Millisecond})
	if !errors.Is(err, storage.ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
	if want := path; !contains(err.Error(), want) {
		t.Errorf("error %q does not name the file", err)
	}
}

func TestReadOnlyMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.db")
	if _, err := bolt.Open(path, bolt.Options{ReadOnly: true}); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("read-only open of missing file: %v", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("read-only open created the file")
	}
}

func TestNotALedger(t *testing.T) {
	path := filepath.Join(t.TempDir(), "junk.db")
	if err := os.WriteFile(path, []byte("this is not a bbolt file at all, just text"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := bolt.Open(path, bolt.Options{}); !errors.Is(err, storage.ErrCorrupt) {
		t.Fatalf("open of junk: %v, want ErrCorrupt", err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
