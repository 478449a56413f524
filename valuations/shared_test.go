package valuations

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
)

// openShared opens two ledgers on one PostgreSQL schema (chaintest.OpenShared).
var openShared = chaintest.OpenShared

// TestSharedBackendIssues has two ledgers on one PostgreSQL schema issue
// from the same location, 32 goroutines each, for a moving-average and a
// FIFO item. Every operation locks its chains' heads before it reads the
// position and the layers: exactly the stock on hand is issued, at exactly
// the value received, no entry records a negative quantity or value, and
// each entry's quantity and value are the previous ones plus its changes.
func TestSharedBackendIssues(t *testing.T) {
	t.Parallel()
	db1, db2 := openShared(t)
	ctx := context.Background()
	for _, method := range []Method{MovingAverage, FIFO} {
		t.Run(method.String(), func(t *testing.T) {
			it := Item{Tenant: "acme", ID: "SKU-" + method.String(), Method: method, Currency: "EUR", MinorUnit: 2}
			defineItem(t, db1, it)
			for i, cost := range []string{"2.50", "3.10"} {
				if _, err := Receive(ctx, db2, ReceiveRequest{Tenant: "acme", Item: it.ID, Location: "WH",
					OperationID: fmt.Sprintf("grn-%d", i), Quantity: dec(t, "30", 0), UnitCost: decPtr(t, cost, 2)}); err != nil {
					t.Fatal(err)
				}
			}
			const stock, goroutines = 60, 32
			var issued, refused atomic.Int64
			var wg sync.WaitGroup
			for p, db := range []*chain.DB{db1, db2} {
				for g := range goroutines {
					wg.Add(1)
					go func() {
						defer wg.Done()
						_, err := Issue(ctx, db, IssueRequest{Tenant: "acme", Item: it.ID, Location: "WH",
							OperationID: fmt.Sprintf("p%d-g%d", p, g), Quantity: dec(t, "1", 0)})
						switch {
						case err == nil:
							issued.Add(1)
						case errors.Is(err, ErrInsufficientStock):
							refused.Add(1)
						default:
							t.Error(err)
						}
					}()
				}
			}
			wg.Wait()
			if issued.Load() != stock || refused.Load() != 2*goroutines-stock {
				t.Fatalf("issued %d, refused %d", issued.Load(), refused.Load())
			}
			quantity, value, outflow := walkLocation(t, db1, it, "WH")
			if quantity != 0 || value != 0 || outflow != -(30*250+30*310) {
				t.Fatalf("quantity %d, value %d, issued value %d", quantity, value, outflow)
			}
			b, err := GetBalance(ctx, db2, "acme", it.ID, "WH")
			if err != nil || !b.Quantity.IsZero() || !b.Value.IsZero() {
				t.Fatalf("balance %+v %v", b, err)
			}
		})
	}
	checkShared(t, db1, db2)
}

// TestSharedBackendTransfers has both ledgers transfer one FIFO item both
// ways between two locations and reverse some transfers through the other
// ledger: the locks of all four chains are taken in one order, so nothing
// deadlocks for long, quantity and value are conserved, and Check is clean.
func TestSharedBackendTransfers(t *testing.T) {
	t.Parallel()
	db1, db2 := openShared(t)
	ctx := context.Background()
	it := Item{Tenant: "acme", ID: "SKU-T", Method: FIFO, Currency: "EUR", MinorUnit: 2}
	defineItem(t, db1, it)
	for _, loc := range []string{"A", "B"} {
		if _, err := Receive(ctx, db1, ReceiveRequest{Tenant: "acme", Item: it.ID, Location: loc,
			OperationID: "seed", Quantity: dec(t, "100", 0), UnitCost: decPtr(t, "1.25", 2)}); err != nil {
			t.Fatal(err)
		}
	}
	const goroutines, rounds = 8, 2
	var wg sync.WaitGroup
	for p, db := range []*chain.DB{db1, db2} {
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := range rounds {
					from, to := "A", "B"
					if (g+r)%2 == 1 {
						from, to = to, from
					}
					op := fmt.Sprintf("p%d-g%d-r%d", p, g, r)
					if _, err := Transfer(ctx, db, TransferRequest{Tenant: "acme", Item: it.ID, From: from, To: to,
						OperationID: op, Quantity: dec(t, "2", 0)}); err != nil {
						t.Error(err)
						return
					}
					if r%2 == 0 {
						other := [2]*chain.DB{db2, db1}[p]
						_, err := Reverse(ctx, other, ReverseRequest{Tenant: "acme", Item: it.ID, Location: from,
							OperationID: "rev-" + op, Reverses: op})
						if err != nil && !errors.Is(err, ErrNotReversible) {
							t.Error(err)
							return
						}
					}
				}
			}()
		}
	}
	wg.Wait()
	var quantity, value int64
	for _, loc := range []string{"A", "B"} {
		q, v, _ := walkLocation(t, db2, it, loc)
		quantity, value = quantity+q, value+v
	}
	if quantity != 200 || value != 25000 {
		t.Fatalf("A and B hold %d pieces worth %d cents, want 200 and 25000", quantity, value)
	}
	checkShared(t, db1, db2)
}

// walkLocation reads a location's value chain: each entry's quantity and
// value are the previous ones plus its changes, never negative (the items
// here refuse negative stock), and the last ones are the stored position.
// It returns them with the sum of the negative value changes.
func walkLocation(t *testing.T, db *chain.DB, it Item, loc string) (quantity, value, outflow int64) {
	t.Helper()
	ctx := context.Background()
	quantityChain, err := QuantityChain(it.Tenant, it.ID, loc)
	if err != nil {
		t.Fatal(err)
	}
	valueChain, err := ValueChain(it.Tenant, it.ID, loc)
	if err != nil {
		t.Fatal(err)
	}
	for e, err := range db.Entries(ctx, quantityChain, 1) {
		if err != nil {
			t.Fatal(err)
		}
		d, err := decodeQuantity(e.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if d.after != quantity+d.change || d.after < 0 {
			t.Fatalf("%s seq %d: %d %+d recorded as %d", e.Chain, e.Seq, quantity, d.change, d.after)
		}
		quantity = d.after
	}
	walked := quantity
	quantity = 0
	for e, err := range db.Entries(ctx, valueChain, 1) {
		if err != nil {
			t.Fatal(err)
		}
		d, err := decodeValue(e.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if d.value != value+d.change || d.value < 0 || d.quantity < 0 {
			t.Fatalf("%s seq %d: value %d %+d recorded as %d at quantity %d", e.Chain, e.Seq, value, d.change, d.value, d.quantity)
		}
		if d.change < 0 {
			outflow += d.change
		}
		quantity, value = d.quantity, d.value
	}
	if quantity != walked {
		t.Fatalf("%s: the value chain ends at quantity %d, the quantity chain at %d", loc, quantity, walked)
	}
	b, err := GetBalance(ctx, db, it.Tenant, it.ID, loc)
	if err != nil {
		t.Fatal(err)
	}
	if b.Quantity != decimal.MustNew(quantity, it.QuantityScale) || b.Value != decimal.MustNew(value, it.MinorUnit) {
		t.Fatalf("%s: stored %s worth %s, entries end at %d worth %d", loc, b.Quantity, b.Value, quantity, value)
	}
	return quantity, value, outflow
}

// checkShared runs Check and Verify through both ledgers.
func checkShared(t *testing.T, dbs ...*chain.DB) {
	t.Helper()
	for _, db := range dbs {
		mustCheck(t, db)
		report, err := db.Verify(context.Background(), chain.VerifyOptions{})
		if err != nil || !report.OK() || report.Entries == 0 {
			t.Fatalf("verify: %d entries, %v %v", report.Entries, report.Failures, err)
		}
	}
}

// TestSharedBackendDefinitions has both ledgers define the same new item at
// once with different quantity scales: the item's chain is locked before
// its current definition is read, so one definition is written and the
// other is refused as a change of scale.
func TestSharedBackendDefinitions(t *testing.T) {
	t.Parallel()
	db1, db2 := openShared(t)
	for round := range 8 {
		id := fmt.Sprintf("new-%d", round)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for p, db := range []*chain.DB{db1, db2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[p] = DefineItem(context.Background(), db, Item{Tenant: "acme", ID: id, Method: FIFO,
					QuantityScale: uint8(p), Currency: "EUR", MinorUnit: 2})
			}()
		}
		wg.Wait()
		failed := 0
		for _, err := range errs {
			if err != nil {
				if !errors.Is(err, ErrInvalidItem) {
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

// TestSharedBackendMethodChange changes an item's method through one
// ledger while the other records its first receipt: an operation locks the
// item's chain before it reads the definition, as DefineItem does, so
// either the receipt is valued by the new method or the change is refused
// because the item holds stock; never a change accepted beside a receipt
// valued by the old method.
func TestSharedBackendMethodChange(t *testing.T) {
	t.Parallel()
	db1, db2 := openShared(t)
	ctx := context.Background()
	for round := range 8 {
		it := Item{Tenant: "acme", ID: fmt.Sprintf("m-%d", round), Method: MovingAverage, Currency: "EUR", MinorUnit: 2}
		defineItem(t, db1, it)
		var changeErr, receiveErr error
		var received Result
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			changed := it
			changed.Method = FIFO
			_, changeErr = DefineItem(ctx, db1, changed)
		}()
		go func() {
			defer wg.Done()
			received, receiveErr = Receive(ctx, db2, ReceiveRequest{Tenant: "acme", Item: it.ID, Location: "WH",
				OperationID: "r", Quantity: dec(t, "4", 0), UnitCost: decPtr(t, "2.50", 2)})
		}()
		wg.Wait()
		if receiveErr != nil {
			t.Fatal(receiveErr)
		}
		if changeErr != nil && !errors.Is(changeErr, ErrMethodChange) {
			t.Fatal(changeErr)
		}
		d, err := decodeValue(received.Legs[0].ValueEntry.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if (changeErr == nil) != (d.method == FIFO) {
			t.Fatalf("round %d: method change error %v, receipt valued by %v", round, changeErr, d.method)
		}
	}
	checkShared(t, db1, db2)
}
