//go:build unix

package chain_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"syscall"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/bench/workload"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/storagetest"
)

// processCPU is the CPU time the process has used, user and system.
func processCPU(b *testing.B) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		b.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// replayReadRound is how many replays, and then raw reads, one round of
// BenchmarkReplayReadCPU times before it switches to the other.
const replayReadRound = 5_000

// BenchmarkReplayReadCPU measures what BenchmarkReplayOne measures (one
// replay of an existing key at a time, files of replayOneEntries entries
// reopened first, beside a raw bbolt read transaction + Get + copy of the
// same bytes), but alternates the two in rounds of replayReadRound and
// counts the process's CPU time as well as the wall time of each: on a
// machine that other work shares, CPU per operation moves far less than
// wall time, and the rounds meet the same load. It reports the engine's
// CPU and wall time per replay ("cpu-ns/replay", "ns/replay"), the raw
// read's ("cpu-ns/raw", "ns/raw"), and their ratios ("x-raw-cpu",
// "x-raw"). b.N is the number of replays, and as many raw reads.
func BenchmarkReplayReadCPU(b *testing.B) {
	ctx := context.Background()
	f := openReplayFiles(b)
	db, raw, requests, rawKeys := f.db, f.raw, f.requests, f.rawKeys
	var buf []byte
	var engineCPU, engineWall, rawCPU, rawWall time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(replayReadRound, b.N-done)
		cpu, start := processCPU(b), time.Now()
		for i := done; i < done+n; i++ {
			res, err := db.Append(ctx, requests[i%replayScattered])
			if err != nil || !res.Replayed {
				b.Fatalf("replay %d: %+v %v", i, res, err)
			}
		}
		engineWall += time.Since(start)
		engineCPU += processCPU(b) - cpu
		cpu, start = processCPU(b), time.Now()
		for i := done; i < done+n; i++ {
			err := raw.View(func(tx *bbolt.Tx) error {
				buf = append(buf[:0], tx.Bucket([]byte("entries")).Get(rawKeys[i%replayScattered])...)
				return nil
			})
			if err != nil || len(buf) == 0 {
				b.Fatalf("raw get %d: %v", i, err)
			}
		}
		rawWall += time.Since(start)
		rawCPU += processCPU(b) - cpu
		done += n
	}
	b.StopTimer()
	reportReplayCPU(b, engineCPU, rawCPU, engineWall, rawWall)
}

// hiddenReader hides a backend's KeyReader (and any other optional
// interface), so that a DB over it answers retries as before KeyReader:
// a read transaction, LookupKey, Entry.
type hiddenReader struct{ storage.Backend }

// BenchmarkReplayReadRoundTrips measures a replay on each backend other
// than bbolt (PostgreSQL when configured): through the backend's
// KeyReader, and beside it, in alternating rounds of the same run,
// through a read transaction (the backend behind hiddenReader). It
// reports the wall time of each per replay ("ns/replay",
// "ns/replay-tx") and their ratio ("x-tx").
func BenchmarkReplayReadRoundTrips(b *testing.B) {
	const entries, round = 500, 100
	ctx := context.Background()
	for _, f := range storagetest.Factories(b) {
		if f.Name == "bolt" {
			continue
		}
		b.Run(f.Name, func(b *testing.B) {
			direct, err := chain.OpenBackend(f.Open(b), chain.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer direct.Close()
			viaTx, err := chain.OpenBackend(hiddenReader{f.Open(b)}, chain.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer viaTx.Close()
			for _, db := range []*chain.DB{direct, viaTx} {
				if _, err := workload.UpdateBatches(ctx, db, "bench", 6, entries, 100); err != nil {
					b.Fatal(err)
				}
			}
			var directWall, txWall time.Duration
			replay := func(db *chain.DB, from, n int) time.Duration {
				start := time.Now()
				for i := from; i < from+n; i++ {
					res, err := db.Append(ctx, workload.Request("bench", 6, uint64(i*7919%entries)))
					if err != nil || !res.Replayed {
						b.Fatalf("replay %d: %+v %v", i, res, err)
					}
				}
				return time.Since(start)
			}
			b.ResetTimer()
			for done := 0; done < b.N; {
				n := min(round, b.N-done)
				directWall += replay(direct, done, n)
				txWall += replay(viaTx, done, n)
				done += n
			}
			b.StopTimer()
			b.ReportMetric(float64(directWall.Nanoseconds())/float64(b.N), "ns/replay")
			b.ReportMetric(float64(txWall.Nanoseconds())/float64(b.N), "ns/replay-tx")
			if txWall > 0 {
				b.ReportMetric(float64(directWall)/float64(txWall), "x-tx")
			}
		})
	}
}

const (
	// replayParallelEntries is how many entries BenchmarkReplayParallelCPU's
	// files hold: as many as P4's.
	replayParallelEntries = 1_000_000
	// replayParallelCallers is how many goroutines replay at once, as in P4.
	replayParallelCallers = 2
	// replayParallelRound is how many replays, and then raw reads, one
	// round of BenchmarkReplayParallelCPU makes before it switches.
	replayParallelRound = 50_000
)

// BenchmarkReplayParallelCPU is P4 in one process with its baseline
// interleaved: files of replayParallelEntries entries (the ledger closed
// and reopened first), replayParallelCallers goroutines replaying existing
// keys scattered over the whole file (no key twice within 1,000,000
// replays), alternating in rounds of replayParallelRound with as many raw
// bbolt read transactions + Get + copy of the same records from as many
// goroutines. The goroutines share no counter, so no line is written by
// two of them except what the engine or bbolt writes. It reports process
// CPU and wall time per replay and per raw read, and their ratios
// ("x-raw-cpu", "x-raw"), as BenchmarkReplayReadCPU does. Run it with
// -benchtime 1000000x: the files take about 15 s to write, at each b.N.
func BenchmarkReplayParallelCPU(b *testing.B) {
	ctx := context.Background()
	f := openReplayFilesOf(b, replayParallelEntries)
	db, raw := f.db, f.raw
	key := func(i int) uint64 { // a permutation of the entries: the factor is prime to 10^6
		return uint64(i) % replayParallelEntries * 2654435769 % replayParallelEntries
	}
	// parallel runs fn(i) for i in from..to-1 on replayParallelCallers
	// goroutines, each taking every replayParallelCallers-th i.
	parallel := func(from, to int, fn func(i int, buf *[]byte) error) {
		errs := make(chan error, replayParallelCallers)
		for g := range replayParallelCallers {
			go func() {
				var buf []byte
				for i := from + g; i < to; i += replayParallelCallers {
					if err := fn(i, &buf); err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		for range replayParallelCallers {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
	}
	replay := func(i int, _ *[]byte) error {
		n := key(i)
		res, err := db.Append(ctx, workload.Request("bench", 6, n))
		if err == nil && (!res.Replayed || res.Entry.Seq != n+1) {
			err = fmt.Errorf("replay of entry %d: %+v", n, res)
		}
		return err
	}
	rawGet := func(i int, buf *[]byte) error {
		n := key(i)
		return raw.View(func(tx *bbolt.Tx) error {
			*buf = append((*buf)[:0], tx.Bucket([]byte("entries")).Get(binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, 1), n+1))...)
			if len(*buf) == 0 {
				return fmt.Errorf("raw get of entry %d: missing", n)
			}
			return nil
		})
	}
	var engineCPU, engineWall, rawCPU, rawWall time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(replayParallelRound, b.N-done)
		cpu, start := processCPU(b), time.Now()
		parallel(done, done+n, replay)
		engineWall += time.Since(start)
		engineCPU += processCPU(b) - cpu
		cpu, start = processCPU(b), time.Now()
		parallel(done, done+n, rawGet)
		rawWall += time.Since(start)
		rawCPU += processCPU(b) - cpu
		done += n
	}
	b.StopTimer()
	reportReplayCPU(b, engineCPU, rawCPU, engineWall, rawWall)
}

// reportReplayCPU reports the replays' and the raw reads' CPU and wall
// time per operation, and their ratios.
func reportReplayCPU(b *testing.B, engineCPU, rawCPU, engineWall, rawWall time.Duration) {
	perOp := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) }
	b.ReportMetric(perOp(engineCPU), "cpu-ns/replay")
	b.ReportMetric(perOp(rawCPU), "cpu-ns/raw")
	b.ReportMetric(perOp(engineWall), "ns/replay")
	b.ReportMetric(perOp(rawWall), "ns/raw")
	if rawCPU > 0 && rawWall > 0 {
		b.ReportMetric(float64(engineCPU)/float64(rawCPU), "x-raw-cpu")
		b.ReportMetric(float64(engineWall)/float64(rawWall), "x-raw")
	}
}
