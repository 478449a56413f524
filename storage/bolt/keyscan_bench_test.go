package bolt_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// scanKeysBenchKeys is how many keys the benchmark's chain holds.
const scanKeysBenchKeys = 100_000

// BenchmarkScanKeys reads a chain's whole key index through ScanKeys; the
// baseline, in the same run, walks every record of the same file's key
// runs and recent keys with raw bbolt cursors (no chain filter, no
// KeyRef). The metric "ratio" is engine records/s ÷ baseline records/s.
func BenchmarkScanKeys(b *testing.B) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "ledger.db")
	writeScanKeysLedger(b, path)
	backend, err := bolt.Open(path, bolt.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer backend.Close()
	raw, err := bbolt.Open(path, bolt.FileMode, &bbolt.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	var engine, base time.Duration
	var engineCount, baseCount int
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		n, seqs, err := rawKeyRecords(raw)
		if err != nil {
			b.Fatal(err)
		}
		base += time.Since(start)
		baseCount += n

		start = time.Now()
		tx, err := backend.Begin(ctx, false)
		if err != nil {
			b.Fatal(err)
		}
		var got, gotSeqs uint64
		for ref, err := range tx.ScanKeys(ctx, "c") {
			if err != nil {
				b.Fatal(err)
			}
			got++
			gotSeqs += ref.Seq
		}
		tx.Rollback()
		engine += time.Since(start)
		engineCount += int(got)
		if got != uint64(n) || gotSeqs != seqs {
			b.Fatalf("ScanKeys: %d records (seq sum %d), the file holds %d (seq sum %d)", got, gotSeqs, n, seqs)
		}
	}
	b.StopTimer()
	engineRate := float64(engineCount) / engine.Seconds()
	baseRate := float64(baseCount) / base.Seconds()
	b.ReportMetric(engineRate, "records/s")
	b.ReportMetric(engineRate/baseRate, "ratio")
}

// writeScanKeysLedger writes one chain of scanKeysBenchKeys keyed entries
// in transactions of 1,000 (runs, merged as levels fill) and a few small
// ones (recent keys).
func writeScanKeysLedger(b *testing.B, path string) {
	b.Helper()
	ctx := context.Background()
	backend, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer backend.Close()
	seq := uint64(0)
	for seq < scanKeysBenchKeys {
		n := min(1000, scanKeysBenchKeys-seq)
		if seq >= scanKeysBenchKeys-20 {
			n = 1
		} else if n > scanKeysBenchKeys-seq-20 {
			n = scanKeysBenchKeys - seq - 20
		}
		tx, err := backend.Begin(ctx, true)
		if err != nil {
			b.Fatal(err)
		}
		for range n {
			seq++
			h := storage.Head{Seq: seq}
			rec := storage.Record{Seq: seq, IdempotencyKey: fmt.Sprintf("key-%d", seq), Data: []byte("x")}
			if err := tx.Append(ctx, "c", rec, h); err != nil {
				b.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
}

// rawKeyRecords walks every index record of the file: the records of every
// run's chunks and the recent keys. It returns their number and the sum of
// their seqs.
func rawKeyRecords(db *bbolt.DB) (int, uint64, error) {
	var n int
	var seqs uint64
	err := db.View(func(tx *bbolt.Tx) error {
		runs := tx.Bucket(bolt.BucketKeyRuns)
		err := runs.ForEachBucket(func(name []byte) error {
			cur := runs.Bucket(name).Cursor()
			for k, v := cur.First(); k != nil; k, v = cur.Next() {
				if len(k) != 8+bolt.KeyDigestSize {
					continue
				}
				for o := 0; o+32 <= len(v); o += 32 {
					seqs += binary.BigEndian.Uint64(v[o+24:])
					n++
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		return tx.Bucket(bolt.BucketKeys).ForEach(func(k, v []byte) error {
			seqs += binary.BigEndian.Uint64(v)
			n++
			return nil
		})
	})
	return n, seqs, err
}
