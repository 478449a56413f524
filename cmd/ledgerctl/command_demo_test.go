package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// runRaw runs a command line in-process exactly as given (no --db added).
func runRaw(t *testing.T, args ...string) cliResult {
	t.Helper()
	next := clockStart
	a := &app{
		clock: func() time.Time {
			now := next
			next = next.Add(time.Second)
			return now
		},
		environment: func(string) string { return "" },
	}
	var stdout, stderr bytes.Buffer
	code := execute(context.Background(), a, args, strings.NewReader(""), &stdout, &stderr)
	return cliResult{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

func TestDemoCreatesAFreshLedgerAndVerifiesIt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := runRaw(t, "demo", "--dir", dir)
	if r.code != 0 {
		t.Fatalf("demo: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	first, _, _ := strings.Cut(r.stdout, "\n")
	path, ok := strings.CutPrefix(first, "ledger: ")
	if !ok || !strings.HasPrefix(path, filepath.Join(dir, "ledgerctl-demo-")) {
		t.Fatalf("first line %q does not name a ledger in %s", first, dir)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"replayed=true", "refused, the key is held by seq 1", ": intact", "summary: ",
		"Idempotent-Replayed: true", "409 KEY_REUSED_WITH_DIFFERENT_REQUEST", "400 KEY_REQUIRED",
		"delivered by the server's outbox worker\n   to the ERP's webhook", "(the receiver dedupes on it); status done\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("demo output lacks %q:\n%s", want, r.stdout)
		}
	}
	// The summary's size is the size of the file the demo leaves.
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(" (%d bytes)\n", info.Size()); !strings.Contains(r.stdout, want) {
		t.Errorf("summary does not give the file's size %d bytes:\n%s", info.Size(), r.stdout)
	}
	// The ledger it leaves behind verifies, and holds the audit chain.
	verify := runRaw(t, "--db", path, "-o", "json", "verify")
	if verify.code != 0 || !strings.Contains(verify.stdout, `"ok":true`) {
		t.Fatalf("verify of the demo ledger: %+v", verify)
	}
	head := runRaw(t, "--db", path, "head", "acme/audit/erp-events")
	if head.code != 0 || !strings.HasPrefix(head.stdout, "acme/audit/erp-events:6:") {
		t.Fatalf("head: %+v", head)
	}
}

func TestDemoWritesOnlyAFreshLedger(t *testing.T) {
	t.Parallel()
	l := newFileLedger(t)
	r := l.run("demo")
	if r.code != 0 {
		t.Fatalf("demo --db new file: %+v", r)
	}
	if !strings.HasPrefix(r.stdout, "ledger: "+l.name+"\n") {
		t.Fatalf("demo did not use --db: %.100s", r.stdout)
	}
	before := l.snapshot()
	l.run("demo").expect(t, exitUsage, "fresh ledger")
	if l.snapshot() != before {
		t.Fatal("a refused demo wrote")
	}
}

func TestDemoStepsRunInOrderAndEndWithVerification(t *testing.T) {
	t.Parallel()
	steps := registeredDemoSteps()
	if len(steps) < 4 {
		t.Fatalf("%d steps registered", len(steps))
	}
	for i := 1; i < len(steps); i++ {
		if steps[i].order < steps[i-1].order {
			t.Fatalf("step %q (%d) after %q (%d)", steps[i].name, steps[i].order, steps[i-1].name, steps[i-1].order)
		}
	}
	if last := steps[len(steps)-1]; last.order != 90 {
		t.Fatalf("last step %q has order %d, want 90", last.name, last.order)
	}
}

func TestDemoOnPostgres(t *testing.T) {
	t.Parallel()
	if !pgtest.Available(t) {
		t.Skip("needs PostgreSQL")
	}
	l := newPostgresLedger(t)
	r := l.run("demo")
	if r.code != 0 {
		t.Fatalf("demo on PostgreSQL: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "ledger:ledger@") {
		t.Fatal("the demo printed the database password")
	}
	l.must("verify")
}

func TestDemoSummaryCountsWhatItShowedAndItsSuggestionsRun(t *testing.T) {
	t.Parallel()
	r := runRaw(t, "demo", "--dir", t.TempDir())
	if r.code != 0 {
		t.Fatalf("demo: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	// Each replay, conflict and refusal the steps print is counted once.
	_, steps, _ := strings.Cut(r.stdout, "\n== ") // after the introduction
	replays := strings.Count(steps, "replayed=true")
	if replays < 5 || !strings.Contains(r.stdout, "both transactions retried: replayed=true") {
		t.Fatalf("demo shows %d replays:\n%s", replays, r.stdout)
	}
	replays++ // the composed retry prints one line for two transactions
	refusals := strings.Count(steps, "(exit code 2 from ledgerctl")
	conflicts := strings.Count(steps, "(exit code 3 from ledgerctl")
	for _, want := range []string{
		fmt.Sprintf("  %d retried requests replayed the original entries and wrote nothing\n", replays),
		fmt.Sprintf("  %d idempotency conflict and %d requests refused by a rule wrote nothing\n", conflicts, refusals),
		"the state rebuilt from the chains by the apikey, fin, outbox, stock and valuations checks\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("demo output lacks %q:\n%s", want, r.stdout)
		}
	}
	if conflicts != 1 || refusals != 3 {
		t.Errorf("demo shows %d conflicts and %d refusals, want 1 and 3", conflicts, refusals)
	}
	// The commands it suggests run against the ledger it leaves.
	_, suggestions, ok := strings.Cut(r.stdout, "look around with:\n")
	if !ok {
		t.Fatalf("no suggestions:\n%s", r.stdout)
	}
	lines := strings.Split(strings.TrimSpace(suggestions), "\n")
	if len(lines) < 4 {
		t.Fatalf("suggestions %q", lines)
	}
	// The test binary was built by the go command, as go run builds.
	const program = "go run ./cmd/ledgerctl "
	for _, line := range lines {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), program)
		if !ok {
			t.Fatalf("suggestion %q does not start with %q", line, program)
		}
		if got := runRaw(t, strings.Fields(rest)...); got.code != 0 || got.stdout == "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", line, got.code, got.stdout, got.stderr)
		}
	}
}

// TestDemoProgram: the closing suggestions start ledgerctl as the user can:
// by its name when that is the program on PATH, through go run when go run
// built it, else by the path it was started with.
func TestDemoProgram(t *testing.T) {
	dir := t.TempDir()
	installed := filepath.Join(dir, "bin", "ledgerctl")
	other := filepath.Join(dir, "other", "ledgerctl")
	for _, path := range []string{installed, other} {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(path), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	onPath := func(string) (string, error) { return installed, nil }
	notOnPath := func(string) (string, error) { return "", exec.ErrNotFound }
	goRun := "/tmp/go-build1817700426/b001/exe/ledgerctl"
	goRunCached := "/root/.cache/go-build/34/346dc6-d/ledgerctl"
	for _, c := range []struct {
		executable, invoked string
		lookPath            func(string) (string, error)
		want                string
	}{
		{installed, "ledgerctl", onPath, "ledgerctl"},
		{goRun, goRun, notOnPath, "go run ./cmd/ledgerctl"},
		{goRunCached, goRunCached, onPath, "go run ./cmd/ledgerctl"},
		{other, "./ledgerctl", onPath, "./ledgerctl"},
		{other, "/opt/my tools/ledgerctl", notOnPath, "'/opt/my tools/ledgerctl'"},
	} {
		if got := chooseDemoProgram(c.executable, c.invoked, c.lookPath); got != c.want {
			t.Errorf("%s started as %s: %q, want %q", c.executable, c.invoked, got, c.want)
		}
	}
}
