package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExportWritesFormatV1Lines(t *testing.T) {
	t.Parallel()
	for _, l := range testLedgers(t) {
		t.Run(l.backend, func(t *testing.T) {
			l.t = t
			l.seed()
			golden(t, "export_stdout", l.must("export", "acme/scanner/WH-1/dock-2", "globex/audit/sign-ins"))
			all := l.must("export", "--all")
			if got := strings.Count(all, "\n"); got != 8 {
				t.Fatalf("--all exported %d lines, want 8", got)
			}
			// The chains named come in the order named.
			reversed := l.must("export", "globex/audit/sign-ins", "acme/audit/events")
			if !strings.HasPrefix(reversed, `{"chain":"globex/audit/sign-ins","seq":1,`) {
				t.Fatalf("export does not start with the first chain named: %.80s", reversed)
			}
		})
	}
}

func TestExportToAFile(t *testing.T) {
	t.Parallel()
	l := newFileLedger(t)
	l.seed()
	out := filepath.Join(l.dir, "books.jsonl")
	summary := l.must("export", "--all", "--out", out)
	asJSON := l.must("-o", "json", "export", "acme/audit/events", "--out", out+".2")
	golden(t, "export_file", l.normalize(summary+asJSON))
	info, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("export mode %v, want 0600", info.Mode().Perm())
	}
	content, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if string(content) != l.must("export", "--all") {
		t.Fatal("the file differs from the export on standard output")
	}
	var shape exportJSON
	if err := json.Unmarshal([]byte(asJSON), &shape); err != nil {
		t.Fatal(err)
	}
	if shape.Chains != 1 || shape.Entries != 5 || len(shape.Heads) != 1 || shape.Heads[0].Seq != 5 {
		t.Fatalf("summary %+v", shape)
	}
}

func TestExportRefusesWithoutWriting(t *testing.T) {
	t.Parallel()
	l := newFileLedger(t)
	l.seed()
	out := filepath.Join(l.dir, "out.jsonl")
	cases := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"missing chain", []string{"export", "acme/audit/events", "acme/nothing", "--out", out}, exitNotFound, "NOT_FOUND"},
		{"no chain", []string{"export", "--out", out}, exitUsage, "name at least one chain"},
		{"chains and all", []string{"export", "--all", "acme/audit/events", "--out", out}, exitUsage, "not both"},
		{"chain twice", []string{"export", "acme/audit/events", "acme/audit/events", "--out", out}, exitUsage, "named twice"},
		{"missing folder", []string{"export", "--all", "--out", filepath.Join(l.dir, "no", "out.jsonl")}, exitStorage, "STORAGE"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l.t = t
			r := l.run(append([]string{"-o", "json"}, c.args...)...)
			r.expect(t, c.code, c.stderr)
			if r.stdout != "" {
				t.Fatalf("stdout %q", r.stdout)
			}
		})
	}
	l.t = t
	r := l.run("export", "acme/audit/events", "acme/nothing")
	r.expect(t, exitNotFound, "not found")
	if r.stdout != "" {
		t.Fatalf("a refused export printed %d bytes", len(r.stdout))
	}
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "ledger.db" {
			t.Fatalf("a refused export left %s behind", e.Name())
		}
	}
}
