package main

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/bench/workload"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// row is one line of the table.
type row struct {
	id, figure       string
	result, baseline string
	ratio            string
	target           string
	met              string
}

type table struct {
	rows []row
	fig  sizeFigures // the figures the ratio table of -reference-entries compares
}

func (t *table) add(r row) {
	t.rows = append(t.rows, r)
	fmt.Fprintf(os.Stderr, "  %s %s: %s (baseline %s, ratio %s)\n", r.id, r.figure, r.result, r.baseline, r.ratio)
}

func (t *table) print() {
	fmt.Println("| # | figure | engine | baseline (same run) | ratio | target | met |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, r := range t.rows {
		fmt.Printf("| %s | %s | %s | %s | %s | %s | %s |\n", r.id, r.figure, r.result, r.baseline, r.ratio, r.target, r.met)
	}
}

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

func perSecond(r workload.Rate) string { return count(r.PerSecond()) + "/s" }

// measured is a rate with what it was measured over.
func measured(r workload.Rate) string {
	return fmt.Sprintf("%s (%s in %v)", perSecond(r), count(float64(r.Count)), r.Duration.Round(time.Millisecond))
}

// count prints n with thousands separators.
func count(n float64) string {
	s := fmt.Sprintf("%.0f", n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func ratio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// tenths lists the rates of a stream's tenths, in thousands a second.
func tenths(s workload.Stream) string {
	parts := make([]string, 0, len(s.Tenths))
	for _, r := range s.Tenths {
		parts = append(parts, fmt.Sprintf("%.0f", r.PerSecond()/1000))
	}
	return strings.Join(parts, " ") + " k/s"
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func run(ctx context.Context, cfg config) error {
	dir, cleanup, err := tempDir(cfg)
	if err != nil {
		return err
	}
	defer cleanup()
	fmt.Printf("machine: %s\n", machine())
	fmt.Printf("command: go run ./bench %s\n", strings.Join(os.Args[1:], " "))
	fmt.Printf("files: %s\n", dir)
	if err := checkSpace(cfg, dir); err != nil {
		os.Remove(dir) // the folder this run made, still empty
		return err
	}
	fmt.Println()
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var ref *table
	if cfg.referenceEntries > 0 {
		if ref, err = referenceRun(ctx, cfg, dir); err != nil {
			return err
		}
	}
	var t table
	steps := []struct {
		figures string
		fn      func(context.Context, config, string, *table) error
	}{
		{"P1,P4,P5,P6,P7", mainFile},
		{"P2", concurrent},
		{"P3", durable},
		{"P5", rss},
	}
	for _, s := range steps {
		wanted := false
		for _, f := range strings.Split(s.figures, ",") {
			wanted = wanted || cfg.runs(f)
		}
		if !wanted {
			continue
		}
		if err := s.fn(ctx, cfg, dir, &t); err != nil {
			return err
		}
	}
	fmt.Println()
	if ref != nil {
		fmt.Printf("reference run, %s entries:\n\n", count(float64(cfg.referenceEntries)))
		ref.print()
		fmt.Printf("\n%s entries:\n\n", count(float64(cfg.entries)))
	}
	t.print()
	if ref != nil {
		printScale(ref.fig, t.fig)
	}
	return nil
}

const mainChain = "bench/p1"

// rawFigures are raw bbolt's figures on its file of the P1 records.
type rawFigures struct {
	stream   workload.Stream
	naive    workload.Stream // the naive layout's P1, when measured
	durable  workload.Latencies
	gets     workload.Rate
	scan     workload.Rate
	scanRuns string
	cold     workload.Rate
	size     int64
}

// mainFile writes the P1 stream into a raw file and measures raw bbolt on
// it, removes it, then writes the same records into one ledger and
// measures the engine on it for P3–P7. One file at a time: at
// 100,000,000 entries each is about 38 GB.
func mainFile(ctx context.Context, cfg config, dir string, t *table) error {
	path, rawPath := join(dir, "p1.ledger"), join(dir, "p1.raw")
	fmt.Fprintf(os.Stderr, "P1: %d entries, %d per Update, random 32-byte keys\n", cfg.entries, workload.BatchSize)
	rf, err := rawFile(cfg, dir, rawPath)
	if err != nil {
		return err
	}
	db, err := openLedger(path, chain.Options{})
	if err != nil {
		return err
	}
	sampler := sampleRSS(cfg.memProfile)
	stream, err := workload.UpdateBatches(ctx, db, mainChain, 1, cfg.entries, workload.BatchSize)
	anon, files := sampler.stop()
	if err != nil {
		db.Close()
		return err
	}
	p1, rawStream := stream.Total.PerSecond(), rf.stream
	t.fig.entries, t.fig.p1, t.fig.p1Raw = cfg.entries, p1, rawStream.Total.PerSecond()
	t.add(row{"P1", fmt.Sprintf("Update, %d appends per tx (one AppendBatch), random keys, %s entries", workload.BatchSize, count(float64(cfg.entries))),
		perSecond(stream.Total), "raw bbolt sequential puts " + perSecond(rawStream.Total),
		ratio(p1, rawStream.Total.PerSecond()), "≥ 300,000/s", yes(p1 >= 300_000)})
	t.add(row{"P1", "first 10%", perSecond(stream.First), "raw " + perSecond(rawStream.First),
		ratio(stream.First.PerSecond(), rawStream.First.PerSecond()), "", ""})
	lastFirst := stream.Last.PerSecond() / stream.First.PerSecond()
	t.fig.p1LastFirst = lastFirst
	t.add(row{"P1", "last 10%", perSecond(stream.Last), "raw " + perSecond(rawStream.Last),
		ratio(stream.Last.PerSecond(), rawStream.Last.PerSecond()), "", ""})
	t.add(row{"P1", "last 10% ÷ first 10%", fmt.Sprintf("%.2f", lastFirst),
		fmt.Sprintf("raw %.2f", rawStream.Last.PerSecond()/rawStream.First.PerSecond()), "", "≥ 0.80", yes(lastFirst >= 0.8)})
	t.add(row{"P1", "each tenth, first to last", tenths(stream), "raw " + tenths(rawStream), "", "", ""})
	t.add(row{"P1", "peak RSS of the process while the engine writes (sampled every 10 ms)",
		fmt.Sprintf("%s not file-backed, %s file-backed", mib(anon), mib(files)), "", "", "", ""})
	if ns := rf.naive; ns.Total.Count > 0 {
		t.add(row{"P1", "reference: naive layout (entry + random key B-tree + head) in raw bbolt",
			fmt.Sprintf("%s (first 10%% %s, last 10%% %s)", perSecond(ns.Total), perSecond(ns.First), perSecond(ns.Last)),
			"raw bbolt sequential puts " + perSecond(rawStream.Total), ratio(ns.Total.PerSecond(), rawStream.Total.PerSecond()), "", ""})
	}
	if err := engineFigures(ctx, cfg, db, path, rf, t); err != nil {
		db.Close()
		return err
	}
	if err := db.Close(); err != nil {
		return err
	}
	runs, largest, err := keyRuns(path)
	if err != nil {
		return err
	}
	t.add(row{"P1", "key runs of the file at the end", fmt.Sprintf("%d, the largest of %s records", runs, count(float64(largest))), "", "", "", ""})

	if cfg.runs("P6") {
		fmt.Fprintf(os.Stderr, "P6: verify %d entries, cold\n", cfg.entries)
		v, disk, err := coldVerify(ctx, path, cfg.entries)
		if err != nil {
			return err
		}
		t.add(row{"P6", "verify, file just evicted from the page cache", perSecond(v),
			"raw cold cursor scan + BLAKE3 " + perSecond(rf.cold), ratio(v.PerSecond(), rf.cold.PerSecond()), "≥ 1,000,000/s", yes(v.PerSecond() >= 1_000_000)})
		t.add(row{"P6", "reference: the disk's ceiling, the evicted ledger file read sequentially (1 MiB reads), as entries/s", perSecond(disk),
			"", ratio(v.PerSecond(), disk.PerSecond()) + " of it", "", ""})
	}

	if cfg.runs("P7") {
		size, err := fileSize(path)
		if err != nil {
			return err
		}
		logical := workload.LogicalSize() * int64(cfg.entries)
		r := float64(size) / float64(logical)
		t.add(row{"P7", fmt.Sprintf("file size ÷ (payload + fixed fields) (%d B per entry)", workload.LogicalSize()),
			fmt.Sprintf("%.2f (%s, %.0f B per entry)", r, mib(size), float64(size)/float64(cfg.entries)),
			fmt.Sprintf("raw bbolt file of the records %.2f (%s)", float64(rf.size)/float64(logical), mib(rf.size)),
			ratio(float64(size), float64(rf.size)), "≤ 1.30", yes(r <= 1.3)})
	}
	if !cfg.verifiesP1File() {
		return cfg.remove(path)
	}
	return nil
}

// engineFigures measures P3–P5 on the engine's P1 file at path, open in db.
func engineFigures(ctx context.Context, cfg config, db *chain.DB, path string, rf rawFigures, t *table) error {
	if cfg.runs("P3") {
		half := cfg.durableAppends / 2
		fmt.Fprintf(os.Stderr, "P3: %d single durable appends on the P1 file\n", half)
		a, err := workload.DurableAppends(ctx, db, mainChain, 3, half)
		if err != nil {
			return err
		}
		b := rf.durable
		r := float64(a.P50) / float64(b.P50)
		t.fig.p3P50 = a.P50
		t.add(row{"P3", fmt.Sprintf("(the same on the P1 file, %s entries)", count(float64(cfg.entries))),
			fmt.Sprintf("%v (p99 %v)", a.P50.Round(time.Microsecond), a.P99.Round(time.Microsecond)),
			fmt.Sprintf("raw bbolt one-put tx %v (p99 %v)", b.P50.Round(time.Microsecond), b.P99.Round(time.Microsecond)),
			fmt.Sprintf("%.2f×", r), "", ""})
	}

	if cfg.runs("P4") {
		fmt.Fprintf(os.Stderr, "P4: %d replays from %d callers\n", cfg.replays, cfg.readers)
		rp, err := workload.Replays(ctx, db, mainChain, 1, cfg.entries, cfg.readers, cfg.replays, 1, cfg.budget)
		if err != nil {
			return err
		}
		rg := rf.gets
		t.fig.p4 = rp.PerSecond()
		t.add(row{"P4", fmt.Sprintf("replays of existing keys, %d callers", cfg.readers), measured(rp),
			"raw bbolt read tx + get " + measured(rg), ratio(rp.PerSecond(), rg.PerSecond()), "≥ 1,000,000/s", yes(rp.PerSecond() >= 1_000_000)})
		if cfg.replayBatch > 1 {
			rb, err := workload.Replays(ctx, db, mainChain, 1, cfg.entries, cfg.readers, cfg.replays, cfg.replayBatch, cfg.budget)
			if err != nil {
				return err
			}
			t.add(row{"P4", fmt.Sprintf("reference: retried batches of %d (DB.AppendBatch), %d callers", cfg.replayBatch, cfg.readers), measured(rb),
				"raw bbolt read tx + get " + measured(rg), ratio(rb.PerSecond(), rg.PerSecond()), "", ""})
		}
	}

	if cfg.runs("P5") && !fitsInMemory(path) {
		t.add(row{"P5", fmt.Sprintf("verify %s entries, page cache warm: not measured, the file is larger than the machine's memory (the child rows below read it from the disk)", count(float64(cfg.entries))),
			"", "", "", "", ""})
	} else if cfg.runs("P5") {
		fmt.Fprintf(os.Stderr, "P5: verify %d entries, warm\n", cfg.entries)
		workload.Verify(ctx, db) // warm the page cache with one pass
		v, vs, err := median(warmRuns, func() (workload.Rate, error) { return workload.Verify(ctx, db) })
		if err != nil {
			return err
		}
		rs := rf.scan
		t.add(row{"P5", fmt.Sprintf("verify %s entries, page cache warm, median of %d", count(float64(v.Count)), warmRuns),
			perSecond(v) + " (" + vs + ")", "raw cursor scan + BLAKE3, 1 core " + perSecond(rs) + " (" + rf.scanRuns + ")",
			ratio(v.PerSecond(), rs.PerSecond()), "≥ 5,000,000/s", yes(v.PerSecond() >= 5_000_000)})
	}
	return nil
}

// fitsInMemory reports whether the file at path is smaller than the
// machine's memory, so that the page cache can hold it: a "warm" pass over
// a larger file reads it from the disk a page fault at a time (over 20
// minutes a pass for raw bbolt's cursor at 100,000,000 entries), and
// measures the disk. When the size or the memory is unknown, it fits.
func fitsInMemory(path string) bool {
	size, err := fileSize(path)
	mem, ok := memoryBytes()
	return err != nil || !ok || size < mem
}

// rawFile writes raw bbolt's file of the P1 records (and the naive
// layout's, for P1's reference row), measures on it what the engine's
// figures are compared with, and removes it.
func rawFile(cfg config, dir, rawPath string) (rawFigures, error) {
	var rf rawFigures
	if !cfg.skipNaiveBaseline && cfg.runs("P1") {
		naivePath := join(dir, "p1.naive")
		naive, err := workload.RawOpen(naivePath)
		if err != nil {
			return rf, err
		}
		rf.naive, err = workload.RawIndexedPuts(naive, mainChain, 1, cfg.entries, workload.BatchSize)
		if cerr := naive.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return rf, err
		}
		if err := cfg.remove(naivePath); err != nil {
			return rf, err
		}
	}
	raw, err := workload.RawOpen(rawPath)
	if err != nil {
		return rf, err
	}
	if err := rawMeasure(cfg, raw, &rf); err != nil {
		raw.Close()
		return rf, err
	}
	if err := raw.Close(); err != nil {
		return rf, err
	}
	if cfg.runs("P6") {
		if rf.cold, err = rawCold(rawPath); err != nil {
			return rf, err
		}
	}
	if rf.size, err = fileSize(rawPath); err != nil {
		return rf, err
	}
	return rf, cfg.remove(rawPath)
}

// rawMeasure writes the P1 records into raw and measures P3–P5's
// baselines on it.
func rawMeasure(cfg config, raw *bbolt.DB, rf *rawFigures) error {
	fmt.Fprintf(os.Stderr, "  raw bbolt first\n")
	var err error
	if rf.stream, err = workload.RawSequentialPuts(raw, mainChain, 1, cfg.entries, workload.BatchSize); err != nil {
		return err
	}
	if cfg.runs("P3") {
		if rf.durable, err = workload.RawDurablePuts(raw, mainChain, 3, cfg.durableAppends/2); err != nil {
			return err
		}
	}
	if cfg.runs("P4") {
		if rf.gets, err = workload.RawGets(raw, cfg.entries, cfg.readers, cfg.replays, cfg.budget); err != nil {
			return err
		}
	}
	if cfg.runs("P5") && fitsInMemory(raw.Path()) {
		workload.RawScanHash(raw) // warm the page cache with one pass, as the engine's verify
		if rf.scan, rf.scanRuns, err = median(warmRuns, func() (workload.Rate, error) { return workload.RawScanHash(raw) }); err != nil {
			return err
		}
	}
	return nil
}

// rawCold is the raw scan of the raw file just evicted from the page cache,
// opened read-only so that nothing reads the file before the scan.
func rawCold(rawPath string) (workload.Rate, error) {
	if err := evict(rawPath); err != nil {
		return workload.Rate{}, err
	}
	raw, err := workload.RawOpenReadOnly(rawPath)
	if err != nil {
		return workload.Rate{}, err
	}
	defer raw.Close()
	return workload.RawScanHash(raw)
}

// coldVerify measures, each right after evicting the file: the engine's
// verify, and a plain sequential read of the file, the disk's ceiling for
// any scan of it (as entries/s).
func coldVerify(ctx context.Context, path string, entries int) (v, disk workload.Rate, err error) {
	if err = evict(path); err != nil {
		return
	}
	db, err := openLedger(path, chain.Options{ReadOnly: true})
	if err != nil {
		return
	}
	v, err = workload.Verify(ctx, db)
	db.Close()
	if err != nil {
		return
	}
	if err = evict(path); err != nil {
		return
	}
	took, err := workload.ReadFile(path)
	return v, workload.Rate{Count: int64(entries), Duration: took}, err
}

// concurrent is P2: appenders each waiting for their own durable append.
func concurrent(ctx context.Context, cfg config, dir string, t *table) error {
	fmt.Fprintf(os.Stderr, "P2: %d appenders, %d entries\n", cfg.appenders, cfg.concurrentEntries)
	db, err := openLedger(join(dir, "p2.ledger"), chain.Options{})
	if err != nil {
		return err
	}
	defer db.Close()
	r, err := workload.ConcurrentAppends(ctx, db, "bench/p2", 2, cfg.appenders, cfg.concurrentEntries, false, cfg.budget)
	if err != nil {
		return err
	}
	sharedRate, err := workload.ConcurrentAppends(ctx, db, "bench/p2-shared", 3, cfg.appenders, cfg.concurrentEntries, true, cfg.budget)
	if err != nil {
		return err
	}
	raw, err := workload.RawOpen(join(dir, "p2.raw"))
	if err != nil {
		return err
	}
	defer raw.Close()
	base, err := workload.RawDurablePuts(raw, "bench/p2", 2, min(cfg.durableAppends, 2000))
	if err != nil {
		return err
	}
	// The ceiling of the layout: every group as full as the appenders can
	// make it, written by raw bbolt with no engine work at all.
	groupTotal := min(cfg.concurrentEntries, 64*cfg.appenders*5)
	spread, err := workload.RawGroupedPuts(raw, "bench/p2", 4, cfg.appenders, cfg.appenders, groupTotal)
	if err != nil {
		return err
	}
	together, err := workload.RawGroupedPuts(raw, "bench/p2", 5, 1, cfg.appenders, groupTotal)
	if err != nil {
		return err
	}
	rate := r.PerSecond()
	t.add(row{"P2", fmt.Sprintf("%d goroutines, one durable append each at a time, a chain each", cfg.appenders), measured(r),
		"raw bbolt one put per durable tx " + perSecond(base.Rate), ratio(rate, base.Rate.PerSecond()),
		"≥ 120,000/s and ≥ 30×", yes(rate >= 120_000 && rate >= 30*base.Rate.PerSecond())})
	t.add(row{"P2", fmt.Sprintf("(the same, all %d appending to one chain)", cfg.appenders), measured(sharedRate),
		"raw bbolt one put per durable tx " + perSecond(base.Rate), ratio(sharedRate.PerSecond(), base.Rate.PerSecond()), "", ""})
	t.add(row{"P2", fmt.Sprintf("reference: raw bbolt, durable txs of %d puts, one at each of %d chains' tails", cfg.appenders, cfg.appenders),
		perSecond(spread), "raw bbolt one put per durable tx " + perSecond(base.Rate), ratio(spread.PerSecond(), base.Rate.PerSecond()), "", ""})
	t.add(row{"P2", fmt.Sprintf("reference: raw bbolt, durable txs of %d puts at one chain's tail", cfg.appenders),
		perSecond(together), "raw bbolt one put per durable tx " + perSecond(base.Rate), ratio(together.PerSecond(), base.Rate.PerSecond()), "", ""})
	return nil
}

// durable is P3: one durable append at a time, no concurrency.
func durable(ctx context.Context, cfg config, dir string, t *table) error {
	fmt.Fprintf(os.Stderr, "P3: %d single durable appends\n", cfg.durableAppends)
	db, err := openLedger(join(dir, "p3.ledger"), chain.Options{})
	if err != nil {
		return err
	}
	defer db.Close()
	raw, err := workload.RawOpen(join(dir, "p3.raw"))
	if err != nil {
		return err
	}
	defer raw.Close()
	// Interleave halves so that both see the same moment of a shared machine.
	half := cfg.durableAppends / 2
	a1, err := workload.DurableAppends(ctx, db, "bench/p3", 3, half)
	if err != nil {
		return err
	}
	b1, err := workload.RawDurablePuts(raw, "bench/p3", 3, half)
	if err != nil {
		return err
	}
	r := float64(a1.P50) / float64(b1.P50)
	t.add(row{"P3", "one durable append, no concurrency: p50 latency", fmt.Sprintf("%v (p99 %v, %s)", a1.P50.Round(time.Microsecond), a1.P99.Round(time.Microsecond), perSecond(a1.Rate)),
		fmt.Sprintf("raw bbolt one-put tx %v (p99 %v)", b1.P50.Round(time.Microsecond), b1.P99.Round(time.Microsecond)),
		fmt.Sprintf("%.2f×", r), "≤ 1.25×", yes(r <= 1.25)})
	return nil
}

// errEvictUnsupported is evict's error where the page cache cannot be
// told to drop a file (every system but Linux).
var errEvictUnsupported = errors.New("cold-cache figures need Linux")

// rssVerify verifies the ledger at path in a child process, twice: first
// right after evicting the file from the page cache, so that every size
// reads it from the disk (a file larger than the machine's memory cannot
// be verified otherwise, and the kernel's work of those reads counts in
// the child's system time), then as the first left the cache (warm when
// the file fits in memory). It adds P5's rows of their CPU time and of the
// second's peak RSS.
func rssVerify(path string, t *table) error {
	size, err := fileSize(path)
	if err != nil {
		return err
	}
	type pass struct {
		cache string
		c     verified
	}
	var passes []pass
	switch err := evict(path); {
	case errors.Is(err, errEvictUnsupported):
	case err != nil:
		return err
	default:
		cold, err := childVerify(path)
		if err != nil {
			return err
		}
		passes = append(passes, pass{"page cache cold (file just evicted)", cold})
		t.fig.p5ColdCPUNs = cold.cpuNsPerEntry()
	}
	c, err := childVerify(path)
	if err != nil {
		return err
	}
	passes = append(passes, pass{"page cache as the cold pass left it", c})
	t.fig.p5Entries, t.fig.p5CPUNs, t.fig.p5RSS = c.rate.Count, c.cpuNsPerEntry(), c.hwm
	for _, v := range passes {
		t.fig.p5RSS = max(t.fig.p5RSS, v.c.hwm)
		t.add(row{"P5", fmt.Sprintf("verify in a child process, %s entries, %s: CPU an entry (user + system, rusage)", count(float64(v.c.rate.Count)), v.cache),
			fmt.Sprintf("%.3f µs (%v of CPU, %v of it system; wall %.3f µs an entry, %s)", v.c.cpuNsPerEntry()/1e3,
				v.c.cpu.Round(time.Millisecond), v.c.sys.Round(time.Millisecond), v.c.rate.Duration.Seconds()*1e6/float64(max(v.c.rate.Count, 1)), perSecond(v.c.rate)), "", "", "", ""})
	}
	t.add(row{"P5", fmt.Sprintf("verify peak RSS (VmHWM, child process, the larger of the two), %s entries", count(float64(c.rate.Count))),
		mib(t.fig.p5RSS), "file size " + mib(size), ratio(float64(t.fig.p5RSS), float64(size)), "≤ 64 MiB", yes(t.fig.p5RSS <= 64<<20)})
	return nil
}

// rss is the memory half of P5: a child process verifies a file of
// rssEntries entries and reports its CPU time and peak RSS.
func rss(ctx context.Context, cfg config, dir string, t *table) error {
	if cfg.rssEntries == 0 {
		return nil
	}
	if cfg.verifiesP1File() {
		// The P1 file has that size already: verify it rather than write
		// another (at 100,000,000 entries, 38 GB).
		path := join(dir, "p1.ledger")
		if err := rssVerify(path, t); err != nil {
			return err
		}
		return cfg.remove(path)
	}
	path := join(dir, "rss.ledger")
	fmt.Fprintf(os.Stderr, "P5 RSS: writing %d entries\n", cfg.rssEntries)
	db, err := openLedger(path, chain.Options{})
	if err != nil {
		return err
	}
	stream, err := workload.UpdateBatches(ctx, db, "bench/rss", 5, cfg.rssEntries, workload.BatchSize)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "  written at %s; verifying in a child process\n", perSecond(stream.Total))
	if err := rssVerify(path, t); err != nil {
		return err
	}
	t.add(row{"P1", fmt.Sprintf("(same writer, %s entries)", count(float64(cfg.rssEntries))),
		fmt.Sprintf("%s (first 10%% %s, last 10%% %s)", perSecond(stream.Total), perSecond(stream.First), perSecond(stream.Last)),
		"", "", "", ""})
	return cfg.remove(path)
}

// warmRuns is how many warm verifies P5 times: one moves by up to 2× between
// runs on a shared machine, their median far less.
const warmRuns = 3

// median runs measure n times and returns the run of median rate, with every
// rate for the table.
func median(n int, measure func() (workload.Rate, error)) (workload.Rate, string, error) {
	rates := make([]workload.Rate, 0, n)
	for range n {
		r, err := measure()
		if err != nil {
			return workload.Rate{}, "", err
		}
		rates = append(rates, r)
	}
	slices.SortFunc(rates, func(a, b workload.Rate) int { return cmp.Compare(a.PerSecond(), b.PerSecond()) })
	all := make([]string, len(rates))
	for i, r := range rates {
		all[i] = perSecond(r)
	}
	return rates[len(rates)/2], "runs " + strings.Join(all, ", "), nil
}

// keyRuns counts the key runs of a closed ledger file, and the records of
// the largest.
func keyRuns(path string) (runs int, largest uint64, err error) {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	err = db.View(func(btx *bbolt.Tx) error {
		b := btx.Bucket(bolt.BucketKeyRuns)
		if b == nil {
			return nil
		}
		return b.ForEachBucket(func(name []byte) error {
			runs++
			if v := b.Bucket(name).Get([]byte("count")); len(v) == 8 {
				largest = max(largest, binary.BigEndian.Uint64(v))
			}
			return nil
		})
	})
	return runs, largest, err
}
