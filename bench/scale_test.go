package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary be its own verify child, as the bench
// command is: childVerify runs os.Executable() with -verify-child.
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == "-verify-child" {
		if err := verifyChild(os.Args[2]); err != nil {
			os.Stderr.WriteString("bench: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	flag.Parse()
	os.Exit(m.Run())
}

// hundredMillion is the documented command of the 100,000,000 run.
func hundredMillion() config {
	return config{entries: 100_000_000, rssEntries: 100_000_000, referenceEntries: 1_000_000,
		only: "P1,P3,P4,P5", skipNaiveBaseline: true, durableAppends: 2000, concurrentEntries: 200_000}
}

func TestSpaceNeeded(t *testing.T) {
	cfg := hundredMillion()
	// One file at a time: the ledger or the raw file, never both.
	if need := spaceNeeded(cfg); need < 100_000_000*376 || need > 45e9 {
		t.Fatalf("the 100M run needs %s: want one file's 38–45 GB", gb(need))
	}
	kept := cfg
	kept.keep = true
	if need, one := spaceNeeded(kept), spaceNeeded(cfg); need < 2*one-spaceMarginBytes-int64(100_000_000)*10 {
		t.Fatalf("-keep needs %s, one file at a time %s: want both files counted", gb(need), gb(one))
	}
	own := cfg
	own.rssEntries = 10_000_000
	if spaceNeeded(own) != spaceNeeded(cfg) {
		t.Fatalf("P5's own file of 10M is written after the P1 file is removed: want the same peak")
	}
	naive := cfg
	naive.skipNaiveBaseline = false
	if spaceNeeded(naive) <= spaceNeeded(cfg) {
		t.Fatalf("the naive layout's file is the largest: want it counted")
	}
}

func TestCheckSpaceRefuses(t *testing.T) {
	defer func(f func(string) (int64, bool)) { freeSpace = f }(freeSpace)
	cfg := hundredMillion()
	freeSpace = func(string) (int64, bool) { return 30e9, true }
	out := captureStdout(t, func() {
		if err := checkSpace(cfg, t.TempDir()); err == nil || !strings.Contains(err.Error(), "30.0 GB free") {
			t.Errorf("checkSpace with 30 GB free = %v, want a refusal naming the free space", err)
		}
	})
	if !strings.Contains(out, "space: needs about") {
		t.Errorf("checkSpace printed %q, want the space line", out)
	}
	freeSpace = func(string) (int64, bool) { return 65e9, true }
	captureStdout(t, func() {
		if err := checkSpace(cfg, t.TempDir()); err != nil {
			t.Errorf("checkSpace with 65 GB free = %v, want the run to fit", err)
		}
	})
}

// TestReferenceRun runs the size-dependent figures at two small sizes in
// one invocation and checks the ratio table and that no file is left.
func TestReferenceRun(t *testing.T) {
	if testing.Short() {
		t.Skip("writes two small ledgers")
	}
	dir := t.TempDir()
	cfg := config{dir: dir, entries: 20_000, rssEntries: 20_000, referenceEntries: 2_000, only: "P1,P3,P4,P5",
		skipNaiveBaseline: true, durableAppends: 20, replays: 2_000, readers: 2, replayBatch: 1, concurrentEntries: 200}
	var err error
	out := captureStdout(t, func() { err = run(context.Background(), cfg) })
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	for _, want := range []string{"reference run, 2,000 entries:", "| figure | 2,000 entries | 20,000 entries | ratio | target | met |",
		"| P1 last 10% ÷ first 10% |", "| P1 engine ÷ raw bbolt |", "| P4 replays a second", "| P3 one durable append on the P1 file, p50 |",
		"| P5 verify CPU an entry (child, 2,010 and 20,010 entries, page cache cold at both sizes) |",
		"| P5 verify CPU an entry (child, 2,010 and 20,010 entries, page cache as a cold pass left it) |", "| P5 verify peak RSS (child) |"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out[strings.LastIndex(out, "| figure |"):], "| – |") {
		t.Errorf("a ratio was not measured:\n%s", out)
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasPrefix(n.Name(), "p1.") || n.Name() == "reference" {
			t.Errorf("%s left in the folder after its figures", n.Name())
		}
	}
}

func captureStdout(t *testing.T, fn func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	defer func() { os.Stdout = stdout }()
	fn()
	os.Stdout = stdout
	if err := w.Close(); err != nil {
		t.Fatal(errors.Join(err, r.Close()))
	}
	return <-done
}

// TestScaleTableWithoutP5 checks that the ratio table of a run without P5
// prints no P5 rows (they would read 0 entries, not measured).
func TestScaleTableWithoutP5(t *testing.T) {
	ref := sizeFigures{entries: 1_000, p1: 10, p1Raw: 10, p1LastFirst: 1, p3P50: time.Millisecond, p4: 100}
	at := sizeFigures{entries: 10_000, p1: 9, p1Raw: 10, p1LastFirst: 0.9, p3P50: time.Millisecond, p4: 90}
	out := captureStdout(t, func() { printScale(ref, at) })
	if strings.Contains(out, "P5") || !strings.Contains(out, "| P4 replays") {
		t.Errorf("table:\n%s", out)
	}
}
