package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/storage/bolt"
	"github.com/ledgerworks/ledger/storage/postgres"
)

// version and --version print the same build facts, as text or JSON, and
// touch no ledger.
func TestVersion(t *testing.T) {
	l := newFileLedger(t)
	text := l.must("version")
	if again := l.must("--version"); again != text {
		t.Fatalf("--version %q, version %q", again, text)
	}
	for _, want := range []string{"ledgerctl ", "module:          github.com/ledgerworks/ledger\n", "go:              go",
		"entry format:    v1\n", "file format:     " + bolt.Format + " (reads " + bolt.FormatV1,
		fmt.Sprintf("postgres schema: %d\n", postgres.SchemaVersion())} {
		if !strings.Contains(text, want) {
			t.Errorf("version lacks %q:\n%s", want, text)
		}
	}
	var v api.Version
	if err := json.Unmarshal([]byte(l.must("version", "-o", "json")), &v); err != nil {
		t.Fatal(err)
	}
	if v.Module != "github.com/ledgerworks/ledger" || v.Version == "" || v.GoVersion == "" || v.Format != "v1" ||
		v.FileFormat != bolt.Format || v.PostgresSchema != postgres.SchemaVersion() || len(v.FileFormatsRead) != 3 {
		t.Fatalf("version -o json %+v", v)
	}
	if _, err := os.Stat(l.name); !os.IsNotExist(err) {
		t.Fatalf("version touched the ledger: %v", err)
	}
	l.run("version", "extra").expect(t, exitUsage, "takes no arguments")
	l.run("--version", "extra").expect(t, exitUsage, "unknown command")
}

func TestVersionTextNamesRevisionWhenRecorded(t *testing.T) {
	text := versionText(api.Version{Module: "m", Version: "v0.1.0", VCSRevision: "abc", VCSTime: "2026-12-01T00:00:00Z",
		VCSModified: true, GoVersion: "go1.26.0", Format: "v1", FileFormat: "f3", FileFormatsRead: []string{"f1", "f3"}, PostgresSchema: 2})
	want := "ledgerctl v0.1.0\nmodule:          m\nrevision:        abc (modified)\nrevision time:   2026-12-01T00:00:00Z\n" +
		"go:              go1.26.0\nentry format:    v1\nfile format:     f3 (reads f1, f3)\npostgres schema: 2\n"
	if text != want {
		t.Fatalf("got\n%s\nwant\n%s", text, want)
	}
}
