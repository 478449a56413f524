package stockmovement_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/stockmovement"
)

// rebuildBenchEntries is the size of the ledgers BenchmarkRebuild rebuilds.
const rebuildBenchEntries = 100_000

// ledgerOfItems returns a ledger of rebuildBenchEntries receipts spread
// over items × locations chains, built in transactions of 10,000.
func ledgerOfItems(b *testing.B, items, locations int) *chain.DB {
	b.Helper()
	ctx := context.Background()
	db, err := chain.Open(filepath.Join(b.TempDir(), "ledger.db"), chain.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	err = db.Update(ctx, func(tx *chain.Tx) error {
		for i := range items {
			if _, err := stockmovement.DefineItemTx(tx, "acme", stockmovement.Item{ID: fmt.Sprintf("I%03d", i)}); err != nil {
				return err
			}
		}
		for l := range locations {
			if _, err := stockmovement.DefineLocationTx(tx, "acme", stockmovement.Location{ID: fmt.Sprintf("L%03d", l)}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	const buildBatchSize = 10_000
	for first := 0; first < rebuildBenchEntries; first += buildBatchSize {
		err := db.Update(ctx, func(tx *chain.Tx) error {
			for i := first; i < first+buildBatchSize; i++ {
				_, err := stockmovement.ReceiveTx(tx, stockmovement.ReceiveRequest{Tenant: "acme",
					Item: fmt.Sprintf("I%03d", i%items), Location: fmt.Sprintf("L%03d", i/items%locations),
					Quantity: decimal.MustNew(1, 0), IdempotencyKey: fmt.Sprintf("%09d", i)})
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return db
}

// BenchmarkRebuild: Rebuild of a ledger of 100,000 movements, reported per
// movement; baseline: Check of the same ledger, which replays the same
// entries in read transactions and compares instead of writing. The ratio
// is Rebuild's time over Check's. On one chain (one item at one location)
// one write transaction replays every movement; over 100 items at 4
// locations each item is a transaction of its own, with its commit.
func BenchmarkRebuild(b *testing.B) {
	ctx := context.Background()
	if b.N > checkRunsMax {
		b.Skipf("one Rebuild reads %d entries; run it with -benchtime 1x to %dx (asked for %d runs)", rebuildBenchEntries, checkRunsMax, b.N)
	}
	for _, shape := range []struct{ items, locations int }{{1, 1}, {100, 4}} {
		b.Run(fmt.Sprintf("items=%d/locations=%d", shape.items, shape.locations), func(b *testing.B) {
			db := ledgerOfItems(b, shape.items, shape.locations)
			definitions := int64(shape.items + shape.locations)
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				stats, err := stockmovement.Rebuild(ctx, db)
				if err != nil || len(stats.Failures) > 0 || stats.Entries != rebuildBenchEntries+definitions {
					b.Fatal(stats, err)
				}
			}
			measured := time.Since(start)
			b.StopTimer()
			start = time.Now()
			for range b.N {
				failures, err := stockmovement.Check(ctx, db)
				if err != nil || len(failures) > 0 {
					b.Fatal(failures, err)
				}
			}
			report(b, b.N*rebuildBenchEntries, measured, time.Since(start), "movements/s")
		})
	}
}
