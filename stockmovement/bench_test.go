package stockmovement_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/stockmovement"
)

// Every benchmark measures its baseline in the same run, on a separate
// ledger file of the same kind, and reports the ratio (movement cost over
// baseline cost; 1 means no overhead). Timings are reported, never asserted.

// benchBatchSize is how many movements one db.Update carries in the batched
// benchmark and in ledger building.
const benchBatchSize = 1000

// benchCallers is the number of concurrent callers of the concurrent
// benchmark.
const benchCallers = 64

func openBenchDB(b *testing.B) *chain.DB {
	b.Helper()
	db, err := chain.Open(filepath.Join(b.TempDir(), "ledger.db"), chain.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}

// benchLocations defines n locations L000… for the tenant.
func benchLocations(b *testing.B, db *chain.DB, n int) []string {
	b.Helper()
	locations := make([]string, n)
	for i := range locations {
		locations[i] = fmt.Sprintf("L%03d", i)
		if _, err := stockmovement.DefineLocation(context.Background(), db, "acme", stockmovement.Location{ID: locations[i]}); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := stockmovement.DefineItem(context.Background(), db, "acme", stockmovement.Item{ID: "pcs"}); err != nil {
		b.Fatal(err)
	}
	return locations
}

// rawPayload has the size of a receipt's payload in these benchmarks, so
// the baseline appends the same number of bytes.
func rawPayload(key string) []byte {
	m := stockmovement.Movement{Kind: stockmovement.KindReceipt, Quantity: decimal.MustNew(1, 0),
		Balance: decimal.MustNew(1, 0), Reference: "GRN-" + key}
	return stockmovement.EncodeMovement(m)
}

func benchReceipt(location string, i int) stockmovement.ReceiveRequest {
	key := fmt.Sprintf("%09d", i)
	return stockmovement.ReceiveRequest{Tenant: "acme", Item: "pcs", Location: location,
		Quantity: decimal.MustNew(1, 0), Reference: "GRN-" + key, IdempotencyKey: key}
}

// report adds throughput of both runs and their ratio. The count is turned
// into a Duration so that Seconds gives it as a fraction without a cast.
func report(b *testing.B, n int, measured, baseline time.Duration, unit string) {
	count := time.Duration(n) * time.Second
	b.ReportMetric(count.Seconds()/measured.Seconds(), unit)
	b.ReportMetric(count.Seconds()/baseline.Seconds(), "baseline-"+unit)
	b.ReportMetric(measured.Seconds()/baseline.Seconds(), "ratio")
}

// BenchmarkMovementsBatched: receipts, benchBatchSize per db.Update, over 16
// locations; baseline: raw tx.Append of same-size payloads with the same
// keys to the same chain names, in the same batches.
func BenchmarkMovementsBatched(b *testing.B) {
	ctx := context.Background()
	db, base := openBenchDB(b), openBenchDB(b)
	locations := benchLocations(b, db, 16)
	run := func(fn func(tx *chain.Tx, i int) error) time.Duration {
		start := time.Now()
		for first := 0; first < b.N; first += benchBatchSize {
			err := db.Update(ctx, func(tx *chain.Tx) error {
				for i := first; i < min(first+benchBatchSize, b.N); i++ {
					if err := fn(tx, i); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	b.ResetTimer()
	measured := run(func(tx *chain.Tx, i int) error {
		_, err := stockmovement.ReceiveTx(tx, benchReceipt(locations[i%len(locations)], i))
		return err
	})
	b.StopTimer()
	db = base
	baseline := run(func(tx *chain.Tx, i int) error {
		key := fmt.Sprintf("%09d", i)
		_, err := tx.Append(chain.Request{Chain: "acme/stock/pcs/" + locations[i%len(locations)], IdempotencyKey: key,
			Type: stockmovement.MovementType, Payload: rawPayload(key)})
		return err
	})
	report(b, b.N, measured, baseline, "movements/s")
}

// BenchmarkMovementsConcurrent: 64 callers each recording receipts with
// Receive (one transaction per call; the engine groups them); baseline: 64
// callers of db.Append with same-size payloads.
func BenchmarkMovementsConcurrent(b *testing.B) {
	ctx := context.Background()
	db, base := openBenchDB(b), openBenchDB(b)
	locations := benchLocations(b, db, benchCallers)
	run := func(fn func(caller, i int) error) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		for caller := range benchCallers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := caller; i < b.N; i += benchCallers {
					if err := fn(caller, i); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		return time.Since(start)
	}
	b.ResetTimer()
	measured := run(func(caller, i int) error {
		_, err := stockmovement.Receive(ctx, db, benchReceipt(locations[caller], i))
		return err
	})
	b.StopTimer()
	baseline := run(func(caller, i int) error {
		key := fmt.Sprintf("%09d", i)
		_, err := base.Append(ctx, chain.Request{Chain: "acme/stock/pcs/" + locations[caller], IdempotencyKey: key,
			Type: stockmovement.MovementType, Payload: rawPayload(key)})
		return err
	})
	report(b, b.N, measured, baseline, "movements/s")
}

// benchLedgers caches the large ledgers across the calls the testing package
// makes with growing b.N; they are removed when the test binary exits.
var benchLedgers = struct {
	sync.Mutex
	dir string
	dbs map[int]*chain.DB
}{dbs: map[int]*chain.DB{}}

// ledgerWithEntries returns a ledger whose chain acme/stock/pcs/L000 holds
// n receipts, built in batches of 10,000 per transaction.
func ledgerWithEntries(b *testing.B, n int) *chain.DB {
	benchLedgers.Lock()
	defer benchLedgers.Unlock()
	if db, ok := benchLedgers.dbs[n]; ok {
		return db
	}
	if benchLedgers.dir == "" {
		dir, err := os.MkdirTemp("", "stockmovement-bench-")
		if err != nil {
			b.Fatal(err)
		}
		benchLedgers.dir = dir
	}
	start := time.Unix(1_700_000_000, 0)
	var tick time.Duration
	db, err := chain.Open(filepath.Join(benchLedgers.dir, fmt.Sprintf("ledger-%d.db", n)),
		chain.Options{Clock: func() time.Time { tick += time.Millisecond; return start.Add(tick) }})
	if err != nil {
		b.Fatal(err)
	}
	benchLocations(b, db, 1)
	const buildBatchSize = 10_000
	for first := 0; first < n; first += buildBatchSize {
		err := db.Update(context.Background(), func(tx *chain.Tx) error {
			for i := first; i < min(first+buildBatchSize, n); i++ {
				if _, err := stockmovement.ReceiveTx(tx, benchReceipt("L000", i)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	benchLedgers.dbs[n] = db
	return db
}

func closeBenchLedgers() {
	for _, db := range benchLedgers.dbs {
		db.Close()
	}
	if benchLedgers.dir != "" {
		os.RemoveAll(benchLedgers.dir)
	}
}

// BenchmarkBalanceRead: the current balance (one state read), the balance
// at a seq (one entry read) and at a time (binary search) on a chain of
// 1,000 and of 1,000,000 entries; baseline: the chain's head read through
// db.Head, the engine's cheapest read.
func BenchmarkBalanceRead(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{1_000, 1_000_000} {
		reads := map[string]func(db *chain.DB, i int) error{
			"current": func(db *chain.DB, i int) error {
				_, err := stockmovement.GetBalance(ctx, db, "acme", "pcs", "L000")
				return err
			},
			"at-seq": func(db *chain.DB, i int) error {
				_, err := stockmovement.BalanceAtSeq(ctx, db, "acme", "pcs", "L000", uint64(i%n)+1)
				return err
			},
			"at-time": func(db *chain.DB, i int) error {
				at := time.Unix(1_700_000_000, 0).Add(time.Duration(i%n+8) * time.Millisecond)
				_, err := stockmovement.BalanceAtTime(ctx, db, "acme", "pcs", "L000", at)
				return err
			},
		}
		for _, kind := range []string{"current", "at-seq", "at-time"} {
			b.Run(fmt.Sprintf("entries=%d/%s", n, kind), func(b *testing.B) {
				db := ledgerWithEntries(b, n)
				read := reads[kind]
				b.ResetTimer()
				start := time.Now()
				for i := range b.N {
					if err := read(db, i); err != nil {
						b.Fatal(err)
					}
				}
				measured := time.Since(start)
				b.StopTimer()
				start = time.Now()
				for range b.N {
					if _, err := db.Head(ctx, "acme/stock/pcs/L000"); err != nil {
						b.Fatal(err)
					}
				}
				report(b, b.N, measured, time.Since(start), "reads/s")
			})
		}
	}
}

// checkRunsMax bounds the runs BenchmarkCheck accepts: -benchtime 20000x
// meant for the other benchmarks would otherwise check 2·10^10 entries.
const checkRunsMax = 10

// BenchmarkCheck: Check over a ledger of 1,000,000 movements on one chain,
// reported per entry; baseline: db.Verify of the same ledger, which reads
// and hashes every entry once.
func BenchmarkCheck(b *testing.B) {
	ctx := context.Background()
	const entries = 1_000_000
	if b.N > checkRunsMax {
		b.Skipf("one Check reads %d entries; run it with -benchtime 1x (asked for %d runs)", entries, b.N)
	}
	db := ledgerWithEntries(b, entries)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		failures, err := stockmovement.Check(ctx, db)
		if err != nil || len(failures) > 0 {
			b.Fatal(failures, err)
		}
	}
	measured := time.Since(start)
	b.StopTimer()
	start = time.Now()
	for range b.N {
		report, err := db.Verify(ctx, chain.VerifyOptions{})
		if err != nil || !report.OK() {
			b.Fatal(report, err)
		}
	}
	report(b, b.N*entries, measured, time.Since(start), "entries/s")
}
