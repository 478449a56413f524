package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/storage/bolt"
)

// TestExportRefusesTheLedgerAsOutput names the ledger file, its log folder
// and files in it through other names, symbolic links and a hard link: each
// is refused with exit 2 and the ledger is unchanged, byte for byte.
func TestExportRefusesTheLedgerAsOutput(t *testing.T) {
	t.Parallel()
	l := newFileLedger(t)
	l.seed()
	before := l.snapshot()
	bytesBefore, err := os.ReadFile(l.name)
	if err != nil {
		t.Fatal(err)
	}
	logFolder := l.name + bolt.LogDirectorySuffix
	link := func(target, name string, hard bool) string {
		t.Helper()
		path := filepath.Join(l.dir, name)
		var err error
		if hard {
			err = os.Link(target, path)
		} else {
			err = os.Symlink(target, path)
		}
		if err != nil {
			t.Fatal(err)
		}
		return path
	}
	symlink := link(l.name, "link.db", false)
	hardLink := link(l.name, "hard.db", true)
	if err := os.Mkdir(filepath.Join(l.dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	up := link("..", "sub/up", false)
	logLink := link(logFolder, "log-link", false) // dangling until the folder exists
	cases := []struct {
		name, out, part string
		makeLog         bool // the log folder exists, as while a writer has it open
	}{
		{"the ledger", l.name, "is the ledger file", false},
		{"relative through ..", filepath.Join(l.dir, "sub", "..", "ledger.db"), "is the ledger file", false},
		{"symbolic link", symlink, "is the ledger file", false},
		{"hard link", hardLink, "is the ledger file", false},
		{"through a linked folder", filepath.Join(up, "ledger.db"), "is the ledger file", false},
		{"the log folder, absent", logFolder, "is the log folder of", false},
		{"in the log folder, absent", filepath.Join(logFolder, "00000001.log"), "is a file in the log folder of", false},
		{"the log folder", logFolder, "is the log folder of", true},
		{"in the log folder", filepath.Join(logFolder, "00000001.log"), "is a file in the log folder of", true},
		{"in the log folder through a link", filepath.Join(logLink, "x"), "is a file in the log folder of", true},
		{"in the log folder through a linked folder", filepath.Join(up, "ledger.db-wal", "x"), "is a file in the log folder of", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.makeLog {
				if err := os.Mkdir(logFolder, 0o700); err != nil {
					t.Fatal(err)
				}
				defer os.Remove(logFolder)
			}
			r := l.run("-o", "json", "export", "--all", "--out", c.out)
			r.expect(t, exitUsage, `"code":"INVALID_INPUT"`)
			if !strings.Contains(r.stderr, c.part) || !strings.Contains(r.stderr, "nothing written") {
				t.Fatalf("stderr %q does not say %q", r.stderr, c.part)
			}
			if c.makeLog {
				entries, err := os.ReadDir(logFolder)
				if err != nil || len(entries) != 0 {
					t.Fatalf("log folder holds %v (%v)", entries, err)
				}
			}
		})
	}
	if got, err := os.ReadFile(l.name); err != nil || !bytes.Equal(got, bytesBefore) {
		t.Fatalf("the ledger file changed (%v)", err)
	}
	if after := l.snapshot(); after != before {
		t.Fatalf("ledger changed:\n%s\nwant\n%s", after, before)
	}
	// A file beside the ledger is written as before.
	l.must("export", "--all", "--out", filepath.Join(l.dir, "ledger.db.jsonl"))
}

// TestStandardOutputIsNotTheLedger runs commands whose standard output is
// the ledger file opened for appending (`>> ledger.db`): refused with exit 2
// before anything is written.
func TestStandardOutputIsNotTheLedger(t *testing.T) {
	t.Parallel()
	l := newFileLedger(t)
	l.seed()
	bytesBefore, err := os.ReadFile(l.name)
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"export", "--all"}, {"log", "acme/audit/events"}, {"append", "acme/x", "--type", "t/v1", "--data", "d"}} {
		f, err := os.OpenFile(l.name, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		a := &app{environment: func(string) string { return "" }, clock: time.Now}
		code := execute(context.Background(), a, append([]string{"--db", l.name}, args...), strings.NewReader(""), f, &stderr)
		f.Close()
		if code != exitUsage || !strings.Contains(stderr.String(), "standard output is the ledger file") {
			t.Fatalf("%v: exit %d, stderr %q", args, code, stderr.String())
		}
	}
	if got, err := os.ReadFile(l.name); err != nil || !bytes.Equal(got, bytesBefore) {
		t.Fatalf("the ledger file changed (%v)", err)
	}
	if _, err := os.Stat(l.name + bolt.LogDirectorySuffix); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a log folder appeared: %v", err)
	}
}

// TestImportDoesNotSpoolIntoTheLog: import --file - keeps standard input in
// a file under TMPDIR, which must not be the ledger's log folder.
func TestImportDoesNotSpoolIntoTheLog(t *testing.T) {
	source := newFileLedger(t)
	source.seed()
	export := source.must("export", "--all")
	l := newFileLedger(t)
	l.must("init")
	logFolder := l.name + bolt.LogDirectorySuffix
	if err := os.Mkdir(logFolder, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", logFolder)
	l.runWithInput(export, "import", "--file", "-").expect(t, exitUsage, "is a file in the log folder of")
	if entries, err := os.ReadDir(logFolder); err != nil || len(entries) != 0 {
		t.Fatalf("log folder holds %v (%v)", entries, err)
	}
	if err := os.Remove(logFolder); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", t.TempDir())
	l.mustWithInput(export, "import", "--file", "-")
}
