package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
)

// exportOf seeds a ledger and exports it whole.
func exportOf(t *testing.T) (source *testLedger, export string) {
	source = newFileLedger(t)
	source.seed()
	export = filepath.Join(source.dir, "export.jsonl")
	source.must("export", "--all", "--out", export)
	return source, export
}

func TestImportRoundTrip(t *testing.T) {
	t.Parallel()
	source, export := exportOf(t)
	for _, l := range testLedgers(t) {
		t.Run(l.backend, func(t *testing.T) {
			l.t = t
			out := l.must("import", "--file", export)
			if l.backend == "bolt" {
				golden(t, "import", strings.ReplaceAll(out, export, "$EXPORT"))
			}
			if got, want := l.must("export", "--all"), source.must("export", "--all"); got != want {
				t.Fatalf("the import's export differs from the source's:\n%s\n%s", got, want)
			}
			l.must("verify")
			// Importing again finds everything present and writes nothing.
			before := l.snapshot()
			var again importJSON
			if err := json.Unmarshal([]byte(l.must("-o", "json", "import", "--file", export)), &again); err != nil {
				t.Fatal(err)
			}
			if again.Appended != 0 || again.Present != 8 || again.Chains != 3 || again.CreatedChains != 0 {
				t.Fatalf("second import %+v", again)
			}
			if l.snapshot() != before {
				t.Fatal("the second import wrote")
			}
			// Appends continue the imported chains, and retries replay imported entries.
			r := l.run("-o", "json", "append", "acme/audit/events", "--type", "audit.event/v1", "--key", "event-1", "--data", `{"event":"e1"}`)
			if r.code != 0 || !strings.Contains(r.stdout, `"seq":1,`) || !strings.Contains(r.stdout, `"replayed":true`) {
				t.Fatalf("retry of an imported key: %+v", r)
			}
			r = l.run("-o", "json", "append", "acme/audit/events", "--type", "audit.event/v1", "--key", "event-6", "--data", `{"event":"e6"}`)
			if r.code != 0 || !strings.Contains(r.stdout, `"seq":6,`) {
				t.Fatalf("append after import: %+v", r)
			}
		})
	}
}

func TestImportAppendsWhatTheLedgerLacks(t *testing.T) {
	t.Parallel()
	source, export := exportOf(t)
	l := newFileLedger(t)
	// A ledger that holds the first two entries of one chain: import the
	// file cut after them, then the whole file.
	lines := readLines(t, export)
	partial := writeLines(t, l.dir, "partial.jsonl", lines[:2])
	l.must("import", "--file", partial)
	var out importJSON
	if err := json.Unmarshal([]byte(l.must("-o", "json", "import", "--file", export)), &out); err != nil {
		t.Fatal(err)
	}
	if out.Present != 2 || out.Appended != 6 || out.CreatedChains != 2 || out.Chains != 3 || out.Entries != 8 {
		t.Fatalf("import %+v", out)
	}
	if l.must("export", "--all") != source.must("export", "--all") {
		t.Fatal("ledgers differ after the import")
	}
	// A ledger ahead of the file: everything in the file is present.
	shorter := writeLines(t, l.dir, "shorter.jsonl", lines[:3])
	if err := json.Unmarshal([]byte(l.must("-o", "json", "import", "--file", shorter)), &out); err != nil {
		t.Fatal(err)
	}
	if out.Present != 3 || out.Appended != 0 {
		t.Fatalf("import of a shorter file %+v", out)
	}
}

func TestImportRefusalsWriteNothing(t *testing.T) {
	t.Parallel()
	_, export := exportOf(t)
	lines := readLines(t, export)
	dir := t.TempDir()

	// A ledger whose acme/audit/events differs from the file's at seq 1.
	diverged := newFileLedger(t)
	diverged.must("init")
	diverged.must("append", "acme/audit/events", "--type", "audit.event/v1", "--key", "event-1", "--data", "something else")
	diverged.must("append", "zeta/other", "--type", "t", "--data", "d")

	cases := []struct {
		name   string
		file   string
		code   int
		stderr string
	}{
		{"tampered", writeLines(t, dir, "tampered.jsonl", replaceLine(lines, 2, `"payload":"eyJldmVudCI6ImUzIn0="`, `"payload":"eyJldmVudCI6ImU0In0="`)), exitVerification, "does not verify"},
		{"gap", writeLines(t, dir, "gap.jsonl", append(append([]string{}, lines[:2]...), lines[3:]...)), exitVerification, "does not verify"},
		{"cut line", writeLines(t, dir, "cut.jsonl", append(append([]string{}, lines[:6]...), lines[6][:50])), exitVerification, "does not verify"},
		{"not an export", writeLines(t, dir, "junk.jsonl", []string{"hello"}), exitVerification, "does not verify"},
		{"duplicate key", craftedExport(t, dir, "dupkey.jsonl", []string{"k", "k"}, []int64{1, 2}), exitUsage, "already held by seq 1"},
		{"time going back", craftedExport(t, dir, "time.jsonl", []string{"a", "b"}, []int64{2, 1}), exitUsage, "before the previous entry"},
		{"missing file", filepath.Join(dir, "missing.jsonl"), exitUsage, "INVALID_INPUT"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Into a ledger that does not exist: it is not created.
			fresh := newFileLedger(t)
			fresh.run("-o", "json", "import", "--file", c.file).expect(t, c.code, c.stderr)
			if _, err := os.Stat(fresh.name); !os.IsNotExist(err) {
				t.Fatalf("a refused import created the ledger: %v", err)
			}
			// Into an existing ledger: nothing changes.
			diverged.t = t
			before := diverged.snapshot()
			diverged.run("import", "--file", c.file).expect(t, c.code, "")
			if diverged.snapshot() != before {
				t.Fatal("a refused import wrote")
			}
		})
	}
	t.Run("diverged", func(t *testing.T) {
		diverged.t = t
		before := diverged.snapshot()
		r := diverged.run("-o", "json", "import", "--file", export)
		r.expect(t, exitUsage, "differs from the ledger's entry")
		if !strings.Contains(r.stderr, `"code":"INVALID_INPUT"`) || !strings.Contains(r.stderr, "nothing written") {
			t.Fatalf("stderr %s", r.stderr)
		}
		if diverged.snapshot() != before {
			t.Fatal("a refused import wrote")
		}
	})
	t.Run("usage", func(t *testing.T) {
		l := newFileLedger(t)
		l.run("import").expect(t, exitUsage, "--file")
	})
}

// craftedExport writes an export of chain acme/crafted whose entries have
// correct hashes and links but the given keys and times, which the ledger
// must refuse.
func craftedExport(t *testing.T, dir, name string, keys []string, times []int64) string {
	t.Helper()
	var b []byte
	prev := chain.Genesis("acme/crafted")
	for i, key := range keys {
		e := chain.Entry{Chain: "acme/crafted", Seq: uint64(i + 1), PrevHash: prev, TimeUnixNano: times[i],
			IdempotencyKey: key, Type: "t/v1", Payload: []byte{byte(i)}}
		e.Hash = e.ComputeHash()
		prev = e.Hash
		b = chain.AppendExportLine(b, &e)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestImportReadsTheFileAgainWhenItsEntriesDoNotFitInMemory(t *testing.T) {
	t.Parallel()
	source, export := exportOf(t)
	for _, bounds := range []struct{ entries, bytes int }{{3, 1 << 20}, {1 << 10, 40}} {
		l := newFileLedger(t)
		l.must("import", "--file", writeLines(t, l.dir, "partial.jsonl", readLines(t, export)[:2]))
		a := &app{database: l.name, lockTimeout: time.Second}
		db, err := a.openDB(t.Context(), false)
		if err != nil {
			t.Fatal(err)
		}
		plan := newImportPlan()
		plan.heldEntriesMax, plan.heldBytesMax = bounds.entries, bounds.bytes
		if err := planImport(t.Context(), db, export, plan); err != nil {
			t.Fatal(err)
		}
		if !plan.overflow || plan.pending != nil {
			t.Fatalf("bounds %+v: overflow %v, %d held", bounds, plan.overflow, len(plan.pending))
		}
		var reported int64
		appended, err := writeImport(t.Context(), db, export, plan, func(n int64) { reported = n })
		if err != nil || appended != 6 || reported != 6 {
			t.Fatalf("appended %d (progress %d): %v", appended, reported, err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if l.must("export", "--all") != source.must("export", "--all") {
			t.Fatal("ledgers differ after an import that read the file again")
		}
	}
}

// TestImportFromStandardInput: `--file -` imports what standard input
// holds, refuses a tampered stream without writing, and leaves no copy of
// the stream behind.
func TestImportFromStandardInput(t *testing.T) {
	spool := t.TempDir()
	t.Setenv("TMPDIR", spool) // os.CreateTemp's folder, to see it emptied
	source, export := exportOf(t)
	stream, err := os.ReadFile(export)
	if err != nil {
		t.Fatal(err)
	}
	l := newFileLedger(t)
	var out importJSON
	if err := json.Unmarshal([]byte(l.mustWithInput(string(stream), "-o", "json", "import", "--file", "-")), &out); err != nil {
		t.Fatal(err)
	}
	if out.File != "-" || out.Appended != 8 || out.Chains != 3 {
		t.Fatalf("import from standard input %+v", out)
	}
	if got, want := l.must("export", "--all"), source.must("export", "--all"); got != want {
		t.Fatalf("the import's export differs from the source's:\n%s\n%s", got, want)
	}
	// A tampered stream is refused and writes nothing.
	lines := readLines(t, export)
	tampered := strings.Join(replaceLine(lines, 2, `"payload":"eyJldmVudCI6ImUzIn0="`, `"payload":"eyJldmVudCI6ImU0In0="`), "\n") + "\n"
	fresh := newFileLedger(t)
	fresh.runWithInput(tampered, "import", "--file", "-").expect(t, exitVerification, "does not verify")
	if _, err := os.Stat(fresh.name); !os.IsNotExist(err) {
		t.Fatalf("a refused import created the ledger: %v", err)
	}
	left, err := filepath.Glob(filepath.Join(spool, "ledgerctl-import-*"))
	if err != nil || len(left) != 0 {
		t.Fatalf("copies of standard input left behind: %v %v", left, err)
	}
}

// An empty export (what `export --all` leaves in a pipe when it fails) is
// refused with exit 2 and creates no ledger; whitespace-only input too.
func TestImportRefusesAnEmptyExport(t *testing.T) {
	for _, l := range testLedgers(t) {
		t.Run(l.backend, func(t *testing.T) {
			l.t = t
			for _, input := range []string{"", "\n\n"} {
				r := l.runWithInput(input, "import", "--file", "-")
				r.expect(t, exitUsage, "holds no entries; nothing to import, nothing written")
				if r.stdout != "" {
					t.Fatalf("stdout %q", r.stdout)
				}
				// The ledger was not created: every other command still
				// finds it missing.
				l.run("chains").expect(t, exitStorage, "")
			}
			empty := filepath.Join(l.dir, "empty.jsonl")
			if err := os.WriteFile(empty, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			l.run("-o", "json", "import", "--file", empty).expect(t, exitUsage, `"code":"INVALID_INPUT"`)
		})
	}
}
