package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/chain"
)

// TestAppendRefusesUnsafeNames: the rules for new names exit 2 with
// INVALID_INPUT and write nothing.
func TestAppendRefusesUnsafeNames(t *testing.T) {
	t.Parallel()
	l := newFileLedger(t)
	l.must("init")
	for _, args := range [][]string{
		{"append", "..", "--type", "t/v1", "--data", "x"},
		{"append", "/etc/passwd", "--type", "t/v1", "--data", "x"},
		{"append", "acme//x", "--type", "t/v1", "--data", "x"},
		{"append", "acme/./x", "--type", "t/v1", "--data", "x"},
		{"append", "acme/\u202egpj.exe", "--type", "t/v1", "--data", "x"},
		{"append", "acme/x", "--type", "t/v1", "--key", "order-\u20661", "--data", "x"},
		{"append", "acme/x", "--type", "t\u200b/v1", "--data", "x"},
	} {
		r := l.run(append([]string{"-o", "json"}, args...)...)
		r.expect(t, exitUsage, `"code":"INVALID_INPUT"`)
		if !strings.Contains(r.stderr, chain.ErrUnsafeName.Error()) {
			t.Fatalf("%q: stderr %q does not say %q", args, r.stderr, chain.ErrUnsafeName)
		}
	}
	if got := l.must("chains"); strings.TrimSpace(got) != "" {
		t.Fatalf("chains after refused appends: %q", got)
	}
}

// TestStoredUnsafeNamesStillWork imports an export whose entries carry names
// the rules for new names refuse, as a ledger written before them holds:
// log, get, verify, export and a second import all still work, and a new
// append to the same chain is refused.
func TestStoredUnsafeNamesStillWork(t *testing.T) {
	t.Parallel()
	var lines []string
	names := []string{"..", "/etc/passwd", "acme/\u202egpj.exe"}
	for i, name := range names {
		e := chain.Entry{Chain: name, Seq: 1, PrevHash: chain.Genesis(name), TimeUnixNano: clockStart.UnixNano() + int64(i),
			IdempotencyKey: "order-\u20661", Type: "t/v1", Payload: []byte("paid 100")}
		e.Hash = e.ComputeHash()
		lines = append(lines, strings.TrimSuffix(string(chain.AppendExportLine(nil, &e)), "\n"))
	}
	l := newFileLedger(t)
	file := filepath.Join(l.dir, "old.jsonl")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l.must("import", "--file", file)
	l.must("verify")
	l.must("verify", "--file", file)
	for _, name := range names {
		if got := l.must("log", name); !strings.Contains(got, "order-") {
			t.Fatalf("log %q: %q", name, got)
		}
		l.must("get", name, "1")
		l.run("append", name, "--type", "t/v1", "--data", "x").expect(t, exitUsage, chain.ErrUnsafeName.Error())
	}
	out := filepath.Join(l.dir, "again.jsonl")
	l.must("export", "--all", "--out", out)
	again := &testLedger{t: t, backend: "bolt", name: filepath.Join(l.dir, "again.db"), dir: l.dir, next: clockStart}
	again.must("import", "--file", out)
	if a, b := l.must("export", "--all"), again.must("export", "--all"); a != b {
		t.Fatalf("re-imported ledger exports\n%s\nwant\n%s", b, a)
	}
}
