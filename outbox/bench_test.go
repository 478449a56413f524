package outbox_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/financial"
	"github.com/ledgerworks/ledger/internal/cputime"
	"github.com/ledgerworks/ledger/outbox"
	"github.com/ledgerworks/ledger/stockmovement"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
	"github.com/ledgerworks/ledger/valuations"
)

// Benchmarks of the outbox, each beside a baseline measured in the same
// run; the figures that count are the ratios. Reproduce them with
//
//	source .ci/postgres.sh
//	go test -run '^$' -bench EnqueueInPurchaseReceipt -benchtime 20000x ./outbox/
//	go test -run '^$' -bench 'Deliver|PickupLatency' -benchtime 1x ./outbox/
//
// (the delivery benchmark's message count is OUTBOX_BENCH_MESSAGES,
// 100,000 by default; OUTBOX_BENCH_CPUPROFILE=FILE writes a CPU profile
// of the delivery alone, the enqueues before it left out).

const benchCallers = 64

// benchBackends runs fn on a fresh embedded ledger and, when PostgreSQL
// is available, on a fresh PostgreSQL schema.
func benchBackends(b *testing.B, fn func(b *testing.B, open func() *chain.DB)) {
	b.Run("bolt", func(b *testing.B) {
		fn(b, func() *chain.DB {
			db := openBolt(b, tempLedger(b), nil)
			b.Cleanup(func() { db.Close() })
			return db
		})
	})
	b.Run("postgres", func(b *testing.B) {
		if !pgtest.Available(b) {
			b.Skip("no PostgreSQL")
		}
		fn(b, func() *chain.DB {
			db, err := chain.OpenBackend(pgtest.Open(b), chain.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			return db
		})
	})
}

// purchaseSetup defines what a purchase receipt writes to: items SKU-00…
// (one per caller), location WH-1, their valuations and the book.
func purchaseSetup(b testing.TB, db *chain.DB, items int) *financial.Book {
	ctx := context.Background()
	must := func(_ any, err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	must(stockmovement.DefineLocation(ctx, db, "acme", stockmovement.Location{ID: "WH-1"}))
	for i := range items {
		id := fmt.Sprintf("SKU-%02d", i)
		must(stockmovement.DefineItem(ctx, db, "acme", stockmovement.Item{ID: id}))
		must(valuations.DefineItem(ctx, db, valuations.Item{Tenant: "acme", ID: id, Method: valuations.MovingAverage, Currency: "EUR", MinorUnit: 2}))
	}
	book, err := financial.NewBook(db, "acme", "main")
	must(book, err)
	must(book.AddCurrency(ctx, financial.Currency{Code: "EUR", Exponent: 2}))
	must(book.AddAccount(ctx, financial.Account{Code: "1400", Name: "Inventory", Type: financial.Asset}))
	must(book.AddAccount(ctx, financial.Account{Code: "2100", Name: "Goods received not invoiced", Type: financial.Liability}))
	return book
}

// purchaseReceipt is the composed business event: stock +1, the
// valuation's quantity and value entries, and the journal posting, keyed
// from one operation id; with message set, also one outbox message keyed
// by the same id.
func purchaseReceipt(tx *chain.Tx, book *financial.Book, item, op string, message bool) error {
	qty, cost := decimal.MustNew(1, 0), decimal.MustNew(1001, 2)
	if _, err := stockmovement.ReceiveTx(tx, stockmovement.ReceiveRequest{Tenant: "acme", Item: item, Location: "WH-1",
		Quantity: qty, IdempotencyKey: op}); err != nil {
		return err
	}
	val, err := valuations.ReceiveTx(tx, valuations.ReceiveRequest{Tenant: "acme", Item: item, Location: "WH-1",
		OperationID: op, Quantity: qty, UnitCost: &cost})
	if err != nil {
		return err
	}
	if _, err := book.PostTx(tx, financial.Posting{Key: op, Date: financial.MustParseDate("2026-11-02"), Memo: "goods receipt " + op,
		Lines: []financial.Line{{Account: "1400", Side: financial.Debit, Amount: val.ValueChange(), Currency: "EUR"},
			{Account: "2100", Side: financial.Credit, Amount: val.ValueChange(), Currency: "EUR"}}}); err != nil {
		return err
	}
	if !message {
		return nil
	}
	_, err = outbox.EnqueueTx(tx, outbox.EnqueueRequest{Tenant: "acme", Topic: "erp-events", IdempotencyKey: op,
		Headers: []outbox.Header{{Name: "X-Event", Value: "goods.received"}},
		Payload: []byte(`{"event":"goods.received","operation":"` + op + `","item":"` + item + `"}`)})
	return err
}

// BenchmarkEnqueueInPurchaseReceipt: the composed purchase receipt with
// one outbox message against the same receipt alone (the baseline), on
// separate fresh ledgers: 1,000 receipts per transaction, and 64 callers
// of one receipt per transaction. ratio is with-message time over
// without; the target is at most 1.25.
func BenchmarkEnqueueInPurchaseReceipt(b *testing.B) {
	benchBackends(b, func(b *testing.B, open func() *chain.DB) {
		b.Run("batch-1000", func(b *testing.B) {
			ctx := context.Background()
			dbs := [2]*chain.DB{open(), open()}
			books := [2]*financial.Book{purchaseSetup(b, dbs[0], 1), purchaseSetup(b, dbs[1], 1)}
			var took [2]time.Duration
			b.ResetTimer()
			// The two ledgers take turns, a transaction each, so that a
			// change in the machine's load falls on both alike.
			for first := 0; first < b.N; first += 1000 {
				for k := range 2 {
					start := time.Now()
					err := dbs[k].Update(ctx, func(tx *chain.Tx) error {
						for i := first; i < min(first+1000, b.N); i++ {
							if err := purchaseReceipt(tx, books[k], "SKU-00", fmt.Sprintf("po-%09d", i), k == 1); err != nil {
								return err
							}
						}
						return nil
					})
					took[k] += time.Since(start)
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			report(b, b.N, took[1], took[0], "receipts/s")
		})
		b.Run("callers-64", func(b *testing.B) {
			ctx := context.Background()
			dbs := [2]*chain.DB{open(), open()}
			books := [2]*financial.Book{purchaseSetup(b, dbs[0], benchCallers), purchaseSetup(b, dbs[1], benchCallers)}
			var took [2]time.Duration
			b.ResetTimer()
			// Rounds of 640 receipts, the two ledgers taking turns.
			const round = 10 * benchCallers
			for first := 0; first < b.N; first += round {
				for k := range 2 {
					start := time.Now()
					var wg sync.WaitGroup
					for caller := range benchCallers {
						wg.Add(1)
						go func() {
							defer wg.Done()
							item := fmt.Sprintf("SKU-%02d", caller)
							for i := first + caller; i < min(first+round, b.N); i += benchCallers {
								err := dbs[k].Update(ctx, func(tx *chain.Tx) error {
									return purchaseReceipt(tx, books[k], item, fmt.Sprintf("po-%09d", i), k == 1)
								})
								if err != nil {
									b.Error(err)
									return
								}
							}
						}()
					}
					wg.Wait()
					took[k] += time.Since(start)
				}
			}
			report(b, b.N, took[1], took[0], "receipts/s")
		})
	})
}

// report adds both runs' throughput and their ratio (measured time over
// baseline time).
func report(b *testing.B, n int, measured, baseline time.Duration, unit string) {
	b.ReportMetric(float64(n)/measured.Seconds(), unit)
	b.ReportMetric(float64(n)/baseline.Seconds(), "baseline-"+unit)
	b.ReportMetric(measured.Seconds()/baseline.Seconds(), "ratio")
}

// profileCPU starts a CPU profile written to path, unless path is empty,
// and returns the function that stops it.
func profileCPU(b *testing.B, path string) (stop func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
	}
}

func benchMessages() int {
	n := 100_000
	fmt.Sscan(envOr("OUTBOX_BENCH_MESSAGES", "100000"), &n)
	return n
}

// BenchmarkDeliver: n messages enqueued beforehand (1,000 per
// transaction), then delivered by one worker with a no-op handler, timed
// until Stop returns, when every outcome is recorded durably (each claim
// and each batch of outcomes is a committed entry). Baseline: the engine
// appending n unkeyed entries of the same payload size, 1,000 per
// transaction, to one chain. messages/s is the target's figure (at least
// 50,000 embedded); ratio is the delivery's time over the baseline's.
// cpu-ratio is the same over the process's CPU time (all threads), which
// the other work on a shared machine moves less than the wall clock;
// deliveries-entries counts the lease and outcome entries (the batches);
// allocs/message counts the heap allocations of the whole process during
// the delivery, per message (the figure the machine's load does not move).
func BenchmarkDeliver(b *testing.B) {
	benchBackends(b, func(b *testing.B, open func() *chain.DB) {
		ctx := context.Background()
		n := benchMessages()
		for range b.N {
			db := open()
			payload := []byte(`{"event":"goods.received","operation":"po-000000001"}`)
			for first := 0; first < n; first += 1000 {
				err := db.Update(ctx, func(tx *chain.Tx) error {
					for i := first; i < min(first+1000, n); i++ {
						if _, err := outbox.EnqueueTx(tx, outbox.EnqueueRequest{Tenant: "acme", Topic: "bench",
							IdempotencyKey: fmt.Sprintf("m-%09d", i), Payload: payload}); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			var handled atomic.Int64
			all := make(chan struct{})
			w, err := outbox.NewWorker(db, outbox.WorkerOptions{Tenant: "acme", ClaimBatch: outbox.ClaimBatchMax, Concurrency: 64,
				Topics: map[string]outbox.Topic{"bench": {Handler: func(ctx context.Context, d *outbox.Delivery) error {
					if handled.Add(1) == int64(n) {
						close(all)
					}
					return nil
				}}}})
			if err != nil {
				b.Fatal(err)
			}
			stopProfile := profileCPU(b, os.Getenv("OUTBOX_BENCH_CPUPROFILE"))
			b.ResetTimer()
			var mem runtime.MemStats
			runtime.ReadMemStats(&mem)
			startMallocs := mem.Mallocs
			start, startCPU := time.Now(), cputime.Process()
			if err := w.Start(ctx); err != nil {
				b.Fatal(err)
			}
			<-all
			if err := w.Stop(ctx); err != nil {
				b.Fatal(err)
			}
			measured, measuredCPU := time.Since(start), cputime.Process()-startCPU
			runtime.ReadMemStats(&mem)
			mallocs := mem.Mallocs - startMallocs
			stopProfile()
			b.StopTimer()
			s, err := outbox.Stats(ctx, db, "acme", "bench")
			if err != nil || s[0].Done != int64(n) {
				b.Fatalf("after the run: %+v %v", s, err)
			}
			base := open()
			start, startCPU = time.Now(), cputime.Process()
			reqs := make([]chain.Request, 0, 1000)
			for first := 0; first < n; first += 1000 {
				reqs = reqs[:0]
				for i := first; i < min(first+1000, n); i++ {
					reqs = append(reqs, chain.Request{Chain: "acme/base/line", Type: "base/v1", Payload: payload})
				}
				if _, err := base.AppendBatch(ctx, reqs, nil); err != nil {
					b.Fatal(err)
				}
			}
			baseline, baselineCPU := time.Since(start), cputime.Process()-startCPU
			b.ReportMetric(float64(n)/measured.Seconds(), "messages/s")
			b.ReportMetric(float64(mallocs)/float64(n), "allocs/message")
			if dc, _ := outbox.DeliveriesChain("acme", "bench"); dc != "" {
				if h, err := db.Head(ctx, dc); err == nil {
					b.ReportMetric(float64(h.Seq), "deliveries-entries")
				}
			}
			if baselineCPU > 0 {
				b.ReportMetric(float64(measuredCPU.Microseconds())/float64(n), "cpu-us/message")
				b.ReportMetric(float64(baselineCPU.Microseconds())/float64(n), "baseline-cpu-us/entry")
				b.ReportMetric(measuredCPU.Seconds()/baselineCPU.Seconds(), "cpu-ratio")
			}
			b.ReportMetric(float64(n)/baseline.Seconds(), "baseline-entries/s")
			b.ReportMetric(measured.Seconds()/baseline.Seconds(), "ratio")
		}
	})
}

// BenchmarkPickupLatency: one message enqueued every 10 ms (100/s) while a
// worker waits; the latency is from the enqueue's commit (Enqueue
// returning to its caller) to the handler's call, p50 and p99 over
// OUTBOX_BENCH_PICKUPS messages (500 by default). The handler may run
// before Enqueue has returned: the commit notifies the worker as soon as
// it is durable; from-call is the time from the Enqueue call to the
// handler, commit included. Baseline: the same Enqueue calls' own latency
// (their commit), measured in the same run.
func BenchmarkPickupLatency(b *testing.B) {
	benchBackends(b, func(b *testing.B, open func() *chain.DB) {
		ctx := context.Background()
		n := 500
		fmt.Sscan(envOr("OUTBOX_BENCH_PICKUPS", "500"), &n)
		for range b.N {
			db := open()
			var mu sync.Mutex
			called := map[string]time.Time{}
			done := make(chan struct{}, n)
			w, err := outbox.NewWorker(db, outbox.WorkerOptions{Tenant: "acme", Concurrency: 8,
				Topics: map[string]outbox.Topic{"hooks": {Handler: func(ctx context.Context, d *outbox.Delivery) error {
					now := time.Now()
					mu.Lock()
					called[d.Message.IdempotencyKey] = now
					mu.Unlock()
					done <- struct{}{}
					return nil
				}}}})
			if err != nil {
				b.Fatal(err)
			}
			if err := w.Start(ctx); err != nil {
				b.Fatal(err)
			}
			returned := make([]time.Time, n)
			started := make([]time.Time, n)
			commit := make([]time.Duration, n)
			tick := time.NewTicker(10 * time.Millisecond)
			for i := range n {
				<-tick.C
				start := time.Now()
				started[i] = start
				if _, err := outbox.Enqueue(ctx, db, outbox.EnqueueRequest{Tenant: "acme", Topic: "hooks", IdempotencyKey: fmt.Sprint("p-", i)}); err != nil {
					b.Fatal(err)
				}
				returned[i] = time.Now()
				commit[i] = returned[i].Sub(start)
			}
			tick.Stop()
			for range n {
				<-done
			}
			w.Stop(ctx)
			pickup := make([]time.Duration, n)
			fromCall := make([]time.Duration, n)
			for i := range n {
				pickup[i] = max(called[fmt.Sprint("p-", i)].Sub(returned[i]), 0)
				fromCall[i] = called[fmt.Sprint("p-", i)].Sub(started[i])
			}
			slices.Sort(pickup)
			slices.Sort(fromCall)
			b.ReportMetric(float64(fromCall[n/2].Microseconds())/1000, "from-call-p50-ms")
			b.ReportMetric(float64(fromCall[n*99/100].Microseconds())/1000, "from-call-p99-ms")
			slices.Sort(commit)
			b.ReportMetric(float64(pickup[n/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(pickup[n*99/100].Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(commit[n/2].Microseconds())/1000, "baseline-commit-p50-ms")
			b.ReportMetric(float64(commit[n*99/100].Microseconds())/1000, "baseline-commit-p99-ms")
		}
	})
}
