package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestInitCreatesAFileOnceAndChangesNothingAfter(t *testing.T) {
	t.Parallel()
	l := newFileLedger(t)
	golden(t, "init_created", l.normalize(l.must("init")))
	info, err := os.Stat(l.name)
	if err != nil {
		t.Fatal(err)
	}
	if mode := info.Mode().Perm(); mode != 0o600 {
		t.Fatalf("ledger file mode %v, want 0600", mode)
	}
	l.must("append", "acme/x", "--type", "t/v1", "--data", "a")
	before, err := os.ReadFile(l.name)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "init_exists_json", l.normalize(l.must("init", "-o", "json")))
	after, err := os.ReadFile(l.name)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatal("init on an existing ledger changed the file")
	}
}

func TestInitRefusesAFileThatIsNotALedger(t *testing.T) {
	t.Parallel()
	l := newFileLedger(t)
	content := []byte("this is a spreadsheet, not a ledger\n")
	if err := os.WriteFile(l.name, content, 0o600); err != nil {
		t.Fatal(err)
	}
	l.run("-o", "json", "init").expect(t, exitStorage, `"code":"CORRUPT"`)
	after, err := os.ReadFile(l.name)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(after, content) {
		t.Fatal("init changed a file that is not a ledger")
	}
}

func TestInitInAMissingFolderCreatesNothing(t *testing.T) {
	t.Parallel()
	l := newFileLedger(t)
	l.name = filepath.Join(l.dir, "no-such-folder", "ledger.db")
	l.run("init").expect(t, exitStorage, "no-such-folder")
	if _, err := os.Stat(filepath.Dir(l.name)); !os.IsNotExist(err) {
		t.Fatalf("folder created or stat failed: %v", err)
	}
}

func TestInitOnEveryBackend(t *testing.T) {
	t.Parallel()
	for _, l := range testLedgers(t) {
		t.Run(l.backend, func(t *testing.T) {
			l.t = t
			l.run("chains").expect(t, exitStorage, "")
			created := l.must("-o", "json", "init")
			if want := `"created":true`; !bytes.Contains([]byte(created), []byte(want)) {
				t.Fatalf("first init printed %q, want %s", created, want)
			}
			again := l.must("-o", "json", "init")
			if want := `"created":false`; !bytes.Contains([]byte(again), []byte(want)) {
				t.Fatalf("second init printed %q, want %s", again, want)
			}
			if got := l.must("chains"); got != "" {
				t.Fatalf("a new ledger lists chains: %q", got)
			}
		})
	}
}
