package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ledgerworks/ledger/internal/testbin"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Remove()
	os.Exit(code)
}

// process runs the binary once; the environment has no LEDGER_DB unless
// given, and TMPDIR is the test's.
type process struct {
	t   *testing.T
	env []string
}

func newProcess(t *testing.T, env ...string) *process {
	var base []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, databaseEnvironment+"=") && !strings.HasPrefix(kv, "TMPDIR=") {
			base = append(base, kv)
		}
	}
	return &process{t: t, env: append(append(base, "TMPDIR="+t.TempDir()), env...)}
}

func (p *process) command(ctx context.Context, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	cmd := exec.CommandContext(ctx, testbin.Ledgerctl(p.t), args...)
	cmd.Env = p.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return cmd, &stdout, &stderr
}

// run runs the binary to its end and returns its output and exit code.
func (p *process) run(args ...string) cliResult {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd, stdout, stderr := p.command(ctx, args...)
	return finish(p.t, cmd.Run(), stdout, stderr)
}

func finish(t *testing.T, err error, stdout, stderr *bytes.Buffer) cliResult {
	t.Helper()
	r := cliResult{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	default:
		t.Fatalf("running ledgerctl: %v", err)
	}
	return r
}

func TestBinaryExitCodes(t *testing.T) {
	t.Parallel()
	p := newProcess(t)
	db := filepath.Join(t.TempDir(), "ledger.db")
	cases := []struct {
		name string
		args []string
		code int
		json string // the error code on stderr, when it fails
	}{
		{"missing ledger", []string{"chains"}, exitStorage, codeStorage},
		{"init", []string{"init"}, exitSuccess, ""},
		{"append", []string{"append", "acme/x", "--type", "t/v1", "--key", "k", "--data", "one"}, exitSuccess, ""},
		{"replay", []string{"append", "acme/x", "--type", "t/v1", "--key", "k", "--data", "one"}, exitSuccess, ""},
		{"conflict", []string{"append", "acme/x", "--type", "t/v1", "--key", "k", "--data", "two"}, exitConflict, codeConflict},
		{"invalid input", []string{"append", "acme/x", "--type", "", "--data", "two"}, exitUsage, codeInvalidInput},
		{"usage", []string{"get", "acme/x"}, exitUsage, codeUsage},
		{"not found", []string{"get", "acme/x", "2"}, exitNotFound, codeNotFound},
		{"verify", []string{"verify"}, exitSuccess, ""},
	}
	for _, c := range cases {
		r := p.run(append([]string{"--db", db, "-o", "json"}, c.args...)...)
		if r.code != c.code {
			t.Fatalf("%s: exit %d, want %d (stderr %q)", c.name, r.code, c.code, r.stderr)
		}
		if c.json != "" && !strings.Contains(r.stderr, `"code":"`+c.json+`"`) {
			t.Fatalf("%s: stderr %q lacks code %s", c.name, r.stderr, c.json)
		}
		if c.json == "" && r.stderr != "" {
			t.Fatalf("%s: stderr %q on success (a progress bar when piped?)", c.name, r.stderr)
		}
	}
	flipPayloadByte(t, db, "acme/x", 1)
	r := p.run("--db", db, "-o", "json", "verify")
	if r.code != exitVerification || !strings.Contains(r.stdout, `"reason":"hash_mismatch"`) {
		t.Fatalf("verify of a tampered ledger: %+v", r)
	}
	corrupt := filepath.Join(t.TempDir(), "corrupt.db")
	if err := os.WriteFile(corrupt, bytes.Repeat([]byte{0xab}, 8192), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := p.run("--db", corrupt, "-o", "json", "chains"); r.code != exitStorage || !strings.Contains(r.stderr, codeCorrupt) {
		t.Fatalf("corrupt file: %+v", r)
	}
}

func TestBinaryWaitsForALockedFileThenExits5(t *testing.T) {
	t.Parallel()
	p := newProcess(t)
	db := filepath.Join(t.TempDir(), "ledger.db")
	if r := p.run("--db", db, "init"); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	// This test's process holds the file, as a running service would.
	holder, err := chain.Open(db, chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const timeout = 500 * time.Millisecond
	start := time.Now()
	r := p.run("--db", db, "--lock-timeout", timeout.String(), "-o", "json", "append", "acme/x", "--type", "t", "--data", "d")
	waited := time.Since(start)
	if r.code != exitStorage || !strings.Contains(r.stderr, `"code":"LOCKED"`) || !strings.Contains(r.stderr, db) {
		t.Fatalf("append on a held file: %+v", r)
	}
	// bbolt retries the lock every 50ms and gives up within one retry of
	// the timeout.
	if waited < timeout-100*time.Millisecond {
		t.Fatalf("gave up after %v, well before --lock-timeout %v", waited, timeout)
	}
	// Readers wait too: the holder writes.
	if r := p.run("--db", db, "--lock-timeout", "0", "chains"); r.code != exitStorage || !strings.Contains(r.stderr, "locked") {
		t.Fatalf("chains on a held file: %+v", r)
	}
	// A process that is still waiting when the holder lets go proceeds.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd, stdout, stderr := p.command(ctx, "--db", db, "--lock-timeout", "30s", "-o", "json", "append", "acme/x", "--type", "t", "--data", "d")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if err := holder.Close(); err != nil {
		t.Fatal(err)
	}
	r = finish(t, cmd.Wait(), stdout, stderr)
	if r.code != 0 || !strings.Contains(r.stdout, `"seq":1,`) {
		t.Fatalf("append after the holder closed: %+v", r)
	}
}

func TestBinaryExportVerifyRoundTrip(t *testing.T) {
	t.Parallel()
	p := newProcess(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "ledger.db")
	p.run("--db", db, "init")
	for i := range 6 {
		if r := p.run("--db", db, "append", "acme/journal/books", "--type", "fin.posting/v1", "--key", fmt.Sprint("p-", i),
			"--data", fmt.Sprintf(`{"dr":"1200","cr":"4000","amount":"%d.00"}`, 10*(i+1))); r.code != 0 {
			t.Fatalf("%+v", r)
		}
	}
	head := strings.TrimSpace(p.run("--db", db, "head", "acme/journal/books").stdout)
	export := filepath.Join(dir, "books.jsonl")
	if r := p.run("--db", db, "export", "acme/journal/books", "--out", export); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	if r := p.run("verify", "--file", export, "--expect-head", head); r.code != 0 || r.stdout != "intact: 1 chain, 6 entries verified\n" {
		t.Fatalf("verify of the export: %+v", r)
	}
	lines := readLines(t, export)
	tampered := writeLines(t, dir, "tampered.jsonl", replaceLine(lines, 2, `"idempotency_key":"p-2"`, `"idempotency_key":"p-9"`))
	truncated := writeLines(t, dir, "truncated.jsonl", lines[:5])
	cut := writeLines(t, dir, "cut.jsonl", append(append([]string{}, lines[:5]...), lines[5][:len(lines[5])/2]))
	for _, c := range []struct {
		name, file, reason string
		seq                uint64
	}{
		{"tampered", tampered, "hash_mismatch", 3},
		{"truncated", truncated, "head_mismatch", 6},
		{"cut", cut, "undecodable", 6},
	} {
		r := p.run("-o", "json", "verify", "--file", c.file, "--expect-head", head)
		var report verifyJSON
		if err := json.Unmarshal([]byte(r.stdout), &report); err != nil {
			t.Fatalf("%s: %v in %+v", c.name, err, r)
		}
		if r.code != exitVerification || report.OK || report.Failures[0].Reason != c.reason || report.Failures[0].Seq != c.seq {
			t.Fatalf("%s: exit %d report %+v, want exit 1 with %s at seq %d", c.name, r.code, report, c.reason, c.seq)
		}
	}
	// Without the saved head, a cleanly truncated export still verifies:
	// that is why auditors keep heads.
	if r := p.run("verify", "--file", truncated); r.code != 0 {
		t.Fatalf("%+v", r)
	}
}

func TestBinaryImportRoundTripAndRefusal(t *testing.T) {
	t.Parallel()
	p := newProcess(t)
	dir := t.TempDir()
	source := filepath.Join(dir, "source.db")
	p.run("--db", source, "init")
	for i := range 3 {
		p.run("--db", source, "append", "acme/scanner/WH-1/dock-2", "--type", "scan/v1", "--key", fmt.Sprint("m-", i), "--data", fmt.Sprint(i))
	}
	p.run("--db", source, "append", "acme/audit/events", "--type", "audit.event/v1", "--data", "x")
	export := filepath.Join(dir, "export.jsonl")
	if r := p.run("--db", source, "export", "--all", "--out", export); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	target := filepath.Join(dir, "target.db")
	if r := p.run("--db", target, "import", "--file", export); r.code != 0 {
		t.Fatalf("import: %+v", r)
	}
	again := p.run("--db", target, "export", "--all")
	original, err := os.ReadFile(export)
	if err != nil {
		t.Fatal(err)
	}
	if again.code != 0 || again.stdout != string(original) {
		t.Fatal("the imported ledger exports differently")
	}
	lines := readLines(t, export)
	broken := writeLines(t, dir, "broken.jsonl", replaceLine(lines, 2, `"seq":2`, `"seq":3`))
	refusedTarget := filepath.Join(dir, "refused.db")
	if r := p.run("--db", refusedTarget, "import", "--file", broken); r.code != exitVerification {
		t.Fatalf("import of a broken export: %+v", r)
	}
	if _, err := os.Stat(refusedTarget); !os.IsNotExist(err) {
		t.Fatalf("a refused import created the ledger: %v", err)
	}
	// A ledger that went its own way refuses the file and keeps its entries.
	p.run("--db", refusedTarget, "init")
	if r := p.run("--db", refusedTarget, "append", "acme/audit/events", "--type", "audit.event/v1", "--data", "y"); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	before := p.run("--db", refusedTarget, "export", "--all").stdout
	if r := p.run("--db", refusedTarget, "-o", "json", "import", "--file", export); r.code != exitUsage || !strings.Contains(r.stderr, "differs") {
		t.Fatalf("import into a diverged ledger: %+v", r)
	}
	if after := p.run("--db", refusedTarget, "export", "--all").stdout; after != before {
		t.Fatal("a refused import wrote")
	}
}

func TestBinarySameKeyFromSeveralProcesses(t *testing.T) {
	t.Parallel()
	p := newProcess(t)
	db := filepath.Join(t.TempDir(), "ledger.db")
	p.run("--db", db, "init")
	sameKeyFromSeveralProcesses(t, p, db)
}

func TestBinarySameKeyFromSeveralProcessesOnPostgres(t *testing.T) {
	t.Parallel()
	if !pgtest.Available(t) {
		t.Skip("needs PostgreSQL")
	}
	l := newPostgresLedger(t)
	p := newProcess(t)
	if r := p.run("--db", l.name, "init"); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	sameKeyFromSeveralProcesses(t, p, l.name)
}

// sameKeyFromSeveralProcesses starts several processes that append one
// request with one key at once: exactly one entry is written, and every
// process prints it.
func sameKeyFromSeveralProcesses(t *testing.T, p *process, db string) {
	const processes = 8
	results := make([]cliResult, processes)
	var wg sync.WaitGroup
	for i := range processes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd, stdout, stderr := p.command(ctx, "--db", db, "--lock-timeout", "50s", "-o", "json",
				"append", "acme/journal/books", "--type", "fin.posting/v1", "--key", "invoice-4711", "--data", `{"amount":"119.00"}`)
			err := cmd.Run()
			r := cliResult{stdout: stdout.String(), stderr: stderr.String()}
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				r.code = exit.ExitCode()
			} else if err != nil {
				r.code, r.stderr = -1, err.Error()
			}
			results[i] = r
		}()
	}
	wg.Wait()
	appended := 0
	var first appendedJSON
	for i, r := range results {
		if r.code != 0 {
			t.Fatalf("process %d: %+v", i, r)
		}
		var got appendedJSON
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatalf("process %d printed %q", i, r.stdout)
		}
		if !got.Replayed {
			appended++
		}
		got.Replayed = false
		if i == 0 {
			first = got
		} else if got != first {
			t.Fatalf("process %d printed another entry:\n%+v\n%+v", i, got, first)
		}
	}
	if appended != 1 || first.Seq != 1 {
		t.Fatalf("%d processes appended, seq %d; want exactly one append at seq 1", appended, first.Seq)
	}
	if head := p.run("--db", db, "head", "acme/journal/books"); !strings.HasPrefix(head.stdout, "acme/journal/books:1:"+first.Hash) {
		t.Fatalf("head %+v", head)
	}
}

func TestBinaryDemoRunsFromNothing(t *testing.T) {
	t.Parallel()
	p := newProcess(t)
	start := time.Now()
	r := p.run("demo")
	if r.code != 0 {
		t.Fatalf("demo: %+v", r)
	}
	path, ok := strings.CutPrefix(strings.SplitN(r.stdout, "\n", 2)[0], "ledger: ")
	if !ok {
		t.Fatalf("demo's first line is not the ledger's path: %.100q", r.stdout)
	}
	if v := p.run("--db", path, "verify"); v.code != 0 {
		t.Fatalf("verify of the demo ledger: %+v", v)
	}
	t.Logf("demo ran in %v", time.Since(start))
}

func TestBinaryLedgerFromEnvironment(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "env.db")
	p := newProcess(t, databaseEnvironment+"="+db)
	if r := p.run("init"); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	if _, err := os.Stat(db); err != nil {
		t.Fatalf("LEDGER_DB not used: %v", err)
	}
}

func TestBinaryProgressBarOnATerminalOnly(t *testing.T) {
	t.Parallel()
	script, err := exec.LookPath("script")
	if err != nil || runtime.GOOS != "linux" {
		t.Skip("needs util-linux script(1) to give the process a terminal")
	}
	// Enough entries for the engine to report progress before the end,
	// written by an import (the built binary is faster than this test
	// under the race detector).
	dir := t.TempDir()
	db := filepath.Join(dir, "ledger.db")
	var lines []byte
	for c := range 2 {
		name := fmt.Sprint("acme/load/", c)
		prev := chain.Genesis(name)
		for seq := uint64(1); seq <= 10_000; seq++ {
			e := chain.Entry{Chain: name, Seq: seq, PrevHash: prev, TimeUnixNano: int64(seq), Type: "t/v1", Payload: []byte("p")}
			e.Hash = e.ComputeHash()
			prev = e.Hash
			lines = chain.AppendExportLine(lines, &e)
		}
	}
	export := filepath.Join(dir, "load.jsonl")
	if err := os.WriteFile(export, lines, 0o600); err != nil {
		t.Fatal(err)
	}
	p := newProcess(t)
	for _, args := range [][]string{{"import", "--file", export}, {"verify"}} {
		piped := p.run(append([]string{"--db", db}, args...)...)
		if piped.code != 0 || piped.stderr != "" {
			t.Fatalf("piped %v: %+v", args, piped)
		}
	}
	// script runs the command on a pseudo-terminal and copies what it
	// draws to its own stdout.
	r := p.run0(script, "-qec", testbin.Ledgerctl(t)+" --db "+shellQuote(db)+" verify", "/dev/null")
	if r.code != 0 || !strings.Contains(r.stdout, "verifying") || !strings.Contains(r.stdout, "intact: 2 chains, 20000 entries verified") {
		t.Fatalf("verify on a terminal drew no progress bar: %+v", r)
	}
}

// run0 runs another program with the process's environment.
func (p *process) run0(program string, args ...string) cliResult {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, program, args...)
	cmd.Env = p.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return finish(p.t, cmd.Run(), &stdout, &stderr)
}

// TestBinaryFailedCommitIsOneErrorOnStderr appends a payload the ledger file
// cannot grow to hold (the process's file size limit stands in for a full
// disk): the commit fails inside the engine, and stderr holds exactly one
// error — one JSON object with -o json — and no log line, unless
// --log-level asks for the engine's logs. Nothing is written.
func TestBinaryFailedCommitIsOneErrorOnStderr(t *testing.T) {
	t.Parallel()
	shell, err := exec.LookPath("sh")
	if err != nil || runtime.GOOS != "linux" {
		t.Skip("needs a POSIX shell's ulimit -f on Linux")
	}
	p := newProcess(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "ledger.db")
	if r := p.run("--db", db, "init"); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	payload := filepath.Join(dir, "payload")
	if err := os.WriteFile(payload, bytes.Repeat([]byte("0123456789abcdef"), 512<<10/16), 0o600); err != nil {
		t.Fatal(err)
	}
	// 256 blocks (128 KiB, or 256 KiB where a block is 1 KiB) keeps the
	// 32 KiB ledger file from growing by the 512 KiB payload.
	limited := func(args ...string) cliResult {
		script := `ulimit -f 256 && exec "$0" "$@"`
		return p.run0(shell, append([]string{"-c", script, testbin.Ledgerctl(t), "--db", db}, args...)...)
	}
	appendArgs := []string{"append", "acme/x", "--type", "t/v1", "--key", "k", "--data", "@" + payload}

	r := limited(append([]string{"-o", "json"}, appendArgs...)...)
	if r.code != exitStorage || r.stdout != "" {
		t.Fatalf("append beyond the file size limit: %+v", r)
	}
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	var e errorJSON
	if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &e) != nil || e.Error.Code != codeStorage ||
		!strings.Contains(e.Error.Message, "file too large") {
		t.Fatalf("stderr is not one JSON error object: %q", r.stderr)
	}
	if r := limited(appendArgs...); r.code != exitStorage || strings.Count(r.stderr, "\n") != 1 ||
		!strings.HasPrefix(r.stderr, "ledgerctl: ") {
		t.Fatalf("text stderr is not one line: %+v", r)
	}
	// Asked for, the engine's log comes first, as a JSON line of its own.
	r = limited(append([]string{"-o", "json", "--log-level", "error"}, appendArgs...)...)
	lines = strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	var logLine struct{ Level, Msg string }
	if r.code != exitStorage || len(lines) != 2 || json.Unmarshal([]byte(lines[0]), &logLine) != nil ||
		logLine.Level != "ERROR" || json.Unmarshal([]byte(lines[1]), &e) != nil || e.Error.Code != codeStorage {
		t.Fatalf("--log-level error: %+v", r)
	}
	if r := p.run("--db", db, "-o", "json", "chains"); r.code != 0 || r.stdout != `{"chains":[]}`+"\n" {
		t.Fatalf("a failed commit wrote: %+v", r)
	}
}
