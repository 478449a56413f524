package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/bench/workload"
	"github.com/ledgerworks/ledger/chain"
)

// row is one line of the table.
type row struct {
	id, figure       string
	result, baseline string
	ratio            string
	target           string
	met              string
}

type table struct{ rows []row }

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
	fmt.Printf("files: %s\n\n", dir)
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
	t.print()
	return nil
}

const mainChain = "bench/p1"

// mainFile writes the P1 stream into one ledger and the same bytes into a
// raw file, then reads both for P4–P7.
func mainFile(ctx context.Context, cfg config, dir string, t *table) error {
	path, rawPath := join(dir, "p1.ledger"), join(dir, "p1.raw")
	fmt.Fprintf(os.Stderr, "P1: %d entries, %d per Update, random 32-byte keys\n", cfg.entries, workload.BatchSize)
	raw, err := workload.RawOpen(rawPath)
	if err != nil {
		return err
	}
	rawStream, err := workload.RawSequentialPuts(raw, mainChain, 1, cfg.entries, workload.BatchSize)
	if err != nil {
		return err
	}
	db, err := openLedger(path, chain.Options{})
	if err != nil {
		return err
	}
	sampler := sampleRSS()
	stream, err := workload.UpdateBatches(ctx, db, mainChain, 1, cfg.entries, workload.BatchSize)
	anon, files := sampler.stop()
	if err != nil {
		return err
	}
	p1 := stream.Total.PerSecond()
	t.add(row{"P1", fmt.Sprintf("Update, %d appends per tx (one AppendBatch), random keys, %s entries", workload.BatchSize, count(float64(cfg.entries))),
		perSecond(stream.Total), "raw bbolt sequential puts " + perSecond(rawStream.Total),
		ratio(p1, rawStream.Total.PerSecond()), "≥ 300,000/s", yes(p1 >= 300_000)})
	t.add(row{"P1", "first 10%", perSecond(stream.First), "raw " + perSecond(rawStream.First),
		ratio(stream.First.PerSecond(), rawStream.First.PerSecond()), "", ""})
	lastFirst := stream.Last.PerSecond() / stream.First.PerSecond()
	t.add(row{"P1", "last 10%", perSecond(stream.Last), "raw " + perSecond(rawStream.Last),
		ratio(stream.Last.PerSecond(), rawStream.Last.PerSecond()), "", ""})
	t.add(row{"P1", "last 10% ÷ first 10%", fmt.Sprintf("%.2f", lastFirst),
		fmt.Sprintf("raw %.2f", rawStream.Last.PerSecond()/rawStream.First.PerSecond()), "", "≥ 0.80", yes(lastFirst >= 0.8)})
	t.add(row{"P1", "each tenth, first to last", tenths(stream), "raw " + tenths(rawStream), "", "", ""})
	t.add(row{"P1", "peak RSS of the process while the engine writes (sampled every 10 ms)",
		fmt.Sprintf("%s not file-backed, %s file-backed", mib(anon), mib(files)), "", "", "", ""})
	if !cfg.skipNaiveBaseline && cfg.runs("P1") {
		naive, err := workload.RawOpen(join(dir, "p1.naive"))
		if err != nil {
			return err
		}
		ns, err := workload.RawIndexedPuts(naive, mainChain, 1, cfg.entries, workload.BatchSize)
		naive.Close()
		if err != nil {
			return err
		}
		t.add(row{"P1", "reference: naive layout (entry + random key B-tree + head) in raw bbolt",
			fmt.Sprintf("%s (first 10%% %s, last 10%% %s)", perSecond(ns.Total), perSecond(ns.First), perSecond(ns.Last)),
			"raw bbolt sequential puts " + perSecond(rawStream.Total), ratio(ns.Total.PerSecond(), rawStream.Total.PerSecond()), "", ""})
		os.Remove(join(dir, "p1.naive"))
	}

	if cfg.runs("P3") {
		if err := durableOnFile(ctx, cfg, db, raw, t); err != nil {
			return err
		}
	}

	if cfg.runs("P4") {
		fmt.Fprintf(os.Stderr, "P4: %d replays from %d callers\n", cfg.replays, cfg.readers)
		rp, err := workload.Replays(ctx, db, mainChain, 1, cfg.entries, cfg.readers, cfg.replays, 1, cfg.budget)
		if err != nil {
			return err
		}
		rg, err := workload.RawGets(raw, cfg.entries, cfg.readers, cfg.replays, cfg.budget)
		if err != nil {
			return err
		}
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

	if cfg.runs("P5") {
		fmt.Fprintf(os.Stderr, "P5: verify %d entries, warm\n", cfg.entries)
		workload.Verify(ctx, db) // warm the page cache with one pass
		v, vs, err := median(warmRuns, func() (workload.Rate, error) { return workload.Verify(ctx, db) })
		if err != nil {
			return err
		}
		rs, rss, err := median(warmRuns, func() (workload.Rate, error) { return workload.RawScanHash(raw) })
		if err != nil {
			return err
		}
		t.add(row{"P5", fmt.Sprintf("verify %s entries, page cache warm, median of %d", count(float64(v.Count)), warmRuns),
			perSecond(v) + " (" + vs + ")", "raw cursor scan + BLAKE3, 1 core " + perSecond(rs) + " (" + rss + ")",
			ratio(v.PerSecond(), rs.PerSecond()), "≥ 5,000,000/s", yes(v.PerSecond() >= 5_000_000)})
	}
	if err := db.Close(); err != nil {
		return err
	}
	if err := raw.Close(); err != nil {
		return err
	}

	if cfg.runs("P6") {
		fmt.Fprintf(os.Stderr, "P6: verify %d entries, cold\n", cfg.entries)
		v, rs, disk, err := coldVerify(ctx, path, rawPath, cfg.entries)
		if err != nil {
			return err
		}
		t.add(row{"P6", "verify, file just evicted from the page cache", perSecond(v),
			"raw cold cursor scan + BLAKE3 " + perSecond(rs), ratio(v.PerSecond(), rs.PerSecond()), "≥ 1,000,000/s", yes(v.PerSecond() >= 1_000_000)})
		t.add(row{"P6", "reference: the disk's ceiling, the evicted ledger file read sequentially (1 MiB reads), as entries/s", perSecond(disk),
			"", ratio(v.PerSecond(), disk.PerSecond()) + " of it", "", ""})
	}

	if cfg.runs("P7") {
		size, err := fileSize(path)
		if err != nil {
			return err
		}
		rawSize, err := fileSize(rawPath)
		if err != nil {
			return err
		}
		logical := workload.LogicalSize() * int64(cfg.entries)
		r := float64(size) / float64(logical)
		t.add(row{"P7", fmt.Sprintf("file size ÷ (payload + fixed fields) (%d B per entry)", workload.LogicalSize()),
			fmt.Sprintf("%.2f (%s, %.0f B per entry)", r, mib(size), float64(size)/float64(cfg.entries)),
			fmt.Sprintf("raw bbolt file of the records %.2f (%s)", float64(rawSize)/float64(logical), mib(rawSize)),
			ratio(float64(size), float64(rawSize)), "≤ 1.30", yes(r <= 1.3)})
	}
	return nil
}

// coldVerify measures, each right after evicting its file: the engine's
// verify, the raw scan of the raw file (opened read-only, so that nothing
// reads the file before the scan), and a plain sequential read of the
// engine's file, the disk's ceiling for any scan of it (as entries/s).
func coldVerify(ctx context.Context, path, rawPath string, entries int) (v, rs, disk workload.Rate, err error) {
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
	if err = evict(rawPath); err != nil {
		return
	}
	raw, err := workload.RawOpenReadOnly(rawPath)
	if err != nil {
		return
	}
	rs, err = workload.RawScanHash(raw)
	raw.Close()
	if err != nil {
		return
	}
	if err = evict(path); err != nil {
		return
	}
	took, err := workload.ReadFile(path)
	return v, rs, workload.Rate{Count: int64(entries), Duration: took}, err
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

// rssVerify verifies the ledger at path in a child process and adds P5's
// row of its peak RSS.
func rssVerify(path string, t *table) error {
	size, err := fileSize(path)
	if err != nil {
		return err
	}
	v, hwm, err := childVerify(path)
	if err != nil {
		return err
	}
	t.add(row{"P5", fmt.Sprintf("verify peak RSS (VmHWM, child process), %s entries", count(float64(v.Count))),
		fmt.Sprintf("%s (at %s, %.2f µs of wall time an entry)", mib(hwm), perSecond(v), v.Duration.Seconds()*1e6/float64(max(v.Count, 1))), "file size " + mib(size),
		ratio(float64(hwm), float64(size)), "≤ 64 MiB", yes(hwm <= 64<<20)})
	return nil
}

// durableOnFile is P3 on the P1 files, at their size: new keys appended
// one durable append at a time to the chain P1 wrote, beside raw bbolt's
// one-put transactions on its file of the same records.
func durableOnFile(ctx context.Context, cfg config, db *chain.DB, raw *bbolt.DB, t *table) error {
	half := cfg.durableAppends / 2
	fmt.Fprintf(os.Stderr, "P3: %d single durable appends on the P1 files\n", half)
	a, err := workload.DurableAppends(ctx, db, mainChain, 3, half)
	if err != nil {
		return err
	}
	b, err := workload.RawDurablePuts(raw, mainChain, 3, half)
	if err != nil {
		return err
	}
	r := float64(a.P50) / float64(b.P50)
	t.add(row{"P3", fmt.Sprintf("(the same on the P1 file, %s entries)", count(float64(cfg.entries))),
		fmt.Sprintf("%v (p99 %v)", a.P50.Round(time.Microsecond), a.P99.Round(time.Microsecond)),
		fmt.Sprintf("raw bbolt one-put tx %v (p99 %v)", b.P50.Round(time.Microsecond), b.P99.Round(time.Microsecond)),
		fmt.Sprintf("%.2f×", r), "", ""})
	return nil
}

// rss is the memory half of P5: a child process verifies a file of
// rssEntries entries and reports its peak RSS.
func rss(ctx context.Context, cfg config, dir string, t *table) error {
	if cfg.rssEntries == 0 {
		return nil
	}
	if cfg.rssEntries == cfg.entries && cfg.runs("P5") {
		// The P1 file has that size already: verify it rather than write
		// another (at 100,000,000 entries, 36 GB).
		return rssVerify(join(dir, "p1.ledger"), t)
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
	return nil
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
