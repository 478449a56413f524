package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/ledgerworks/ledger/storage/bolt"
)

// Bytes an entry of the files a run writes, from P7 at 1,000,000 to
// 30,000,000 entries, rounded up: what the space check counts on.
const (
	ledgerBytesPerEntry = 400 // engine's file, P7: 376 B
	rawBytesPerEntry    = 400 // raw bbolt's file of the records, P7: 389 B
	naiveBytesPerEntry  = 700 // the naive layout's file (entry, key B-tree, head)
	spaceMarginBytes    = 2 << 30
)

// sizeFigures are the figures of one size that the ratio table compares
// with the reference size's. Zero where the figure was not measured.
type sizeFigures struct {
	entries     int
	p1, p1Raw   float64 // entries a second, engine and raw bbolt
	p1LastFirst float64
	p3P50       time.Duration // one durable append on the P1 file
	p4          float64       // replays a second
	p5Entries   int64         // entries the verify child verified
	p5CPUNs     float64       // CPU of the verify child an entry, ns, the page cache as the cold pass left it
	p5ColdCPUNs float64       // the same, the file just evicted from the page cache
	p5RSS       int64         // peak RSS of the verify child, bytes
}

// verifiesP1File says whether P5's child verifies the P1 file itself
// (-rss-entries equal to -entries) rather than a file of its own.
func (c *config) verifiesP1File() bool {
	return c.rssEntries == c.entries && c.runs("P5")
}

// remove removes a ledger or raw file as soon as its last figure is
// measured, unless -keep.
func (c *config) remove(path string) error {
	if c.keep {
		return nil
	}
	if err := os.RemoveAll(path + bolt.LogDirectorySuffix); err != nil {
		return err
	}
	return os.Remove(path)
}

// peakBytes is the most disk space a run of cfg's sizes holds at once.
// One main file exists at a time (naive, then raw, then the ledger); P5's
// own file is written after the P1 ledger is removed; P2's and P3's small
// files stay until the end. With -keep every file stays.
func (c *config) peakBytes() int64 {
	n := int64(c.entries)
	files := []int64{n * rawBytesPerEntry, n * ledgerBytesPerEntry}
	if !c.skipNaiveBaseline && c.runs("P1") {
		files = append(files, n*naiveBytesPerEntry)
	}
	if c.rssEntries > 0 && c.runs("P5") && !c.verifiesP1File() {
		files = append(files, int64(c.rssEntries)*ledgerBytesPerEntry)
	}
	var peak int64
	for _, f := range files {
		if c.keep {
			peak += f
		} else {
			peak = max(peak, f)
		}
	}
	var small int64
	if c.runs("P2") {
		small += int64(c.concurrentEntries) * (2*ledgerBytesPerEntry + rawBytesPerEntry)
	}
	if c.runs("P3") {
		small += int64(c.durableAppends) * (ledgerBytesPerEntry + rawBytesPerEntry)
	}
	return peak + small
}

// spaceNeeded is the disk space the whole invocation needs: the reference
// size's files are removed before the main size's are written.
func spaceNeeded(cfg config) int64 {
	need := cfg.peakBytes()
	ref := cfg.reference()
	switch {
	case cfg.referenceEntries > 0 && cfg.keep:
		need += ref.peakBytes()
	case cfg.referenceEntries > 0:
		need = max(need, ref.peakBytes())
	}
	return need + spaceMarginBytes
}

// checkSpace prints the space the run needs beside the free space of dir,
// and refuses the run when it cannot fit (where the free space is known).
func checkSpace(cfg config, dir string) error {
	need := spaceNeeded(cfg)
	free, ok := freeSpace(dir)
	if !ok {
		fmt.Printf("space: needs about %s at its peak; free space of %s unknown\n", gb(need), dir)
		return nil
	}
	fmt.Printf("space: needs about %s at its peak, %s free in %s\n", gb(need), gb(free), dir)
	if need > free {
		return fmt.Errorf("the run needs about %s of disk at its peak (about %d B an entry of each file it holds at once, plus %s of margin) and %s has %s free: free some space, name a larger disk with -dir, or lower -entries",
			gb(need), ledgerBytesPerEntry, gb(spaceMarginBytes), dir, gb(free))
	}
	return nil
}

// freeSpace is freeBytes, replaced by the tests.
var freeSpace = freeBytes

func gb(n int64) string { return fmt.Sprintf("%.1f GB", float64(n)/1e9) }

// reference is the configuration of the -reference-entries run: the
// figures that depend on the file's size (P1, P3 on the P1 file, P4, P5
// with its child verifying the P1 file) at the reference size.
func (c config) reference() config {
	r := c
	r.entries, r.rssEntries, r.referenceEntries = c.referenceEntries, c.referenceEntries, 0
	return r
}

// referenceRun runs the size-dependent figures at -reference-entries in
// their own folder, removed after, and returns their table.
func referenceRun(ctx context.Context, cfg config, dir string) (*table, error) {
	ref := cfg.reference()
	sub := join(dir, "reference")
	if err := os.Mkdir(sub, 0o700); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "reference run: %d entries\n", ref.entries)
	t := &table{}
	if err := mainFile(ctx, ref, sub, t); err != nil {
		return nil, err
	}
	if ref.runs("P5") {
		if err := rss(ctx, ref, sub, t); err != nil {
			return nil, err
		}
	}
	if ref.keep {
		return t, nil
	}
	return t, os.RemoveAll(sub)
}

// printScale prints the targets of docs/PERFORMANCE.md "Memory and size":
// each figure at -entries as a ratio to the same figure at
// -reference-entries, both measured in this run.
func printScale(ref, at sizeFigures) {
	fmt.Printf("\n| figure | %s entries | %s entries | ratio | target | met |\n", count(float64(ref.entries)), count(float64(at.entries)))
	fmt.Println("|---|---|---|---|---|---|")
	div := func(a, b float64) (string, float64, bool) {
		if a == 0 || b == 0 {
			return "–", 0, false
		}
		return fmt.Sprintf("%.2f", a/b), a / b, true
	}
	line := func(figure, r, n, rat, target string, ok, measured bool) {
		met := "–"
		if measured {
			met = yes(ok)
		}
		fmt.Printf("| %s | %s | %s | %s | %s | %s |\n", figure, r, n, rat, target, met)
	}
	line("P1 last 10% ÷ first 10%", fmt.Sprintf("%.2f", ref.p1LastFirst), fmt.Sprintf("%.2f", at.p1LastFirst),
		"", "≥ 0.80 at the larger size", at.p1LastFirst >= 0.8, at.p1LastFirst > 0)
	ew := func(f sizeFigures) float64 {
		if f.p1Raw == 0 {
			return 0
		}
		return f.p1 / f.p1Raw
	}
	s, v, ok := div(ew(at), ew(ref))
	line("P1 engine ÷ raw bbolt", fmt.Sprintf("%.2f", ew(ref)), fmt.Sprintf("%.2f", ew(at)), s, "≥ 0.80", v >= 0.8, ok)
	s, v, ok = div(at.p4, ref.p4)
	line("P4 replays a second, keys uniform over the file", count(ref.p4), count(at.p4), s, "≥ 0.50", v >= 0.5, ok)
	s, v, ok = div(float64(at.p3P50), float64(ref.p3P50))
	line("P3 one durable append on the P1 file, p50", ref.p3P50.Round(time.Microsecond).String(), at.p3P50.Round(time.Microsecond).String(),
		s, "≤ 1.25", v <= 1.25, ok)
	if ref.p5Entries == 0 && at.p5Entries == 0 {
		return // P5 did not run
	}
	for _, p5 := range []struct {
		cache   string
		ref, at float64
	}{{"page cache cold at both sizes", ref.p5ColdCPUNs, at.p5ColdCPUNs}, {"page cache as a cold pass left it", ref.p5CPUNs, at.p5CPUNs}} {
		s, v, ok = div(p5.at, p5.ref)
		line(fmt.Sprintf("P5 verify CPU an entry (child, %s and %s entries, %s)", count(float64(ref.p5Entries)), count(float64(at.p5Entries)), p5.cache),
			fmt.Sprintf("%.3f µs", p5.ref/1e3), fmt.Sprintf("%.3f µs", p5.at/1e3), s, "≤ 1.10", v <= 1.1, ok)
	}
	line("P5 verify peak RSS (child)", mib(ref.p5RSS), mib(at.p5RSS), "", "≤ 64 MiB", at.p5RSS <= 64<<20, at.p5RSS > 0)
}
