package reliability

import (
	"context"
	"errors"
	"hash/fnv"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/financial"
	"github.com/ledgerworks/ledger/stockmovement"
	"github.com/ledgerworks/ledger/valuations"
)

// The crash child's business: one tenant, one item at two locations, with
// stock movements, valuations and a book of accounts.
const (
	crashTenant    = "crash"
	crashItem      = "SKU-1"
	crashBook      = "main"
	crashInventory = "1300"
	crashReceived  = "2100" // goods received, not invoiced
	crashCurrency  = "EUR"
)

var crashLocations = [2]string{"WH-1", "WH-2"}

func init() {
	crashSetups = append(crashSetups, setupDomains)
	crashOperations = append(crashOperations,
		stockTransferOperation(), valuationOperation(), postingOperation(), purchaseReceiptOperation())
	crashChecks["stockmovement"] = stockmovement.Check
	crashChecks["financial"] = financial.Check
	crashChecks["valuations"] = valuations.Check
}

// idNumber is a number derived from an operation id, so that a retry sends
// the same request.
func idNumber(id string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	return h.Sum64()
}

// crashBookOf returns the child's book.
func crashBookOf(db *chain.DB) *financial.Book { return bookOf(db, crashTenant) }

// bookOf returns a tenant's book.
func bookOf(db *chain.DB, tenant string) *financial.Book {
	book, err := financial.NewBook(db, tenant, crashBook)
	if err != nil {
		panic(err)
	}
	return book
}

// setupDomains defines the crash child's definitions.
func setupDomains(ctx context.Context, db *chain.DB) error {
	return setupTenant(ctx, db, crashTenant, true)
}

// setupTenant defines a tenant's item (allowing negative stock or not), its
// two locations, accounts and currency; it writes nothing when they already
// exist.
func setupTenant(ctx context.Context, db *chain.DB, tenant string, allowNegative bool) error {
	if _, err := stockmovement.DefineItem(ctx, db, tenant, stockmovement.Item{ID: crashItem, AllowNegative: allowNegative}); err != nil {
		return err
	}
	for _, l := range crashLocations {
		if _, err := stockmovement.DefineLocation(ctx, db, tenant, stockmovement.Location{ID: l}); err != nil {
			return err
		}
	}
	_, err := valuations.DefineItem(ctx, db, valuations.Item{Tenant: tenant, ID: crashItem,
		Method: valuations.MovingAverage, Currency: crashCurrency, MinorUnit: 2, AllowNegative: allowNegative})
	if err != nil {
		return err
	}
	book := bookOf(db, tenant)
	if _, err := book.AddCurrency(ctx, financial.Currency{Code: crashCurrency, Exponent: 2}); err != nil {
		return err
	}
	for _, a := range []financial.Account{
		{Code: crashInventory, Name: "Inventory", Type: financial.Asset},
		{Code: crashReceived, Name: "Goods received not invoiced", Type: financial.Liability},
	} {
		if _, err := book.AddAccount(ctx, a); err != nil {
			return err
		}
	}
	return nil
}

// lookups reports, for each (chain, key), whether the ledger holds it.
func lookups(ctx context.Context, db *chain.DB, pairs ...[2]string) ([]bool, error) {
	parts := make([]bool, 0, len(pairs))
	err := db.View(ctx, func(tx *chain.Tx) error {
		for _, p := range pairs {
			_, err := tx.Lookup(p[0], p[1])
			if err != nil && !errors.Is(err, chain.ErrNotFound) {
				return err
			}
			parts = append(parts, err == nil)
		}
		return nil
	})
	return parts, err
}

func mustChain(name string, err error) string {
	if err != nil {
		panic(err)
	}
	return name
}

// stockTransferOperation moves 1 to 9 pieces between the two locations:
// an out entry and an in entry that must exist together.
func stockTransferOperation() crashOperation {
	direction := func(id string) (from, to string) {
		if idNumber(id)%2 == 0 {
			return crashLocations[0], crashLocations[1]
		}
		return crashLocations[1], crashLocations[0]
	}
	return crashOperation{
		kind: "stock-transfer",
		run: func(ctx context.Context, db *chain.DB, id string) error {
			from, to := direction(id)
			_, err := stockmovement.Transfer(ctx, db, stockmovement.TransferRequest{Tenant: crashTenant, Item: crashItem,
				From: from, To: to, Quantity: decimal.MustNew(int64(1+idNumber(id)%9), 0), IdempotencyKey: id})
			return err
		},
		parts: func(ctx context.Context, db *chain.DB, id string) ([]bool, error) {
			from, to := direction(id)
			return lookups(ctx, db,
				[2]string{mustChain(stockmovement.MovementChain(crashTenant, crashItem, from)), id + ":out"},
				[2]string{mustChain(stockmovement.MovementChain(crashTenant, crashItem, to)), id + ":in"})
		},
	}
}

// valuationOperation receives at a unit cost (even ids) or transfers
// between the locations (odd ids): a quantity entry and a value entry per
// location, which must exist together.
func valuationOperation() crashOperation {
	estimate := decimal.MustNew(250, 2)
	locations := func(id string) []string {
		n := idNumber(id)
		switch n % 4 {
		case 1:
			return crashLocations[:]
		case 3:
			return []string{crashLocations[1], crashLocations[0]}
		}
		return []string{crashLocations[n/4%2]}
	}
	return crashOperation{
		kind: "valuation",
		run: func(ctx context.Context, db *chain.DB, id string) error {
			n := idNumber(id)
			quantity := decimal.MustNew(int64(1+n%7), 0)
			locs := locations(id)
			var err error
			if len(locs) == 1 {
				cost := decimal.MustNew(int64(100+n%400), 2)
				_, err = valuations.Receive(ctx, db, valuations.ReceiveRequest{Tenant: crashTenant, Item: crashItem,
					Location: locs[0], OperationID: id, Quantity: quantity, UnitCost: &cost})
			} else {
				_, err = valuations.Transfer(ctx, db, valuations.TransferRequest{Tenant: crashTenant, Item: crashItem,
					From: locs[0], To: locs[1], OperationID: id, Quantity: quantity, EstimateRate: &estimate})
			}
			return err
		},
		parts: func(ctx context.Context, db *chain.DB, id string) ([]bool, error) {
			var pairs [][2]string
			for _, l := range locations(id) {
				pairs = append(pairs,
					[2]string{mustChain(valuations.QuantityChain(crashTenant, crashItem, l)), valuations.QuantityKey(id)},
					[2]string{mustChain(valuations.ValueChain(crashTenant, crashItem, l)), valuations.ValueKey(id)})
			}
			return lookups(ctx, db, pairs...)
		},
	}
}

// crashAmount is the amount of an operation's posting, 0.01 to 999.99.
func crashAmount(id string) decimal.Decimal {
	return decimal.MustNew(int64(1+idNumber(id)%99_999), 2)
}

// crashPosting debits inventory and credits goods received.
func crashPosting(id string) financial.Posting {
	amount := crashAmount(id)
	return financial.Posting{Key: id, Date: financial.MustParseDate("2026-11-29"), Memo: "receipt " + id,
		Lines: []financial.Line{
			{Account: crashInventory, Side: financial.Debit, Amount: amount, Currency: crashCurrency},
			{Account: crashReceived, Side: financial.Credit, Amount: amount, Currency: crashCurrency},
		}}
}

// postingPresent reports whether the book holds the posting keyed id.
func postingPresent(ctx context.Context, db *chain.DB, id string) (bool, error) {
	_, err := crashBookOf(db).PostingByKey(ctx, id)
	if errors.Is(err, financial.ErrPostingNotFound) {
		return false, nil
	}
	return err == nil, err
}

// postingOperation posts a two-line journal entry.
func postingOperation() crashOperation {
	return crashOperation{
		kind: "posting",
		run: func(ctx context.Context, db *chain.DB, id string) error {
			_, err := crashBookOf(db).Post(ctx, crashPosting(id))
			return err
		},
		parts: func(ctx context.Context, db *chain.DB, id string) ([]bool, error) {
			present, err := postingPresent(ctx, db, id)
			return []bool{present}, err
		},
	}
}

// purchaseReceiptOperation is one business event written by three packages
// in one transaction: stock +n at WH-1, a valuation receipt of the same
// quantity for the posting's amount, and the journal posting Dr Inventory
// / Cr Goods received — all keyed from one operation id.
func purchaseReceiptOperation() crashOperation {
	quantity := func(id string) decimal.Decimal { return decimal.MustNew(int64(1+idNumber(id)%20), 0) }
	return crashOperation{
		kind: "purchase-receipt",
		run: func(ctx context.Context, db *chain.DB, id string) error {
			book := crashBookOf(db)
			value := crashAmount(id)
			return db.Update(ctx, func(tx *chain.Tx) error {
				if _, err := stockmovement.ReceiveTx(tx, stockmovement.ReceiveRequest{Tenant: crashTenant, Item: crashItem,
					Location: crashLocations[0], Quantity: quantity(id), IdempotencyKey: id + ":stock"}); err != nil {
					return err
				}
				if _, err := valuations.ReceiveTx(tx, valuations.ReceiveRequest{Tenant: crashTenant, Item: crashItem,
					Location: crashLocations[0], OperationID: id, Quantity: quantity(id), Value: &value}); err != nil {
					return err
				}
				_, err := book.PostTx(tx, crashPosting(id))
				return err
			})
		},
		parts: func(ctx context.Context, db *chain.DB, id string) ([]bool, error) {
			parts, err := lookups(ctx, db,
				[2]string{mustChain(stockmovement.MovementChain(crashTenant, crashItem, crashLocations[0])), id + ":stock"},
				[2]string{mustChain(valuations.QuantityChain(crashTenant, crashItem, crashLocations[0])), valuations.QuantityKey(id)},
				[2]string{mustChain(valuations.ValueChain(crashTenant, crashItem, crashLocations[0])), valuations.ValueKey(id)})
			if err != nil {
				return nil, err
			}
			present, err := postingPresent(ctx, db, id)
			return append(parts, present), err
		},
	}
}
