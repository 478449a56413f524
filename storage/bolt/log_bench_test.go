package bolt_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/bench/workload"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// The benchmarks of the log measure the engine with the log on and with it
// off beside a raw bbolt baseline writing the same bytes in the same run,
// and report each as a ratio to the baseline ("ratio" with the log,
// "off-ratio" without): throughput ratios, higher is better; latency
// ratios, lower is better.

func openLogBench(b *testing.B, mode bolt.LogMode, name string) *chain.DB {
	b.Helper()
	backend, err := bolt.Open(filepath.Join(b.TempDir(), name), bolt.Options{Log: mode})
	if err != nil {
		b.Fatal(err)
	}
	db, err := chain.OpenBackend(backend, chain.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}

// BenchmarkLogDurableAppend is P3: one durable append at a time; p50
// latency beside a raw bbolt one-put durable transaction.
func BenchmarkLogDurableAppend(b *testing.B) {
	ctx := context.Background()
	on, off := openLogBench(b, bolt.LogOn, "on.db"), openLogBench(b, bolt.LogOff, "off.db")
	raw, err := workload.RawOpen(filepath.Join(b.TempDir(), "raw.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	n := max(b.N, 200)
	b.ResetTimer()
	got, err := workload.DurableAppends(ctx, on, "bench/p3", 3, n)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	without, err := workload.DurableAppends(ctx, off, "bench/p3", 3, n)
	if err != nil {
		b.Fatal(err)
	}
	base, err := workload.RawDurablePuts(raw, "bench/p3", 3, n)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(got.P50.Seconds()*1e6, "p50-µs")
	b.ReportMetric(base.P50.Seconds()*1e6, "raw-p50-µs")
	b.ReportMetric(got.P50.Seconds()/base.P50.Seconds(), "ratio")
	b.ReportMetric(without.P50.Seconds()/base.P50.Seconds(), "off-ratio")
}

// BenchmarkLogConcurrentAppends is P2: 64 goroutines, each appending one
// entry to a chain of its own and waiting for its durable result, beside
// one raw bbolt put per durable transaction.
func BenchmarkLogConcurrentAppends(b *testing.B) {
	ctx := context.Background()
	on, off := openLogBench(b, bolt.LogOn, "on.db"), openLogBench(b, bolt.LogOff, "off.db")
	raw, err := workload.RawOpen(filepath.Join(b.TempDir(), "raw.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	n := max(b.N, 20_000)
	b.ResetTimer()
	got, err := workload.ConcurrentAppends(ctx, on, "bench/p2", 2, 64, n, false, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	without, err := workload.ConcurrentAppends(ctx, off, "bench/p2", 2, 64, n, false, 0)
	if err != nil {
		b.Fatal(err)
	}
	base, err := workload.RawDurablePuts(raw, "bench/p2", 2, 1000)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(got.PerSecond(), "appends/s")
	b.ReportMetric(base.Rate.PerSecond(), "raw-txs/s")
	b.ReportMetric(got.PerSecond()/base.Rate.PerSecond(), "ratio")
	b.ReportMetric(without.PerSecond()/base.Rate.PerSecond(), "off-ratio")
}

// BenchmarkLogUpdateBatches is P1: Updates of 1,000 appends with fresh
// random keys and 200-byte payloads, beside raw bbolt sequential puts of
// the same bytes, 1,000 per transaction.
func BenchmarkLogUpdateBatches(b *testing.B) {
	ctx := context.Background()
	on, off := openLogBench(b, bolt.LogOn, "on.db"), openLogBench(b, bolt.LogOff, "off.db")
	raw, err := workload.RawOpen(filepath.Join(b.TempDir(), "raw.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	n := max(b.N, 100*workload.BatchSize)
	b.ResetTimer()
	got, err := workload.UpdateBatches(ctx, on, "bench/p1", 1, n, workload.BatchSize)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	without, err := workload.UpdateBatches(ctx, off, "bench/p1", 1, n, workload.BatchSize)
	if err != nil {
		b.Fatal(err)
	}
	base, err := workload.RawSequentialPuts(raw, "bench/p1", 1, n, workload.BatchSize)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(got.Total.PerSecond(), "entries/s")
	b.ReportMetric(base.Total.PerSecond(), "raw-entries/s")
	b.ReportMetric(got.Total.PerSecond()/base.Total.PerSecond(), "ratio")
	b.ReportMetric(without.Total.PerSecond()/base.Total.PerSecond(), "off-ratio")
}

// BenchmarkLogEarlySync runs a workload on two ledgers in turns: one
// whose commits start their sync before applying their operations to the
// memory table when nothing before them waits for a sync (the default),
// one whose commits leave it to their wait. "ratio" is the first's rate
// over the second's. Updates is P1, ten Updates of 1,000 appends a turn;
// appenders is P2, 64 appenders writing 20,000 entries a turn.
func BenchmarkLogEarlySync(b *testing.B) {
	b.Run("updates", func(b *testing.B) {
		const turn = 10 * workload.BatchSize
		benchmarkEarlySync(b, turn, max(b.N, 200*workload.BatchSize)/turn, func(ctx context.Context, db *chain.DB, t int) (workload.Rate, error) {
			got, err := workload.UpdateBatches(ctx, db, "bench/p1", uint64(t), turn, workload.BatchSize)
			return got.Total, err
		})
	})
	b.Run("appenders", func(b *testing.B) {
		const turn = 20_000
		benchmarkEarlySync(b, turn, max(b.N, 200_000)/turn, func(ctx context.Context, db *chain.DB, t int) (workload.Rate, error) {
			return workload.ConcurrentAppends(ctx, db, "bench/p2", uint64(t), 64, turn, false, 0)
		})
	})
}

func benchmarkEarlySync(b *testing.B, turn, turns int, run func(ctx context.Context, db *chain.DB, t int) (workload.Rate, error)) {
	ctx := context.Background()
	var dbs [2]*chain.DB
	for i, on := range []bool{true, false} {
		backend, err := bolt.Open(filepath.Join(b.TempDir(), "early.db"), bolt.Options{Log: bolt.LogOn})
		if err != nil {
			b.Fatal(err)
		}
		bolt.SetEarlySync(backend, on)
		if dbs[i], err = chain.OpenBackend(backend, chain.Options{}); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { dbs[i].Close() })
	}
	var elapsed [2]time.Duration
	paired := make([]float64, 0, turns) // the late turn's time over the early one's
	b.ResetTimer()
	for t := range turns {
		var took [2]time.Duration
		for i, db := range dbs {
			got, err := run(ctx, db, t)
			if err != nil {
				b.Fatal(err)
			}
			took[i] = got.Duration
			elapsed[i] += got.Duration
		}
		paired = append(paired, took[1].Seconds()/took[0].Seconds())
	}
	b.StopTimer()
	entries := float64(turns * turn)
	early, late := entries/elapsed[0].Seconds(), entries/elapsed[1].Seconds()
	slices.Sort(paired)
	b.ReportMetric(early, "entries/s")
	b.ReportMetric(late, "late-entries/s")
	b.ReportMetric(early/late, "ratio")
	b.ReportMetric(paired[len(paired)/2], "median-turn-ratio")
}
