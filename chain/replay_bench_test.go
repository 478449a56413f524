package chain_test

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/bench/workload"
	"github.com/ledgerworks/ledger/chain"
)

// replayOneEntries is how many entries BenchmarkReplayOne's files hold.
const replayOneEntries = 200_000

// BenchmarkReplayOne measures one replay of an existing key at a time (on
// one goroutine, so that ns/op and allocs/op are those of one replay)
// beside the raw baseline of P4 in the same run: a bbolt read transaction,
// a Get and a copy of the same record bytes. The ledger is closed and
// reopened first, so every key is in the file's sorted runs and every
// entry in its B-tree, as for most of P4's keys. The requests are built
// before the timer starts; "x-raw" is engine ns/op ÷ raw ns/op.
func BenchmarkReplayOne(b *testing.B) {
	ctx := context.Background()
	f := openReplayFiles(b)
	db, raw, requests, rawKeys := f.db, f.raw, f.requests, f.rawKeys
	var rawPerOp time.Duration
	b.Run("raw", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		i := 0
		for b.Loop() {
			err := raw.View(func(tx *bbolt.Tx) error {
				buf = append(buf[:0], tx.Bucket([]byte("entries")).Get(rawKeys[i%replayScattered])...)
				return nil
			})
			if err != nil || len(buf) == 0 {
				b.Fatalf("raw get %d: %v", i, err)
			}
			i++
		}
		rawPerOp = b.Elapsed() / time.Duration(b.N)
	})
	b.Run("engine", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			res, err := db.Append(ctx, requests[i%replayScattered])
			if err != nil || !res.Replayed {
				b.Fatalf("replay %d: %+v %v", i, res, err)
			}
			i++
		}
		if rawPerOp > 0 {
			b.ReportMetric(float64(b.Elapsed()/time.Duration(b.N))/float64(rawPerOp), "x-raw")
		}
	})
}

// replayScattered is how many distinct keys the replay benchmarks cycle
// through, spread over the whole file.
const replayScattered = 4096

// replayFiles are the replay benchmarks' ledger of replayOneEntries
// entries, closed and reopened (every key in the file's runs, every entry
// in its segments), the raw bbolt file of the same records, and the
// requests of replayScattered existing keys with their raw keys.
type replayFiles struct {
	db       *chain.DB
	raw      *bbolt.DB
	requests []chain.Request
	rawKeys  [][]byte
}

func openReplayFiles(b *testing.B) replayFiles {
	b.Helper()
	return openReplayFilesOf(b, replayOneEntries)
}

// openReplayFilesOf is openReplayFiles with files of the given number of
// entries.
func openReplayFilesOf(b *testing.B, entries int) replayFiles {
	b.Helper()
	ctx := context.Background()
	dir := b.TempDir()
	path := filepath.Join(dir, "ledger.db")
	db, err := chain.Open(path, chain.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := workload.UpdateBatches(ctx, db, "bench", 6, entries, workload.BatchSize); err != nil {
		b.Fatal(err)
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	if db, err = chain.Open(path, chain.Options{}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	raw, err := workload.RawOpen(filepath.Join(dir, "raw.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { raw.Close() })
	if _, err := workload.RawSequentialPuts(raw, "bench", 6, entries, workload.BatchSize); err != nil {
		b.Fatal(err)
	}
	f := replayFiles{db: db, raw: raw, requests: make([]chain.Request, replayScattered), rawKeys: make([][]byte, replayScattered)}
	for i := range f.requests {
		n := (uint64(i) * 0x9e3779b97f4a7c15 >> 11) % uint64(entries)
		f.requests[i] = workload.Request("bench", 6, n)
		f.rawKeys[i] = binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, 1), n+1)
	}
	return f
}
