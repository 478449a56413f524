package valuations

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/storage/storagetest"
)

// Benchmarks report ns/op of the valuation operation, the ns/op of a
// baseline measured in the same run on the same ledger (raw chain appends:
// two entries per operation, with payloads of the same size), and their
// ratio as x-raw. Nothing asserts on timings.

// benchBatchSize is how many operations one batched transaction carries.
const benchBatchSize = 128

// rawPayloadSize is about the size of a valuation payload.
const rawPayloadSize = 360

func openBench(b *testing.B) *chain.DB {
	b.Helper()
	f := storagetest.Factories(b)[0] // bolt: the embedded default
	db, err := chain.OpenBackend(f.Open(b), chain.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}

// compare runs baseline and measured for b.N operations each, times the
// measured part, and reports the baseline and the ratio.
func compare(b *testing.B, baseline, measured func(n int)) {
	b.StopTimer()
	start := time.Now()
	baseline(b.N)
	base := time.Since(start)
	b.StartTimer()
	start = time.Now()
	measured(b.N)
	took := time.Since(start)
	b.StopTimer()
	operations := time.Duration(b.N).Seconds() * 1e9 // b.N as a metric value
	b.ReportMetric(base.Seconds()*1e9/operations, "raw-ns/op")
	b.ReportMetric(operations/took.Seconds(), "ops/s")
	b.ReportMetric(took.Seconds()/base.Seconds(), "x-raw")
}

// rawAppends appends two entries per operation, batch operations per
// transaction, to chains of their own.
func rawAppends(b *testing.B, db *chain.DB, prefix string, n, batch int) {
	payload := bytes.Repeat([]byte("x"), rawPayloadSize)
	for done := 0; done < n; done += batch {
		count := min(batch, n-done)
		err := db.Update(context.Background(), func(tx *chain.Tx) error {
			for i := range count {
				key := fmt.Sprintf("%s-%d", prefix, done+i)
				for _, suffix := range []string{"/qty", "/value"} {
					if _, err := tx.Append(chain.Request{Chain: "raw/" + prefix + suffix, IdempotencyKey: key, Type: "raw/v1", Payload: payload}); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// operation number i at loc: receipts and issues alternate, so stock grows
// by 5 per pair and FIFO keeps a few open layers.
func benchOperation(tx *chain.Tx, it Item, loc string, i int) error {
	id := fmt.Sprintf("%s-%d", loc, i)
	if i%2 == 0 {
		cost := decimal.MustNew(100+int64(i%7), 2)
		_, err := ReceiveTx(tx, ReceiveRequest{Tenant: it.Tenant, Item: it.ID, Location: loc, OperationID: id,
			Quantity: decimal.MustNew(10, 0), UnitCost: &cost})
		return err
	}
	_, err := IssueTx(tx, IssueRequest{Tenant: it.Tenant, Item: it.ID, Location: loc, OperationID: id, Quantity: decimal.MustNew(5, 0)})
	return err
}

func BenchmarkOperationsBatched(b *testing.B) {
	for _, m := range []Method{MovingAverage, FIFO} {
		b.Run(m.String(), func(b *testing.B) {
			db := openBench(b)
			it := item(m)
			defineItem(b, db, it)
			compare(b, func(n int) { rawAppends(b, db, "batched", n, benchBatchSize) }, func(n int) {
				for done := 0; done < n; done += benchBatchSize {
					count := min(benchBatchSize, n-done)
					err := db.Update(context.Background(), func(tx *chain.Tx) error {
						for i := range count {
							if err := benchOperation(tx, it, "WH-1", done+i); err != nil {
								return err
							}
						}
						return nil
					})
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// benchCallers is how many goroutines call concurrently.
const benchCallers = 64

// concurrently runs n calls of call spread over benchCallers goroutines.
func concurrently(n int, call func(caller, i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for caller := range benchCallers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				call(caller, i)
			}
		}()
	}
	wg.Wait()
}

func BenchmarkOperationsConcurrent(b *testing.B) {
	for _, m := range []Method{MovingAverage, FIFO} {
		b.Run(m.String(), func(b *testing.B) {
			db := openBench(b)
			it := item(m)
			defineItem(b, db, it)
			ctx := context.Background()
			payload := bytes.Repeat([]byte("x"), rawPayloadSize)
			counts := make([]int, benchCallers) // per caller, so each location alternates receipt and issue
			compare(b, func(n int) {
				concurrently(n, func(caller, i int) {
					key := fmt.Sprintf("c-%d", i)
					err := db.Update(ctx, func(tx *chain.Tx) error {
						for _, suffix := range []string{"/qty", "/value"} {
							if _, err := tx.Append(chain.Request{Chain: fmt.Sprintf("raw/c%d%s", caller, suffix), IdempotencyKey: key, Type: "raw/v1", Payload: payload}); err != nil {
								return err
							}
						}
						return nil
					})
					if err != nil {
						b.Error(err)
					}
				})
			}, func(n int) {
				concurrently(n, func(caller, i int) {
					loc := fmt.Sprintf("WH-%d", caller)
					k := counts[caller]
					counts[caller]++
					err := db.Update(ctx, func(tx *chain.Tx) error { return benchOperation(tx, it, loc, k) })
					if err != nil {
						b.Error(err)
					}
				})
			})
		})
	}
}

// BenchmarkFIFOIssueOpenLayers issues one unit at a time from a location
// with 10,000 open layers; the baseline is the same issue with one open
// layer. Layers are one state key each and an issue reads only the layers
// it consumes, so the ratio stays near 1.
func BenchmarkFIFOIssueOpenLayers(b *testing.B) {
	const layersOpen = 10_000
	db := openBench(b)
	it := item(FIFO)
	defineItem(b, db, it)
	ctx := context.Background()
	fill := func(loc string, layers int) {
		for done := 0; done < layers; done += 500 {
			err := db.Update(ctx, func(tx *chain.Tx) error {
				for i := done; i < min(done+500, layers); i++ {
					cost := decimal.MustNew(100+int64(i%13), 2)
					if _, err := ReceiveTx(tx, ReceiveRequest{Tenant: it.Tenant, Item: it.ID, Location: loc,
						OperationID: fmt.Sprintf("fill-%d", i), Quantity: decimal.MustNew(1_000_000, 0), UnitCost: &cost}); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	fill("one-layer", 1)
	fill("many-layers", layersOpen)
	run := func(loc string) func(n int) {
		return func(n int) {
			for done := 0; done < n; done += benchBatchSize {
				count := min(benchBatchSize, n-done)
				err := db.Update(ctx, func(tx *chain.Tx) error {
					for i := range count {
						if _, err := IssueTx(tx, IssueRequest{Tenant: it.Tenant, Item: it.ID, Location: loc,
							OperationID: fmt.Sprintf("issue-%d-%d", b.N, done+i), Quantity: decimal.MustNew(1, 0)}); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.ResetTimer()
	compare(b, run("one-layer"), run("many-layers"))
	layers, err := Layers(ctx, db, it.Tenant, it.ID, "many-layers", 0)
	if err != nil || len(layers) != layersOpen {
		b.Fatalf("%d layers open, want %d (%v)", len(layers), layersOpen, err)
	}
}

// BenchmarkCheck rebuilds a ledger of 64 locations with 20,000 operations
// (40,000 entries) per iteration; the baseline is the engine's own Verify of
// the same ledger, which also reads every entry once.
func BenchmarkCheck(b *testing.B) {
	const operations = 20_000
	db := openBench(b)
	ma, fifo := item(MovingAverage), item(FIFO)
	fifo.ID = "SKU-2"
	defineItem(b, db, ma)
	defineItem(b, db, fifo)
	for done := 0; done < operations; done += 1000 {
		err := db.Update(context.Background(), func(tx *chain.Tx) error {
			for i := done; i < done+1000; i++ {
				it := ma
				if i%2 == 1 {
					it = fifo
				}
				if err := benchOperation(tx, it, fmt.Sprintf("WH-%d", i%32), i/64); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	b.ResetTimer()
	compare(b, func(n int) {
		for range n {
			if report, err := db.Verify(ctx, chain.VerifyOptions{}); err != nil || !report.OK() {
				b.Fatalf("verify: %v %v", report.Failures, err)
			}
		}
	}, func(n int) {
		for range n {
			if failures, err := Check(ctx, db); err != nil || len(failures) > 0 {
				b.Fatalf("check: %v %v", failures, err)
			}
		}
	})
	b.ReportMetric(2*operations, "entries")
}
