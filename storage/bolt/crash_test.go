package bolt_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/storage/bolt"
)

const (
	crashChildEnv = "LEDGER_BOLT_CRASH_CHILD"
	// crashRounds is how many times the child is killed on one ledger.
	crashRounds = 3
	// crashEntriesPerCommit is the batch each commit of the child appends.
	crashEntriesPerCommit = 5
)

// crashOptions checkpoint every few commits: a kill lands during a
// checkpoint (a bbolt commit of a frozen table) often.
var crashOptions = bolt.Options{Log: bolt.LogOn, MemtableBytesMax: 4 << 10, LogSegmentSizeBytes: 64 << 10}

// TestCrashDuringCheckpoints kills (SIGKILL) a child process that commits
// as fast as it can through the log with checkpoints every few commits, and
// reopens the ledger: every commit the child acknowledged is there, the
// chain has no gap, and bbolt's check passes. Three rounds on one ledger.
func TestCrashDuringCheckpoints(t *testing.T) {
	if os.Getenv(crashChildEnv) != "" {
		crashChild(os.Getenv(crashChildEnv))
		return
	}
	path := filepath.Join(t.TempDir(), "ledger.db")
	for round := range crashRounds {
		acked := runChild(t, path, "TestCrashDuringCheckpoints", crashChildEnv, time.Duration(150+100*round)*time.Millisecond)
		b, err := bolt.Open(path, crashOptions)
		if err != nil {
			t.Fatalf("round %d: reopen after the kill: %v", round, err)
		}
		tx, err := b.Begin(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		s := readSnapshot(t, tx)
		tx.Rollback()
		head := s.heads["a"]
		if head < acked {
			t.Fatalf("round %d: head %d after the kill, the child had acknowledged seq %d", round, head, acked)
		}
		for i, data := range s.entries["a"] {
			if want := string(testRecord("a", uint64(i+1)).Data); data != want {
				t.Fatalf("round %d: entry %d holds %q, want %q", round, i+1, data, want)
			}
		}
		if len(s.keys["a"]) != int(head) || len(s.state) != 1 || s.state[0] != fmt.Sprintf("s/a=%d", head) {
			t.Fatalf("round %d: %d keys and state %v for head %d", round, len(s.keys["a"]), s.state, head)
		}
		if err := b.Check(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: %d acknowledged, %d recovered", round, acked, head)
	}
}

// runChild starts the child of a test (its environment variable set to
// path), lets it commit for about d, kills it and returns the last seq it
// acknowledged.
func runChild(t *testing.T, path, test, env string, d time.Duration) uint64 {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), env+"="+path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			lines <- scanner.Text()
		}
	}()
	var acked uint64
	deadline := time.After(d)
	started := false
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				cmd.Wait()
				t.Fatalf("the child ended before it was killed: %s", stderr.String())
			}
			if seq, found := strings.CutPrefix(line, "ack "); found {
				n, err := strconv.ParseUint(seq, 10, 64)
				if err != nil {
					t.Fatalf("child line %q", line)
				}
				acked, started = n, true
			}
			continue
		case <-deadline:
			if !started {
				deadline = time.After(d)
				continue
			}
		}
		break
	}
	cmd.Process.Signal(syscall.SIGKILL)
	for line := range lines { // what it acknowledged before it died
		if seq, found := strings.CutPrefix(line, "ack "); found {
			if n, err := strconv.ParseUint(seq, 10, 64); err == nil {
				acked = n
			}
		}
	}
	cmd.Wait()
	return acked
}

// crashChild commits batches to chain "a" until it is killed, printing the
// last seq of each batch once Commit has returned.
func crashChild(path string) {
	b, err := bolt.Open(path, crashOptions)
	if err != nil {
		childFail(err)
	}
	appendUntilKilled(b, crashEntriesPerCommit, true)
}

func childFail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(2)
}

// appendUntilKilled commits batches of perCommit entries to chain "a",
// from its head on, until the process is killed, printing the last seq of
// each batch once Commit has returned; withState also writes that seq to
// state key "s/a" in the batch.
func appendUntilKilled(b *bolt.Backend, perCommit uint64, withState bool) {
	tx, err := b.Begin(ctx, false)
	if err != nil {
		childFail(err)
	}
	var next uint64 = 1
	if h, err := tx.Head(ctx, "a"); err == nil {
		next = h.Seq + 1
	}
	tx.Rollback()
	out := bufio.NewWriter(os.Stdout)
	for {
		last := next + perCommit - 1
		tx, err := b.Begin(ctx, true)
		if err != nil {
			childFail(err)
		}
		for seq := next; seq <= last; seq++ {
			if err := tx.Append(ctx, "a", testRecord("a", seq), testHead(seq)); err != nil {
				childFail(err)
			}
		}
		if withState {
			if err := tx.StatePut(ctx, []byte("s/a"), fmt.Appendf(nil, "%d", last)); err != nil {
				childFail(err)
			}
		}
		if err := tx.Commit(); err != nil {
			childFail(errors.Join(err, tx.Rollback()))
		}
		fmt.Fprintf(out, "ack %d\n", last)
		out.Flush()
		next = last + 1
	}
}
