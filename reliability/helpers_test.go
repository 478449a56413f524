package reliability

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/ledgerworks/ledger/internal/testbin"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/chain/chaintest"
)

// childEnvironment selects what a re-executed test binary does instead of
// running tests (see TestMain).
const childEnvironment = "LEDGER_RELIABILITY_CHILD"

// Child roles.
const (
	childCrash = "crash" // crash_test.go: run operations until killed
	childHold  = "hold"  // contention_test.go: hold the ledger open until stdin closes
)

func TestMain(m *testing.M) {
	switch role := os.Getenv(childEnvironment); role {
	case "":
	case childCrash:
		os.Exit(crashChild())
	case childHold:
		os.Exit(holdChild())
	default:
		fmt.Fprintf(os.Stderr, "unknown %s=%q\n", childEnvironment, role)
		os.Exit(2)
	}
	code := m.Run()
	for _, cleanup := range cleanups {
		cleanup()
	}
	testbin.Remove()
	os.Exit(code)
}

// cleanups run when every test has run: they remove what tests share.
// Tests add to it from their own goroutines, through atExit.
var (
	cleanupsMutex sync.Mutex
	cleanups      []func()
)

// atExit adds a cleanup.
func atExit(cleanup func()) {
	cleanupsMutex.Lock()
	defer cleanupsMutex.Unlock()
	cleanups = append(cleanups, cleanup)
}

// child returns a command that re-executes this test binary in a role.
func child(t testing.TB, role string, env ...string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatalf("executable: %v", err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnvironment+"="+role)
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// clockStart is the first time a test clock returns.
var clockStart = time.Unix(1_764_000_000, 0).UTC()

// testClock returns a clock that starts at clockStart and advances one
// millisecond per reading, so entry times are distinct and reproducible.
func testClock() func() time.Time {
	var readings atomic.Int64
	return func() time.Time {
		return clockStart.Add(time.Duration(readings.Add(1)) * time.Millisecond)
	}
}

// openFile opens (creating it when missing) the bbolt ledger at path and
// closes it at cleanup.
func openFile(t testing.TB, path string) *chain.DB {
	t.Helper()
	db, err := chain.Open(path, chain.Options{Clock: testClock()})
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// newFile opens a fresh ledger file in a temporary folder.
func newFile(t testing.TB) (*chain.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger.db")
	return openFile(t, path), path
}

// mustAppend appends and fails the test on error.
func mustAppend(t testing.TB, db *chain.DB, req chain.Request) chain.Result {
	t.Helper()
	res, err := db.Append(context.Background(), req)
	if err != nil {
		t.Fatalf("append %s/%q: %v", req.Chain, req.IdempotencyKey, err)
	}
	return res
}

// snapshot is everything a DB holds, read back through the public API.
type snapshot = chaintest.Snapshot

// takeSnapshot reads every chain, entry and state pair.
func takeSnapshot(t testing.TB, db *chain.DB) snapshot { return chaintest.TakeSnapshot(t, db) }

// diffSnapshots describes how two snapshots differ, or returns "" when they are
// equal.
func diffSnapshots(s, after snapshot) string {
	if reflect.DeepEqual(s, after) {
		return ""
	}
	var b strings.Builder
	if !reflect.DeepEqual(s.Heads, after.Heads) {
		fmt.Fprintf(&b, "heads: before %v, after %v; ", s.Heads, after.Heads)
	}
	for c, entries := range after.Entries {
		if len(entries) != len(s.Entries[c]) {
			fmt.Fprintf(&b, "chain %q: %d entries before, %d after; ", c, len(s.Entries[c]), len(entries))
		}
	}
	for k, v := range after.State {
		if old, ok := s.State[k]; !ok || old != v {
			fmt.Fprintf(&b, "state %q: %q -> %q; ", k, old, v)
		}
	}
	for k := range s.State {
		if _, ok := after.State[k]; !ok {
			fmt.Fprintf(&b, "state %q deleted; ", k)
		}
	}
	if b.Len() == 0 {
		b.WriteString("entries differ")
	}
	return b.String()
}

// assertVerifies fails unless Verify finds nothing.
func assertVerifies(t testing.TB, db *chain.DB) chain.Report {
	t.Helper()
	report, err := db.Verify(context.Background(), chain.VerifyOptions{})
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if !report.OK() {
		t.Fatalf("verify: %v", report.Failures)
	}
	return report
}

// cliResult is one run of ledgerctl.
type cliResult struct {
	exitCode       int
	stdout, stderr string
}

// runLedgerctl runs ledgerctl with args and returns its exit code and
// output. A run that does not end within the timeout fails the test.
func runLedgerctl(t testing.TB, stdin []byte, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, testbin.Ledgerctl(t), args...)
	cmd.Env = append(os.Environ(), "LEDGER_DB=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	err := cmd.Run()
	var exit *exec.ExitError
	code := 0
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("ledgerctl %v: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("ledgerctl %v did not finish: %v", args, ctx.Err())
	}
	return cliResult{exitCode: code, stdout: stdout.String(), stderr: stderr.String()}
}

// assertNoPanic fails when a ledgerctl run panicked or crashed instead of
// reporting an error.
func assertNoPanic(t testing.TB, what string, r cliResult) {
	t.Helper()
	if isCrash(r) {
		t.Errorf("%s: ledgerctl crashed (exit %d):\n%s", what, r.exitCode, firstLines(r.stderr, 12))
	}
}

// firstLines returns at most n lines of s.
func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

// copyFile copies the file at from to to.
func copyFile(t testing.TB, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
