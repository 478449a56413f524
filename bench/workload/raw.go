package workload

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zeebo/blake3"
	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage/bolt"
)

// The raw baselines write and read a bbolt file directly, opened with the
// options the engine's backend uses, in a layout as plain as possible:
// one bucket of (u64be chain, u64be seq) -> record bytes.
var (
	rawEntries = []byte("entries")
	rawKeys    = []byte("keys")
	rawHeads   = []byte("heads")
)

// RawOpen opens or creates a raw baseline file.
func RawOpen(path string) (*bbolt.DB, error) {
	db, err := bbolt.Open(path, bolt.FileMode, bolt.BboltOptions(bolt.Options{}))
	if err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, name := range [][]byte{rawEntries, rawKeys, rawHeads} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// RawOpenReadOnly opens a raw baseline file for reading only. A scan that
// must start cold opens the file this way: a writable open of a file
// without a stored freelist (the engine's options) reads every page's header
// to rebuild it, which would warm the page cache before the scan begins.
func RawOpenReadOnly(path string) (*bbolt.DB, error) {
	return bbolt.Open(path, bolt.FileMode, bolt.BboltOptions(bolt.Options{ReadOnly: true}))
}

// ReadFile reads the file from start to end in 1 MiB reads and returns the
// time taken: for a file just evicted from the page cache, the disk's own
// ceiling for any scan of it.
func ReadFile(path string) (time.Duration, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	start := time.Now()
	for {
		_, err := f.Read(buf)
		if errors.Is(err, io.EOF) {
			return time.Since(start), nil
		}
		if err != nil {
			return 0, err
		}
	}
}

func rawKey(seq uint64) []byte {
	var k [16]byte
	binary.BigEndian.PutUint64(k[:8], 1)
	binary.BigEndian.PutUint64(k[8:], seq)
	return k[:]
}

// RawSequentialPuts puts the records of entries 0..total-1 at increasing
// keys, batch per transaction: the floor under P1.
func RawSequentialPuts(db *bbolt.DB, chainID string, stream uint64, total, batch int) (Stream, error) {
	return rawBatches(db, chainID, stream, total, batch, false)
}

// RawIndexedPuts writes what a naive ledger layout writes per entry: the
// record at an increasing key, its random idempotency key in an index, and
// the chain head, batch per transaction.
func RawIndexedPuts(db *bbolt.DB, chainID string, stream uint64, total, batch int) (Stream, error) {
	return rawBatches(db, chainID, stream, total, batch, true)
}

func rawBatches(db *bbolt.DB, chainID string, stream uint64, total, batch int, indexed bool) (Stream, error) {
	clock := newStreamClock(int64(total))
	records := make([][]byte, 0, batch)
	keys := make([]string, 0, batch)
	for next := 0; next < total; {
		first := next
		records, keys = records[:0], keys[:0]
		for ; len(records) < batch && next < total; next++ {
			records = append(records, Record(chainID, stream, uint64(next)))
			keys = append(keys, Key(stream, uint64(next)))
		}
		err := db.Update(func(tx *bbolt.Tx) error {
			entries := tx.Bucket(rawEntries)
			entries.FillPercent = 1.0
			for j, rec := range records {
				seq := uint64(first + j + 1)
				if err := entries.Put(rawKey(seq), rec); err != nil {
					return err
				}
				if !indexed {
					continue
				}
				k := append(binary.BigEndian.AppendUint64(nil, 1), keys[j]...)
				if tx.Bucket(rawKeys).Get(k) != nil {
					return fmt.Errorf("key %q exists", keys[j])
				}
				if err := tx.Bucket(rawKeys).Put(k, binary.BigEndian.AppendUint64(nil, seq)); err != nil {
					return err
				}
				if err := tx.Bucket(rawHeads).Put([]byte(chainID), rec[:56]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return Stream{}, err
		}
		clock.advance(int64(len(records)))
	}
	return clock.result(), nil
}

// RawDurablePuts puts n records, one durable bbolt transaction each: the
// baseline of P2 and P3.
func RawDurablePuts(db *bbolt.DB, chainID string, stream uint64, n int) (Latencies, error) {
	ds := make([]time.Duration, 0, n)
	start := time.Now()
	for i := range n {
		rec := Record(chainID, stream, uint64(i))
		t := time.Now()
		err := db.Update(func(tx *bbolt.Tx) error {
			b := tx.Bucket(rawEntries)
			b.FillPercent = 1.0
			return b.Put(rawKey(uint64(i+1)), rec)
		})
		if err != nil {
			return Latencies{}, err
		}
		ds = append(ds, time.Since(t))
	}
	return summarize(ds, time.Since(start)), nil
}

// RawGroupedPuts puts total records in durable transactions of group puts
// each, one record at the tail of each of chains chains in turn (a single
// chain when chains is 1). It is what the best possible group commit of
// P2's appenders costs in raw bbolt with the same bytes: with a chain each,
// a group dirties one tail leaf per chain, so this is the ceiling of any
// layout that keeps a chain's entries together and commits each group with
// bbolt's own fsyncs.
func RawGroupedPuts(db *bbolt.DB, chainID string, stream uint64, chains, group, total int) (Rate, error) {
	if chains < 1 || group < 1 {
		panic("workload: RawGroupedPuts needs at least one chain and one put per group")
	}
	next := make([]uint64, chains)
	start := time.Now()
	written := 0
	for written < total {
		n := min(group, total-written)
		err := db.Update(func(tx *bbolt.Tx) error {
			b := tx.Bucket(rawEntries)
			b.FillPercent = 1.0
			for i := range n {
				c := (written + i) % chains
				next[c]++
				var k [16]byte
				binary.BigEndian.PutUint64(k[:8], uint64(1000+c))
				binary.BigEndian.PutUint64(k[8:], next[c])
				if err := b.Put(k[:], Record(chainID, stream, uint64(written+i))); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return Rate{}, err
		}
		written += n
	}
	return Rate{Count: int64(written), Duration: time.Since(start)}, nil
}

// RawGets reads total records at scattered seqs among existing (or as many
// as the budget allows), each in its own read transaction and copied out,
// from goroutines readers: the baseline of P4.
func RawGets(db *bbolt.DB, existing, goroutines, total int, budget time.Duration) (Rate, error) {
	var next, done atomic.Int64
	var wg sync.WaitGroup
	var missing atomic.Int64
	stop, release := budgetStop(budget)
	defer release()
	start := time.Now()
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			var read int64
			defer func() { done.Add(read) }()
			for from, to := claim(&next, total); from < to && !stop.Load(); from, to = claim(&next, total) {
				for n := from; n < to && !stop.Load(); n++ {
					read++
					seq := splitmix64(uint64(n))%uint64(existing) + 1
					_ = db.View(func(tx *bbolt.Tx) error {
						v := tx.Bucket(rawEntries).Get(rawKey(seq))
						if v == nil {
							missing.Add(1)
						}
						buf = append(buf[:0], v...)
						return nil
					})
				}
			}
		}()
	}
	wg.Wait()
	if m := missing.Load(); m > 0 {
		return Rate{}, fmt.Errorf("%d records missing", m)
	}
	return Rate{done.Load(), time.Since(start)}, nil
}

// RawScanHash scans every record in one read transaction and hashes it
// with BLAKE3 on one core: the baseline of P5 and P6.
func RawScanHash(db *bbolt.DB) (Rate, error) {
	start := time.Now()
	var n int64
	var sink byte
	err := db.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(rawEntries).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			sum := blake3.Sum256(v)
			sink ^= sum[0]
			n++
		}
		return nil
	})
	_ = sink
	return Rate{n, time.Since(start)}, err
}
