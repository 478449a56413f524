package bolt_test

import (
	"context"
	"path/filepath"
	"testing"

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
