package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExportLineEndsThroughTheCommands: verify --file and import apply the
// same rules to line ends, empty lines and re-serialised lines.
func TestExportLineEndsThroughTheCommands(t *testing.T) {
	t.Parallel()
	source := newFileLedger(t)
	source.seed()
	export := source.must("export", "--all")
	spaced := strings.NewReplacer(`":`, `": `, `,"`, `, "`).Replace(export)
	for _, c := range []struct {
		name, content string
		ok            bool
		says          string
	}{
		{"trailing empty line", export + "\n", true, ""},
		{"trailing empty lines", export + "\n\n\n", true, ""},
		{"CR LF", strings.ReplaceAll(export, "\n", "\r\n"), false, "ends with CR LF; Format v1 lines end with LF (0x0A) alone"},
		{"empty line inside", strings.Replace(export, "\n", "\n\n", 1), false, "line 2: corrupt ledger: export line: empty"},
		{"spaces", spaced, false, "valid JSON with the Format v1 fields in a non-canonical form"},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(source.dir, strings.ReplaceAll(c.name, " ", "-")+".jsonl")
			if err := os.WriteFile(file, []byte(c.content), 0o600); err != nil {
				t.Fatal(err)
			}
			target := &testLedger{t: t, backend: "bolt", name: filepath.Join(t.TempDir(), "target.db"), dir: source.dir, next: clockStart}
			verify, imported := source.run("verify", "--file", file), target.run("import", "--file", file)
			if c.ok {
				if verify.code != exitSuccess || !strings.Contains(verify.stdout, "entries verified") {
					t.Fatalf("verify --file: exit %d, %q %q", verify.code, verify.stdout, verify.stderr)
				}
				if imported.code != exitSuccess {
					t.Fatalf("import: exit %d, %q", imported.code, imported.stderr)
				}
				if got := target.must("export", "--all"); got != export {
					t.Fatalf("imported ledger exports\n%s\nwant\n%s", got, export)
				}
				return
			}
			if verify.code != exitVerification || !strings.Contains(verify.stdout, c.says) {
				t.Fatalf("verify --file: exit %d, stdout %q, want %q", verify.code, verify.stdout, c.says)
			}
			if imported.code != exitVerification || !strings.Contains(imported.stdout, c.says) ||
				!strings.Contains(imported.stderr, "nothing written") {
				t.Fatalf("import: exit %d, stdout %q stderr %q", imported.code, imported.stdout, imported.stderr)
			}
			if _, err := os.Stat(target.name); err == nil {
				if got := target.must("chains"); strings.TrimSpace(got) != "" {
					t.Fatalf("refused import wrote %q", got)
				}
			}
		})
	}
}
