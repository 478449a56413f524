package reliability

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage"
)

// Environment of the hold child.
const holdReadOnlyEnvironment = "LEDGER_RELIABILITY_READ_ONLY"

// lockTimeout is the lock timeout the contention tests wait for.
const lockTimeout = 300 * time.Millisecond

// lockRetryStep is how often bbolt retries a held lock; it gives up once
// less than one step of the timeout is left, so a caller waits between
// LockTimeout minus this step and LockTimeout.
const lockRetryStep = 50 * time.Millisecond

// holdChild opens the ledger (read-only when asked), prints "ready", holds
// it until its standard input closes, then closes it and prints "closed".
func holdChild() int {
	path := os.Getenv(crashPathEnvironment)
	readOnly := os.Getenv(holdReadOnlyEnvironment) == "1"
	db, err := chain.Open(path, chain.Options{ReadOnly: readOnly, LockTimeout: 10 * time.Second})
	if err != nil {
		fmt.Fprintf(os.Stderr, "open: %v\n", err)
		return 1
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	if err := db.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "close: %v\n", err)
		return 1
	}
	fmt.Println("closed")
	return 0
}

// holder is a process that holds a ledger open.
type holder struct {
	release func() // closes its stdin: it closes the ledger and exits
	wait    func() error
}

// holdLedger starts a process that opens path and returns once it holds it.
func holdLedger(t *testing.T, path string, readOnly bool) *holder {
	t.Helper()
	flag := "0"
	if readOnly {
		flag = "1"
	}
	cmd := child(t, childHold, crashPathEnvironment+"="+path, holdReadOnlyEnvironment+"="+flag)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "ready" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("holder did not open the ledger: %q %s", lines.Text(), stderr.String())
	}
	h := &holder{}
	released := false
	h.release = func() {
		if !released {
			released = true
			stdin.Close()
		}
	}
	waited := false
	var waitErr error
	h.wait = func() error {
		if !waited {
			waited = true
			for lines.Scan() { // drain "closed"
			}
			waitErr = cmd.Wait()
			if waitErr != nil {
				waitErr = fmt.Errorf("%v: %s", waitErr, stderr.String())
			}
		}
		return waitErr
	}
	t.Cleanup(func() { h.release(); h.wait() })
	return h
}

// newLedgerWithEntry creates a ledger file with one entry and closes it.
func newLedgerWithEntry(t *testing.T) string {
	t.Helper()
	db, path := newFile(t)
	mustAppend(t, db, chain.Request{Chain: "acme/raw/one", IdempotencyKey: "k1", Type: "raw/v1", Payload: []byte("x")})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// assertLockedAfterTimeout opens path for writing and expects ErrLocked
// after waiting at least the lock timeout.
func assertLockedAfterTimeout(t *testing.T, path string, readOnly bool) {
	t.Helper()
	start := time.Now()
	db, err := chain.Open(path, chain.Options{LockTimeout: lockTimeout, ReadOnly: readOnly})
	waited := time.Since(start)
	if err == nil {
		db.Close()
		t.Fatalf("open (read-only %v) succeeded while another process holds the file", readOnly)
	}
	if !errors.Is(err, chain.ErrLocked) || !errors.Is(err, storage.ErrLocked) {
		t.Fatalf("open: %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not name the file", err)
	}
	if waited < lockTimeout-lockRetryStep {
		t.Errorf("gave up after %v, before the lock timeout %v", waited, lockTimeout)
	}
}

// TestContentionWriterProcessLocksOthersOut: while one process has the
// ledger open for writing, another waits for the lock timeout and gets
// ErrLocked, for writing and for reading alike; once the holder closes, the
// other process gets in.
func TestContentionWriterProcessLocksOthersOut(t *testing.T) {
	t.Parallel()
	path := newLedgerWithEntry(t)
	h := holdLedger(t, path, false)
	assertLockedAfterTimeout(t, path, false)
	assertLockedAfterTimeout(t, path, true)
	h.release()
	if err := h.wait(); err != nil {
		t.Fatalf("holder: %v", err)
	}
	db := openFile(t, path)
	mustAppend(t, db, chain.Request{Chain: "acme/raw/one", IdempotencyKey: "k2", Type: "raw/v1", Payload: []byte("y")})
	assertVerifies(t, db)
}

// TestContentionReaderProcessKeepsWritersOut documents bbolt's limit: a
// read-only process holds a shared lock, so other readers get in but a
// writer waits for the lock timeout and gets ErrLocked while it is open.
func TestContentionReaderProcessKeepsWritersOut(t *testing.T) {
	t.Parallel()
	path := newLedgerWithEntry(t)
	h := holdLedger(t, path, true)
	reader, err := chain.Open(path, chain.Options{ReadOnly: true, LockTimeout: lockTimeout})
	if err != nil {
		t.Fatalf("a second reader is refused while a reader holds the file: %v", err)
	}
	if _, err := reader.Get(context.Background(), "acme/raw/one", 1); err != nil {
		t.Fatalf("get: %v", err)
	}
	reader.Close()
	assertLockedAfterTimeout(t, path, false)
	h.release()
	if err := h.wait(); err != nil {
		t.Fatalf("holder: %v", err)
	}
}

// TestContentionWriterGetsInWhenReaderLeaves: a writer that waits gets the
// file as soon as the reader closes it, well within its lock timeout.
func TestContentionWriterGetsInWhenReaderLeaves(t *testing.T) {
	t.Parallel()
	path := newLedgerWithEntry(t)
	h := holdLedger(t, path, true)
	const holdFor = 200 * time.Millisecond
	time.AfterFunc(holdFor, h.release)
	start := time.Now()
	db, err := chain.Open(path, chain.Options{LockTimeout: 20 * time.Second})
	waited := time.Since(start)
	if err != nil {
		t.Fatalf("open after the reader leaves: %v", err)
	}
	defer db.Close()
	if waited < holdFor/2 || waited > 5*time.Second {
		t.Errorf("writer waited %v for a reader that left after %v", waited, holdFor)
	}
	mustAppend(t, db, chain.Request{Chain: "acme/raw/one", IdempotencyKey: "k2", Type: "raw/v1", Payload: []byte("y")})
	if err := h.wait(); err != nil {
		t.Fatalf("holder: %v", err)
	}
}

// TestContentionLedgerctlExit5WhenLocked: ledgerctl waits --lock-timeout
// and exits 5 with a message (or JSON code LOCKED) that says the file is
// locked; read commands run beside a reader, and nothing is written.
func TestContentionLedgerctlExit5WhenLocked(t *testing.T) {
	t.Parallel()
	path := newLedgerWithEntry(t)
	h := holdLedger(t, path, false)
	timeout := "--lock-timeout=" + lockTimeout.String()
	for _, args := range [][]string{
		{"append", "acme/raw/one", "--type", "raw/v1", "--key", "k2", "--data", "y"},
		{"verify"},
		{"log", "acme/raw/one"},
		{"head", "acme/raw/one"},
	} {
		start := time.Now()
		r := runLedgerctl(t, nil, append([]string{"--db", path, timeout}, args...)...)
		waited := time.Since(start)
		assertNoPanic(t, args[0], r)
		if r.exitCode != 5 || !strings.Contains(r.stderr, "locked") {
			t.Errorf("ledgerctl %s on a locked file: exit %d, stderr %q; want exit 5 naming the lock", args[0], r.exitCode, r.stderr)
		}
		if waited < lockTimeout-lockRetryStep {
			t.Errorf("ledgerctl %s gave up after %v, before --lock-timeout %v", args[0], waited, lockTimeout)
		}
	}
	r := runLedgerctl(t, nil, "--db", path, timeout, "-o", "json", "append", "acme/raw/one", "--type", "raw/v1", "--data", "y")
	var body struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal([]byte(r.stderr), &body); err != nil || r.exitCode != 5 || body.Error.Code != "LOCKED" {
		t.Errorf("-o json on a locked file: exit %d, stderr %q; want exit 5 and code LOCKED", r.exitCode, r.stderr)
	}
	h.release()
	if err := h.wait(); err != nil {
		t.Fatalf("holder: %v", err)
	}
	db, err := chain.Open(path, chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if h, err := db.Head(context.Background(), "acme/raw/one"); err != nil || h.Seq != 1 {
		t.Fatalf("after the refused appends the head is %+v (%v), want seq 1", h, err)
	}
	db.Close()

	// Beside a reading process, read commands run and writes are refused.
	reader := holdLedger(t, path, true)
	for _, args := range [][]string{{"verify"}, {"log", "acme/raw/one"}, {"head", "acme/raw/one"}} {
		r := runLedgerctl(t, nil, append([]string{"--db", path, timeout}, args...)...)
		if r.exitCode != 0 {
			t.Errorf("ledgerctl %s beside a reader: exit %d, stderr %q", args[0], r.exitCode, r.stderr)
		}
	}
	r = runLedgerctl(t, nil, "--db", path, timeout, "append", "acme/raw/one", "--type", "raw/v1", "--data", "y")
	if r.exitCode != 5 {
		t.Errorf("ledgerctl append beside a reader: exit %d, stderr %q; want 5", r.exitCode, r.stderr)
	}
	reader.release()
	if err := reader.wait(); err != nil {
		t.Fatalf("reader: %v", err)
	}
}
