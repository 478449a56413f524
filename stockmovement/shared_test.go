package stockmovement_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/chain/chaintest"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/stockmovement"
)

var ctx = context.Background()

// openShared opens two ledgers on one PostgreSQL schema (chaintest.OpenShared).
var openShared = chaintest.OpenShared

// TestSharedBackendIssuesNeverOversell has two ledgers on one PostgreSQL
// schema issue from the same stock, 32 goroutines each: every issue reads
// the balance only after locking the chain's head, so exactly the stock on
// hand is issued, no running balance goes negative, and every entry's
// running balance is the previous one plus its change.
func TestSharedBackendIssuesNeverOversell(t *testing.T) {
	t.Parallel()
	db1, db2 := openShared(t)
	setup(t, db1, "acme")
	const stock, goroutines = 40, 32
	if _, err := stockmovement.Receive(ctx, db1, stockmovement.ReceiveRequest{Tenant: "acme", Item: "pcs",
		Location: "A", Quantity: decimal.MustNew(stock, 0), IdempotencyKey: "grn"}); err != nil {
		t.Fatal(err)
	}
	var issued, refused atomic.Int64
	var wg sync.WaitGroup
	for p, db := range []*chain.DB{db1, db2} {
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := stockmovement.Issue(ctx, db, stockmovement.IssueRequest{Tenant: "acme", Item: "pcs",
					Location: "A", Quantity: decimal.MustNew(1, 0), IdempotencyKey: fmt.Sprintf("p%d-g%d", p, g)})
				switch {
				case err == nil:
					issued.Add(1)
				case errors.Is(err, stockmovement.ErrNegativeStock):
					refused.Add(1)
				default:
					t.Error(err)
				}
			}()
		}
	}
	wg.Wait()
	if issued.Load() != stock || refused.Load() != 2*goroutines-stock {
		t.Fatalf("issued %d, refused %d: want %d and %d", issued.Load(), refused.Load(), stock, 2*goroutines-stock)
	}
	for _, db := range []*chain.DB{db1, db2} {
		if got := balance(t, db, "acme", "pcs", "A"); got != "0" {
			t.Fatalf("balance %s, want 0", got)
		}
	}
	checkRunningBalances(t, db2, "acme", "pcs", "A", false)
	checkShared(t, db1, db2)
}

// TestSharedBackendTransfersKeepTotals has both ledgers move one item
// between three locations at once: transfers both ways between A and B,
// receipts and issues at C, and reversals of earlier transfers. The item
// total, shared by all locations, is written by all of them; it must end
// equal to the sum of the balances, which it would not if two writers
// computed it from the same old value.
func TestSharedBackendTransfersKeepTotals(t *testing.T) {
	t.Parallel()
	db1, db2 := openShared(t)
	setup(t, db1, "acme")
	for _, loc := range []string{"A", "B"} {
		if _, err := stockmovement.Receive(ctx, db1, stockmovement.ReceiveRequest{Tenant: "acme", Item: "kg",
			Location: loc, Quantity: q(t, "100.000", 3), IdempotencyKey: "seed-" + loc}); err != nil {
			t.Fatal(err)
		}
	}
	const goroutines, rounds = 16, 4
	var wg sync.WaitGroup
	for p, db := range []*chain.DB{db1, db2} {
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := range rounds {
					key := fmt.Sprintf("p%d-g%d-r%d", p, g, r)
					var err error
					switch (g + r) % 4 {
					case 0, 1:
						from, to := "A", "B"
						if g%2 == 1 {
							from, to = to, from
						}
						var res stockmovement.Result
						res, err = stockmovement.Transfer(ctx, db, stockmovement.TransferRequest{Tenant: "acme", Item: "kg",
							From: from, To: to, Quantity: q(t, "0.750", 3), IdempotencyKey: key})
						if err == nil && r%2 == 0 { // reverse every other transfer, from the other ledger
							other := [2]*chain.DB{db2, db1}[p]
							_, err = stockmovement.Reverse(ctx, other, stockmovement.ReverseRequest{Tenant: "acme",
								Original: res.Entries[1].Ref(), IdempotencyKey: "rev-" + key})
						}
					case 2:
						_, err = stockmovement.Receive(ctx, db, stockmovement.ReceiveRequest{Tenant: "acme", Item: "kg",
							Location: "C", Quantity: q(t, "1.250", 3), IdempotencyKey: key})
					case 3:
						_, err = stockmovement.Issue(ctx, db, stockmovement.IssueRequest{Tenant: "acme", Item: "kg",
							Location: "C", Quantity: q(t, "0.500", 3), IdempotencyKey: key})
						if errors.Is(err, stockmovement.ErrNegativeStock) {
							err = nil // C may be empty yet; refused and not written
						}
					}
					if err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	sum := decimal.MustNew(0, 3)
	for _, loc := range []string{"A", "B", "C"} {
		b, err := stockmovement.GetBalance(ctx, db1, "acme", "kg", loc)
		if err != nil {
			t.Fatal(err)
		}
		if sum, err = sum.Add(b.Quantity); err != nil {
			t.Fatal(err)
		}
		checkRunningBalances(t, db1, "acme", "kg", loc, false)
	}
	total, err := stockmovement.ItemTotal(ctx, db2, "acme", "kg")
	if err != nil {
		t.Fatal(err)
	}
	if total != sum {
		t.Fatalf("item total %s, balances sum to %s", total, sum)
	}
	checkShared(t, db1, db2)
}

// TestSharedBackendFirstMovements has both ledgers record the first
// movements of a new item at once, at two locations: neither finds an item
// total yet, and without the item's lock both would store their own change
// as the total.
func TestSharedBackendFirstMovements(t *testing.T) {
	t.Parallel()
	db1, db2 := openShared(t)
	setup(t, db1, "acme")
	for round := range 6 {
		id := fmt.Sprintf("fresh-%d", round)
		if _, err := stockmovement.DefineItem(ctx, db1, "acme", stockmovement.Item{ID: id}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for p, db := range []*chain.DB{db1, db2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := stockmovement.Receive(ctx, db, stockmovement.ReceiveRequest{Tenant: "acme", Item: id,
					Location: [2]string{"A", "B"}[p], Quantity: decimal.MustNew(int64(p+1), 0), IdempotencyKey: "first"}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		total, err := stockmovement.ItemTotal(ctx, db2, "acme", id)
		if err != nil {
			t.Fatal(err)
		}
		if total.String() != "3" {
			t.Fatalf("round %d: item total %s after receipts of 1 and 2", round, total)
		}
	}
	checkShared(t, db1, db2)
}

// TestSharedBackendDefinitions has both ledgers define the same new item
// at once with different scales: the catalog chain is locked before the
// current definition is read, so exactly one definition is written and the
// other is refused as a scale change.
func TestSharedBackendDefinitions(t *testing.T) {
	t.Parallel()
	db1, db2 := openShared(t)
	setup(t, db1, "acme")
	for round := range 8 {
		id := fmt.Sprintf("new-%d", round)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for p, db := range []*chain.DB{db1, db2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[p] = stockmovement.DefineItem(ctx, db, "acme", stockmovement.Item{ID: id, Scale: uint8(p)})
			}()
		}
		wg.Wait()
		failed := 0
		for _, err := range errs {
			if err != nil {
				if !errors.Is(err, stockmovement.ErrScaleChange) {
					t.Fatal(err)
				}
				failed++
			}
		}
		if failed != 1 {
			t.Fatalf("round %d: %d definitions refused, want 1: %v", round, failed, errs)
		}
	}
	checkShared(t, db1, db2)
}

// checkRunningBalances walks a chain: every running balance is the previous
// one plus the entry's change, never negative unless allowed, and the last
// one is the stored balance.
func checkRunningBalances(t *testing.T, db *chain.DB, tenant, item, location string, negativeAllowed bool) {
	t.Helper()
	var running decimal.Decimal
	first := true
	for e, err := range stockmovement.History(ctx, db, tenant, item, location, 1) {
		if err != nil {
			t.Fatal(err)
		}
		if first {
			running, first = decimal.MustNew(0, e.Quantity.Scale()), false
		}
		next, err := running.Add(e.Quantity)
		if err != nil {
			t.Fatal(err)
		}
		if next != e.Balance {
			t.Fatalf("%s seq %d: %s %+d units recorded as %s", e.Chain, e.Seq, running, e.Quantity.Units(), e.Balance)
		}
		if next.Sign() < 0 && !negativeAllowed {
			t.Fatalf("%s seq %d: balance %s", e.Chain, e.Seq, next)
		}
		running = next
	}
	b, err := stockmovement.GetBalance(ctx, db, tenant, item, location)
	if err != nil {
		t.Fatal(err)
	}
	if !first && b.Quantity != running {
		t.Fatalf("%s/%s: stored balance %s, entries sum to %s", item, location, b.Quantity, running)
	}
}

// checkShared runs Check and Verify through both ledgers.
func checkShared(t *testing.T, dbs ...*chain.DB) {
	t.Helper()
	for _, db := range dbs {
		mustCheck(t, db)
		report, err := db.Verify(ctx, chain.VerifyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !report.OK() || report.Entries == 0 {
			t.Fatalf("verify: %d entries, failures %v", report.Entries, report.Failures)
		}
	}
}
