package chain_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/bench/workload"
	"github.com/ledgerworks/ledger/chain"
)

// The benchmarks measure the engine beside a raw bbolt baseline that writes
// or reads the same bytes in the same run, and report engine ÷ baseline as
// the metric "ratio" (throughput ratios: higher is better; latency ratios:
// lower is better). go run ./bench prints all figures as one table.

func openBench(b *testing.B) (*chain.DB, *bbolt.DB) {
	b.Helper()
	dir := b.TempDir()
	db, err := chain.Open(filepath.Join(dir, "ledger.db"), chain.Options{})
	if err != nil {
		b.Fatal(err)
	}
	raw, err := workload.RawOpen(filepath.Join(dir, "raw.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		db.Close()
		raw.Close()
	})
	return db, raw
}

// BenchmarkUpdateRandomKeys is P1: Update with 1,000 appends per
// transaction, each with a fresh random key and a 200-byte payload.
func BenchmarkUpdateRandomKeys(b *testing.B) {
	db, raw := openBench(b)
	benchUpdates(b, db, raw, max(b.N, workload.BatchSize))
}

// benchUpdates times n appends in Updates of workload.BatchSize beside raw
// bbolt sequential puts of the same bytes into raw, and reports both rates,
// "ratio" (higher is better) and "ns/entry".
func benchUpdates(b *testing.B, db *chain.DB, raw *bbolt.DB, n int) {
	base, err := workload.RawSequentialPuts(raw, "bench", 1, n, workload.BatchSize)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	got, err := workload.UpdateBatches(context.Background(), db, "bench", 1, n, workload.BatchSize)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(got.Total.Duration.Nanoseconds())/float64(n), "ns/entry")
	b.ReportMetric(got.Total.PerSecond(), "entries/s")
	b.ReportMetric(base.Total.PerSecond(), "raw-entries/s")
	b.ReportMetric(got.Total.PerSecond()/base.Total.PerSecond(), "ratio")
}

// BenchmarkAppendDurable is P3: one durable append at a time.
func BenchmarkAppendDurable(b *testing.B) {
	db, raw := openBench(b)
	base, err := workload.RawDurablePuts(raw, "bench", 3, b.N)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	got, err := workload.DurableAppends(context.Background(), db, "bench", 3, b.N)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(got.P50)/float64(time.Microsecond), "p50-µs")
	b.ReportMetric(float64(base.P50)/float64(time.Microsecond), "raw-p50-µs")
	b.ReportMetric(float64(got.P50)/float64(base.P50), "ratio")
}

// BenchmarkAppendConcurrent is P2: 64 goroutines, each appending one entry
// at a time and waiting for its durable result; the baseline is one durable
// bbolt transaction per put.
func BenchmarkAppendConcurrent(b *testing.B) {
	db, raw := openBench(b)
	base, err := workload.RawDurablePuts(raw, "bench", 2, min(max(b.N/64, 10), 1000))
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	got, err := workload.ConcurrentAppends(context.Background(), db, "bench", 2, 64, max(b.N, 64), false, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(got.PerSecond(), "entries/s")
	b.ReportMetric(got.PerSecond()/base.Rate.PerSecond(), "ratio")
}

// replayEntries is how many entries the replay and verify benchmarks
// prepare.
const replayEntries = 100_000

// BenchmarkReplay is P4: retries of existing requests from 2 goroutines;
// the baseline reads the same records in raw read transactions.
func BenchmarkReplay(b *testing.B) { benchmarkReplays(b, 1) }

// BenchmarkReplayBatch is P4's reference row: retried batches of 100
// requests (DB.AppendBatch) from 2 goroutines, beside the same baseline.
func BenchmarkReplayBatch(b *testing.B) { benchmarkReplays(b, 100) }

func benchmarkReplays(b *testing.B, batch int) {
	db, raw := openBench(b)
	ctx := context.Background()
	if _, err := workload.UpdateBatches(ctx, db, "bench", 4, replayEntries, workload.BatchSize); err != nil {
		b.Fatal(err)
	}
	if _, err := workload.RawSequentialPuts(raw, "bench", 4, replayEntries, workload.BatchSize); err != nil {
		b.Fatal(err)
	}
	base, err := workload.RawGets(raw, replayEntries, 2, max(b.N, 1000), 0)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	got, err := workload.Replays(ctx, db, "bench", 4, replayEntries, 2, b.N, batch, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(got.PerSecond(), "replays/s")
	b.ReportMetric(got.PerSecond()/base.PerSecond(), "ratio")
}

// BenchmarkVerify is P5: verify with the page cache warm; the baseline is
// a raw cursor scan hashing every record with BLAKE3 on one core. One
// iteration verifies replayEntries entries.
func BenchmarkVerify(b *testing.B) {
	db, raw := openBench(b)
	ctx := context.Background()
	if _, err := workload.UpdateBatches(ctx, db, "bench", 5, replayEntries, workload.BatchSize); err != nil {
		b.Fatal(err)
	}
	if _, err := workload.RawSequentialPuts(raw, "bench", 5, replayEntries, workload.BatchSize); err != nil {
		b.Fatal(err)
	}
	var base, got workload.Rate
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		r, err := workload.RawScanHash(raw)
		if err != nil {
			b.Fatal(err)
		}
		base.Count, base.Duration = base.Count+r.Count, base.Duration+r.Duration
		b.StartTimer()
		v, err := workload.Verify(ctx, db)
		if err != nil {
			b.Fatal(err)
		}
		got.Count, got.Duration = got.Count+v.Count, got.Duration+v.Duration
	}
	b.StopTimer()
	b.ReportMetric(got.PerSecond(), "entries/s")
	b.ReportMetric(got.PerSecond()/base.PerSecond(), "ratio")
}
