package wal

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// crashChildEnvironment names the directory a re-executed test binary
// appends to until it is killed.
const crashChildEnvironment = "WAL_CRASH_CHILD_DIR"

// crashSegmentSizeBytes is small so that the child rotates, recycles and
// writes records larger than a segment within milliseconds.
const crashSegmentSizeBytes = 16 << 10

func crashSizeFor(lsn uint64) int {
	if lsn%29 == 0 {
		return 40_000 // a segment of its own
	}
	return sizeFor(lsn)
}

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnvironment); dir != "" {
		os.Exit(runCrashChild(dir))
	}
	os.Exit(m.Run())
}

// runCrashChild appends records with known content and prints "ack LSN"
// after each Append returns, "release LSN" before each Release, until it is
// killed or has appended crashChildRecordsMax records.
func runCrashChild(dir string) int {
	const crashChildRecordsMax = 200_000
	l, err := Open(dir, Options{SegmentSizeBytes: crashSegmentSizeBytes})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	next := l.LastLSN() + 1
	out := bufio.NewWriterSize(os.Stdout, 64)
	for range crashChildRecordsMax {
		if err := l.Append(next, payloadFor(next, crashSizeFor(next))); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		fmt.Fprintf(out, "ack %d\n", next)
		out.Flush()
		if next%53 == 0 {
			l.Rotate()
		}
		if next%37 == 0 && next > 30 {
			fmt.Fprintf(out, "release %d\n", next-30)
			out.Flush()
			if err := l.Release(next - 30); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 2
			}
		}
		next++
	}
	return 0
}

// TestCrashKeepsAcknowledgedRecords kills an appending child process at
// random moments; after each kill every acknowledged record that was not
// released must read back intact and in order.
func TestCrashKeepsAcknowledgedRecords(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	random := rand.New(rand.NewPCG(seed, 0))
	dir := filepath.Join(t.TempDir(), "wal")
	var acknowledged, released uint64
	for round := range 15 {
		roundAcknowledged, roundReleased := runAndKill(t, dir, time.Duration(random.IntN(40_000))*time.Microsecond)
		acknowledged = max(acknowledged, roundAcknowledged)
		released = max(released, roundReleased)
		l, err := Open(dir, Options{SegmentSizeBytes: crashSegmentSizeBytes, ReadOnly: true})
		if err != nil {
			t.Fatalf("round %d: Open after a kill: %v", round, err)
		}
		first, last := l.FirstLSN(), l.LastLSN()
		if last < acknowledged {
			t.Fatalf("round %d: LastLSN %d, but %d was acknowledged", round, last, acknowledged)
		}
		if first == 0 || first > released+1 {
			t.Fatalf("round %d: FirstLSN %d, but only %d was released", round, first, released)
		}
		expected := first
		for record, err := range l.Records(first - 1) {
			if err != nil {
				t.Fatalf("round %d: Records: %v", round, err)
			}
			if record.LSN != expected {
				t.Fatalf("round %d: LSN %d, want %d", round, record.LSN, expected)
			}
			if !bytes.Equal(record.Payload, payloadFor(expected, crashSizeFor(expected))) {
				t.Fatalf("round %d: the record with LSN %d is damaged", round, expected)
			}
			expected++
		}
		if expected != last+1 {
			t.Fatalf("round %d: Records ended at %d, LastLSN is %d", round, expected-1, last)
		}
		l.Close()
		t.Logf("round %d: %d acknowledged, log holds %d..%d", round, acknowledged, first, last)
	}
	if acknowledged < 15 {
		t.Fatalf("only %d records acknowledged in 15 rounds", acknowledged)
	}
}

// runAndKill starts the child, lets it run for delay after its first
// acknowledgement, kills it and returns the last acknowledged LSN and the
// last LSN it announced it releases.
func runAndKill(t *testing.T, dir string, delay time.Duration) (acknowledged uint64, released uint64) {
	t.Helper()
	command := exec.Command(os.Args[0], "-test.run=^$")
	command.Env = append(os.Environ(), crashChildEnvironment+"="+dir)
	var stderr bytes.Buffer
	command.Stderr = &stderr
	stdout, err := command.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := command.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			lines <- scanner.Text()
		}
	}()
	handle := func(line string) {
		kind, number, _ := strings.Cut(line, " ")
		lsn, err := strconv.ParseUint(number, 10, 64)
		if err != nil {
			t.Errorf("child printed %q", line)
			return
		}
		switch kind {
		case "ack":
			acknowledged = max(acknowledged, lsn)
		case "release":
			released = max(released, lsn)
		}
	}
	select {
	case line, ok := <-lines:
		if ok {
			handle(line)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the child acknowledged nothing in 30 s")
	}
	timer := time.After(delay)
wait:
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				break wait
			}
			handle(line)
		case <-timer:
			break wait
		}
	}
	command.Process.Kill()
	for line := range lines {
		handle(line)
	}
	command.Wait()
	if stderr.Len() > 0 {
		t.Fatalf("child: %s", stderr.String())
	}
	return acknowledged, released
}
