package chain_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/bench/workload"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// BenchmarkCommitterUpdate measures the committer's path alone: P1's
// Updates of 1,000 appends with fresh random keys, into a ledger with the
// log whose memory table holds every entry of the run, so that no
// checkpoint competes for the cores, beside raw bbolt sequential puts of
// the same bytes, 1,000 per transaction. Both write to a tmpfs folder when
// /dev/shm is one, where an fdatasync costs next to nothing: what is left
// is CPU, the committer's against bbolt's own. Report "ratio" (higher is
// better) and "ns/entry".
func BenchmarkCommitterUpdate(b *testing.B) {
	n := max(b.N, 10*workload.BatchSize)
	db, raw := openCommitterBench(b, n)
	benchUpdates(b, db, raw, n)
}

// BenchmarkAppendBatch is BenchmarkCommitterUpdate's Updates through
// Tx.AppendBatch beside the same Updates through one Tx.Append per entry,
// each into a ledger of its own, taking turns every 10 Updates so that
// both see the same load. Report "ratio": the one-at-a-time ns per entry
// over AppendBatch's (higher is better).
func BenchmarkAppendBatch(b *testing.B) {
	const turn = 10 * workload.BatchSize
	n := max(b.N, turn) / turn * turn
	one, _ := openCommitterBench(b, n)
	batched, _ := openCommitterBench(b, n)
	ctx := context.Background()
	var base, got time.Duration
	b.ResetTimer()
	for stream := uint64(1); stream <= uint64(n/turn); stream++ {
		r, err := workload.UpdateAppends(ctx, one, "bench", stream, turn, workload.BatchSize)
		if err != nil {
			b.Fatal(err)
		}
		base += r.Total.Duration
		if r, err = workload.UpdateBatches(ctx, batched, "bench", stream, turn, workload.BatchSize); err != nil {
			b.Fatal(err)
		}
		got += r.Total.Duration
	}
	b.StopTimer()
	b.ReportMetric(float64(got.Nanoseconds())/float64(n), "ns/entry")
	b.ReportMetric(float64(base.Nanoseconds())/float64(n), "one-at-a-time-ns/entry")
	b.ReportMetric(float64(base)/float64(got), "ratio")
}

// BenchmarkCommitterConcurrent is BenchmarkCommitterUpdate for P2's
// shape: 64 goroutines, each appending one entry at a time to a chain of
// its own and waiting for its result, beside raw bbolt transactions of 64
// puts, one at each of 64 chains' tails (what the best group commit costs
// in raw bbolt). Without a disk to wait for, the committer, which runs
// every group's requests in turn, is what the figure measures.
func BenchmarkCommitterConcurrent(b *testing.B) {
	const appenders = 64
	n := max(b.N, 10_000)
	db, raw := openCommitterBench(b, n)
	base, err := workload.RawGroupedPuts(raw, "bench", 2, appenders, appenders, n)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	got, err := workload.ConcurrentAppends(context.Background(), db, "bench", 2, appenders, n, false, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(got.Duration.Nanoseconds())/float64(n), "ns/append")
	b.ReportMetric(got.PerSecond(), "appends/s")
	b.ReportMetric(base.PerSecond(), "raw-grouped-puts/s")
	b.ReportMetric(got.PerSecond()/base.PerSecond(), "ratio")
}

// openCommitterBench opens a ledger with the log whose memory table holds
// n entries without a checkpoint, and a raw bbolt file, both in a tmpfs
// folder when /dev/shm is one.
func openCommitterBench(b *testing.B, n int) (*chain.DB, *bbolt.DB) {
	b.Helper()
	dir := benchDir(b)
	backend, err := bolt.Open(filepath.Join(dir, "ledger.db"), bolt.Options{
		Log:              bolt.LogOn,
		MemtableBytesMax: int64(n)*1024 + 64<<20, // about 700 bytes an entry: no checkpoint until Close
	})
	if err != nil {
		b.Fatal(err)
	}
	db, err := chain.OpenBackend(backend, chain.Options{})
	if err != nil {
		b.Fatal(err)
	}
	raw, err := workload.RawOpen(filepath.Join(dir, "raw.db"))
	if err != nil {
		db.Close()
		b.Fatal(err)
	}
	b.Cleanup(func() {
		db.Close()
		raw.Close()
	})
	return db, raw
}

// benchDir returns a folder for a benchmark's files, removed at cleanup: a
// tmpfs one when /dev/shm is one, else the test's temporary folder.
func benchDir(b *testing.B) string {
	if info, err := os.Stat("/dev/shm"); err == nil && info.IsDir() {
		if shm, err := os.MkdirTemp("/dev/shm", "ledger-bench-"); err == nil {
			b.Cleanup(func() { os.RemoveAll(shm) })
			return shm
		}
	}
	return b.TempDir()
}
