// Command bench measures the ledger engine against raw bbolt on this machine
// and prints one table: every performance figure (P1–P7 of
// docs/PERFORMANCE.md), its baseline measured in the same run, and the
// ratio.
//
//	go run ./bench                      # 1,000,000 entries, RSS at 10,000,000
//	go run ./bench -entries 200000 -rss-entries 0   # a quick run
//	go run ./bench -entries 100000000 -rss-entries 100000000 -reference-entries 1000000 \
//	    -only P1,P3,P4,P5 -skip-naive -replay-batch 1   # 100M beside 1M (docs/PERFORMANCE.md)
//
// Every figure is durable: the engine and the baselines commit with fsync.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/ledgerworks/ledger/bench/workload"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// Limits of the flags, so that a typo does not fill the disk.
const (
	entriesMax    = 100_000_000
	goroutinesMax = 4096
)

type config struct {
	dir               string
	entries           int
	rssEntries        int
	referenceEntries  int
	concurrentEntries int
	durableAppends    int
	replays           int
	appenders         int
	readers           int
	replayBatch       int
	skipNaiveBaseline bool
	keep              bool
	verifyChild       string
	cpuProfile        string
	memProfile        string
	only              string
	budget            time.Duration
	log               string
}

func main() {
	var cfg config
	flag.StringVar(&cfg.dir, "dir", "", "folder for the ledger files (a new temporary folder when empty)")
	flag.IntVar(&cfg.entries, "entries", 1_000_000, "entries written by P1 and read by P4-P7")
	flag.IntVar(&cfg.rssEntries, "rss-entries", 10_000_000, "entries of the file whose verify RSS is measured (0: skip)")
	flag.IntVar(&cfg.referenceEntries, "reference-entries", 0, "first run P1, P3, P4 and P5 at this many entries, and print each of their figures at -entries as a ratio to it (0: no reference run)")
	flag.IntVar(&cfg.concurrentEntries, "concurrent-entries", 200_000, "entries written by the concurrent appenders of P2")
	flag.IntVar(&cfg.durableAppends, "durable-appends", 2_000, "single durable appends timed for P3")
	flag.IntVar(&cfg.replays, "replays", 1_000_000, "replays timed for P4")
	flag.IntVar(&cfg.appenders, "appenders", 64, "concurrent appenders of P2")
	flag.IntVar(&cfg.readers, "readers", 2, "concurrent replaying callers of P4")
	flag.IntVar(&cfg.replayBatch, "replay-batch", 100, "retries per DB.AppendBatch call in P4's batched reference row (1: skip the row)")
	flag.BoolVar(&cfg.skipNaiveBaseline, "skip-naive", false, "skip the naive indexed-layout reference of P1")
	flag.BoolVar(&cfg.keep, "keep", false, "keep the ledger files")
	flag.StringVar(&cfg.verifyChild, "verify-child", "", "internal: verify this file and print entries, seconds and peak RSS")
	flag.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of the engine figures to this file")
	flag.StringVar(&cfg.memProfile, "memprofile", "", "write a heap profile to this file at each new peak of P1's memory not file-backed (the heap as of the last collection)")
	flag.StringVar(&cfg.only, "only", "", "comma-separated figures to run (P1..P7); all when empty")
	flag.StringVar(&cfg.log, "log", "default", "how the ledger files commit: on (write-ahead log), off (straight to bbolt) or default")
	flag.Int64Var(&memoryBytesMax, "memory-bytes", 0, "the engine's bolt.Options.MemoryBytesMax: 0 its default (512 MiB), negative no bound")
	flag.Int64Var(&memtableBytesMax, "memtable-bytes", 0, "the engine's bolt.Options.MemtableBytesMax: 0 its default")
	flag.BoolVar(&noTrees, "no-trees", false, "write without the chains' Merkle trees (chain.Options.NoTrees), to measure what their upkeep costs")
	flag.DurationVar(&cfg.budget, "budget", 15*time.Second, "time after which P2 and P4 stop early on a slow machine (0: none)")
	flag.Parse()
	if cfg.verifyChild != "" {
		if err := verifyChild(cfg.verifyChild); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if err := cfg.check(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	mode, ok := logModes[cfg.log]
	if !ok {
		fmt.Fprintf(os.Stderr, "bench: -log %q: want on, off or default\n", cfg.log)
		os.Exit(2)
	}
	logMode = mode
	if err := run(context.Background(), cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func (c *config) check() error {
	for name, v := range map[string]int{"entries": c.entries, "concurrent-entries": c.concurrentEntries,
		"durable-appends": c.durableAppends, "replays": c.replays} {
		if v < 10 || v > entriesMax {
			return fmt.Errorf("-%s %d outside 10..%d", name, v, entriesMax)
		}
	}
	if c.rssEntries != 0 && (c.rssEntries < 10 || c.rssEntries > entriesMax) {
		return fmt.Errorf("-rss-entries %d outside 10..%d (or 0)", c.rssEntries, entriesMax)
	}
	if c.referenceEntries != 0 && (c.referenceEntries < 10 || c.referenceEntries > entriesMax) {
		return fmt.Errorf("-reference-entries %d outside 10..%d (or 0)", c.referenceEntries, entriesMax)
	}
	if c.appenders < 1 || c.appenders > goroutinesMax || c.readers < 1 || c.readers > goroutinesMax {
		return fmt.Errorf("-appenders and -readers must be within 1..%d", goroutinesMax)
	}
	if c.replayBatch < 1 || c.replayBatch > workload.ReplayBatchMax {
		return fmt.Errorf("-replay-batch %d outside 1..%d", c.replayBatch, workload.ReplayBatchMax)
	}
	return nil
}

func (c *config) runs(figure string) bool {
	if c.only == "" {
		return true
	}
	for _, f := range strings.Split(c.only, ",") {
		if strings.EqualFold(strings.TrimSpace(f), figure) {
			return true
		}
	}
	return false
}

// verifyChild is the process whose peak RSS P5 reports: it opens the file
// read-only, verifies it and prints what it saw.
func verifyChild(path string) error {
	db, err := openLedger(path, chain.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer db.Close()
	rate, err := workload.Verify(context.Background(), db)
	if err != nil {
		return err
	}
	hwm, err := peakRSS()
	if err != nil {
		return err
	}
	fmt.Printf("%d %d %d\n", rate.Count, rate.Duration.Nanoseconds(), hwm)
	return nil
}

// peakRSS reads VmHWM from /proc/self/status, in bytes.
func peakRSS() (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kib << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/self/status")
}

// rssSampler records the process's peak resident memory, file-backed
// (RssFile: the ledger's map) and not (RssAnon), sampled every 10 ms
// until stop.
type rssSampler struct {
	stopped     chan struct{}
	done        chan struct{}
	anon, files int64
}

func sampleRSS(heapProfile string) *rssSampler {
	s := &rssSampler{stopped: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		var profiled int64
		for {
			anon, files := rssNow()
			s.anon, s.files = max(s.anon, anon), max(s.files, files)
			if heapProfile != "" && anon > profiled+profiled/64 {
				profiled = anon
				writeHeapProfile(heapProfile)
			}
			select {
			case <-s.stopped:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// writeHeapProfile writes the heap profile to path; a failure is printed,
// the figures go on.
func writeHeapProfile(path string) {
	f, err := os.Create(path)
	if err == nil {
		err = pprof.WriteHeapProfile(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "heap profile: %v\n", err)
	}
}

// stop ends the sampling and returns the peaks in bytes.
func (s *rssSampler) stop() (anon, files int64) {
	close(s.stopped)
	<-s.done
	return s.anon, s.files
}

// rssNow reads RssAnon and RssFile from /proc/self/status, in bytes (zero
// where there is none).
func rssNow() (anon, files int64) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, v, ok := strings.Cut(line, ":")
		if !ok || (name != "RssAnon" && name != "RssFile") {
			continue
		}
		kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			continue
		}
		if name == "RssAnon" {
			anon = kib << 10
		} else {
			files = kib << 10
		}
	}
	return anon, files
}

func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	load := ""
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	return fmt.Sprintf("%s, %d CPUs, %s %s/%s, load %s, %s", model, runtime.NumCPU(), runtime.Version(),
		runtime.GOOS, runtime.GOARCH, load, time.Now().UTC().Format("2006-01-02 15:04 UTC"))
}

func tempDir(cfg config) (string, func(), error) {
	if cfg.dir != "" {
		if err := os.MkdirAll(cfg.dir, 0o700); err != nil {
			return "", nil, err
		}
		// The figures are of new files: a ledger left by an earlier run
		// would be appended to, and P2 would measure a larger file.
		names, err := os.ReadDir(cfg.dir)
		if err != nil {
			return "", nil, err
		}
		if len(names) > 0 {
			return "", nil, fmt.Errorf("-dir %s holds %d files (%s, …): name an empty or new folder", cfg.dir, len(names), names[0].Name())
		}
		return cfg.dir, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "ledger-bench-")
	if err != nil {
		return "", nil, err
	}
	if cfg.keep {
		return dir, func() {}, nil
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

func fileSize(path string) (int64, error) {
	info, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return info.Size(), nil
}

// verified is what a verify child reported.
type verified struct {
	rate workload.Rate
	cpu  time.Duration // user + system time of the child, from its rusage
	sys  time.Duration // the system part of cpu: the kernel's work, page faults and reads included
	hwm  int64         // peak RSS of the child, bytes
}

// cpuNsPerEntry is the child's CPU an entry verified, in nanoseconds.
func (v verified) cpuNsPerEntry() float64 {
	return float64(v.cpu.Nanoseconds()) / float64(max(v.rate.Count, 1))
}

// childVerify runs verifyChild in a new process of this program.
func childVerify(path string) (verified, error) {
	exe, err := os.Executable()
	if err != nil {
		return verified{}, err
	}
	cmd := exec.Command(exe, "-verify-child", path)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return verified{}, fmt.Errorf("verify child: %w", err)
	}
	var count, nanos, hwm int64
	if _, err := fmt.Sscan(string(out), &count, &nanos, &hwm); err != nil {
		return verified{}, fmt.Errorf("verify child printed %q: %w", out, err)
	}
	sys := cmd.ProcessState.SystemTime()
	cpu := cmd.ProcessState.UserTime() + sys
	return verified{workload.Rate{Count: count, Duration: time.Duration(nanos)}, cpu, sys, hwm}, nil
}

func join(dir, name string) string { return filepath.Join(dir, name) }

// logModes are the values of -log.
var logModes = map[string]bolt.LogMode{"default": bolt.LogDefault, "on": bolt.LogOn, "off": bolt.LogOff}

// logMode is how the ledger files of the run commit (-log).
var logMode = bolt.LogDefault

// noTrees is -no-trees: the ledger files of the run keep no Merkle trees.
var noTrees bool

// memoryBytesMax is -memory-bytes: the engine's bound of its memory.
var memoryBytesMax int64

// memtableBytesMax is -memtable-bytes: the engine's bound of a memory table.
var memtableBytesMax int64

// openLedger is chain.Open with the -log and -no-trees modes.
func openLedger(path string, opts chain.Options) (*chain.DB, error) {
	opts.NoTrees = noTrees
	backend, err := bolt.Open(path, bolt.Options{ReadOnly: opts.ReadOnly, Log: logMode, EntryKey: chain.RecordKey, MemoryBytesMax: memoryBytesMax, MemtableBytesMax: memtableBytesMax})
	if err != nil {
		return nil, err
	}
	db, err := chain.OpenBackend(backend, opts)
	if err != nil {
		backend.Close()
		return nil, err
	}
	return db, nil
}
