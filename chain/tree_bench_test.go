package chain_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/bench/workload"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/merkle"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// openTreeBench is openCommitterBench's ledger, with or without the
// Merkle trees' upkeep.
func openTreeBench(b *testing.B, n int, noTrees bool) *chain.DB {
	b.Helper()
	backend, err := bolt.Open(filepath.Join(benchDir(b), "ledger.db"), bolt.Options{Log: bolt.LogOn, MemtableBytesMax: int64(n)*1024 + 64<<20})
	if err != nil {
		b.Fatal(err)
	}
	db, err := chain.OpenBackend(backend, chain.Options{NoTrees: noTrees})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}

// cpuTime is the process's user and system CPU time so far: on a machine
// that other work shares, the CPU a turn costs varies less than its wall
// time.
func cpuTime() time.Duration {
	var u syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// BenchmarkTreeUpkeep is P1's shape (Updates of 1,000 appends through
// Tx.AppendBatch, random keys) into a ledger that keeps the Merkle trees
// and one that does not (Options.NoTrees), taking turns every 10 Updates
// so that both see the same load. Report "cost": the trees' ns per entry
// over the other's, minus 1 (0.05 is 5%); "cpu-cost" the same of the
// process's CPU time.
func BenchmarkTreeUpkeep(b *testing.B) {
	ctx := context.Background()
	alternateTrees(b, 10*workload.BatchSize, "entry", func(db *chain.DB, stream uint64, turn int) (time.Duration, error) {
		r, err := workload.UpdateBatches(ctx, db, "bench", stream, turn, workload.BatchSize)
		return r.Total.Duration, err
	})
}

// alternateTrees runs turns of turn appends into a ledger with the trees
// and one without (Options.NoTrees), each going first every other turn (the
// one that follows meets the other's leftovers: its last syncs, its
// garbage), and reports "cost" and "cpu-cost" beside both ns per unit.
func alternateTrees(b *testing.B, turn int, unit string, run func(db *chain.DB, stream uint64, turn int) (time.Duration, error)) {
	n := max(b.N, turn) / turn * turn
	with, without := openTreeBench(b, n, false), openTreeBench(b, n, true)
	var base, got, baseCPU, gotCPU time.Duration
	b.ResetTimer()
	timed := func(db *chain.DB, stream uint64, wall, cpu *time.Duration) {
		c := cpuTime()
		d, err := run(db, stream, turn)
		if err != nil {
			b.Fatal(err)
		}
		*wall += d
		*cpu += cpuTime() - c
	}
	for stream := uint64(1); stream <= uint64(n/turn); stream++ {
		if stream%2 == 0 {
			timed(with, stream, &got, &gotCPU)
			timed(without, stream, &base, &baseCPU)
		} else {
			timed(without, stream, &base, &baseCPU)
			timed(with, stream, &got, &gotCPU)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(gotCPU)/float64(baseCPU)-1, "cpu-cost")
	b.ReportMetric(float64(got.Nanoseconds())/float64(n), "ns/"+unit)
	b.ReportMetric(float64(base.Nanoseconds())/float64(n), "no-trees-ns/"+unit)
	b.ReportMetric(float64(got)/float64(base)-1, "cost")
}

// BenchmarkTreeUpkeepConcurrent is P2's two shapes (64 goroutines, one
// append at a time each, group commit; a chain each, then all on one) with
// and without the trees, in turns of 20,000 appends. Report "cost" and
// "cpu-cost" as BenchmarkTreeUpkeep does.
func BenchmarkTreeUpkeepConcurrent(b *testing.B) {
	for _, shape := range []struct {
		name   string
		shared bool
	}{{"a-chain-each", false}, {"one-chain", true}} {
		b.Run(shape.name, func(b *testing.B) { benchmarkTreeUpkeepConcurrent(b, shape.shared) })
	}
}

func benchmarkTreeUpkeepConcurrent(b *testing.B, shared bool) {
	const appenders = 64
	ctx := context.Background()
	alternateTrees(b, 20_000, "append", func(db *chain.DB, stream uint64, turn int) (time.Duration, error) {
		r, err := workload.ConcurrentAppends(ctx, db, "bench", 2+stream, appenders, turn, shared, 0)
		return r.Duration, err
	})
}

// treeBenchEntries is the size of the chain of BenchmarkProofs:
// LEDGER_BENCH_TREE_ENTRIES, 10,000,000 when unset.
func treeBenchEntries(b *testing.B) uint64 {
	if s := os.Getenv("LEDGER_BENCH_TREE_ENTRIES"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n < 2 {
			b.Fatalf("LEDGER_BENCH_TREE_ENTRIES=%q", s)
		}
		return n
	}
	return 10_000_000
}

// BenchmarkProofs builds one chain of LEDGER_BENCH_TREE_ENTRIES entries
// (10,000,000 by default; building it takes minutes) and times an
// inclusion proof of a random entry in the whole tree and a consistency
// proof from a random earlier size, each in its own read transaction,
// beside the baseline of reading one entry (DB.Get) the same way. Report
// the ns of each and the proofs' sizes in bytes (32 per hash).
func BenchmarkProofs(b *testing.B) {
	n := treeBenchEntries(b)
	dir := b.TempDir()
	db, err := chain.Open(filepath.Join(dir, "ledger.db"), chain.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	const batch = 4096
	reqs := make([]chain.Request, 0, batch)
	for done := uint64(0); done < n; {
		reqs = reqs[:0]
		for i := 0; i < batch && done < n; i++ {
			reqs = append(reqs, chain.Request{Chain: "big", Type: "bench/v1", Payload: []byte(strconv.FormatUint(done, 10))})
			done++
		}
		if _, err := db.AppendBatch(ctx, reqs, nil); err != nil {
			b.Fatal(err)
		}
	}
	var head chain.TreeHead
	if err := db.View(ctx, func(tx *chain.Tx) error {
		head, err = tx.TreeHead("big")
		return err
	}); err != nil {
		b.Fatal(err)
	}
	seq := func(i int) uint64 { return 1 + (uint64(i)*2_654_435_761)%n }
	var get, inclusion, consistency time.Duration
	var inclusionBytes, consistencyBytes int
	b.ResetTimer()
	for i := range b.N {
		s := seq(i)
		start := time.Now()
		if _, err := db.Get(ctx, "big", s); err != nil {
			b.Fatal(err)
		}
		get += time.Since(start)
		ip := timedProof(b, db, &inclusion, func(tx *chain.Tx) ([]merkle.Hash, error) { return tx.InclusionProof("big", s, n) })
		inclusionBytes = max(inclusionBytes, len(ip)*merkle.HashSize)
		cp := timedProof(b, db, &consistency, func(tx *chain.Tx) ([]merkle.Hash, error) { return tx.ConsistencyProof("big", s, n) })
		consistencyBytes = max(consistencyBytes, len(cp)*merkle.HashSize)
		if i == 0 {
			e, _ := db.Get(ctx, "big", s)
			if err := merkle.VerifyInclusion(s-1, n, chain.LeafHash(e.Hash), ip, head.Root); err != nil {
				b.Fatal(fmt.Errorf("proof does not verify: %w", err))
			}
		}
	}
	b.StopTimer()
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) }
	b.ReportMetric(per(get), "get-ns")
	b.ReportMetric(per(inclusion), "inclusion-ns")
	b.ReportMetric(per(consistency), "consistency-ns")
	b.ReportMetric(float64(inclusionBytes), "inclusion-bytes-max")
	b.ReportMetric(float64(consistencyBytes), "consistency-bytes-max")
	b.ReportMetric(per(inclusion)/per(get), "inclusion/get")
}

// timedProof makes one proof in its own read transaction and adds the time
// it took to total.
func timedProof(b *testing.B, db *chain.DB, total *time.Duration, prove func(tx *chain.Tx) ([]merkle.Hash, error)) []merkle.Hash {
	var p []merkle.Hash
	start := time.Now()
	err := db.View(context.Background(), func(tx *chain.Tx) error {
		var err error
		p, err = prove(tx)
		return err
	})
	*total += time.Since(start)
	if err != nil {
		b.Fatal(err)
	}
	return p
}
