package valuations_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/financial"
	"github.com/ledgerworks/ledger/stockmovement"
	"github.com/ledgerworks/ledger/valuations"
)

// purchaseReceipt records one business event in one transaction: the stock
// movement, both valuation entries and the journal posting Dr Inventory /
// Cr Goods Received Not Invoiced for the receipt's value change. Every key
// derives from the operation id: the movement's key and the posting's key
// are the id itself, the valuation entries' keys are id+":qty" and
// id+":value".
func purchaseReceipt(tx *chain.Tx, book *financial.Book, tenant, operationID string, quantity, unitCost decimal.Decimal) (valuations.Result, error) {
	if _, err := stockmovement.ReceiveTx(tx, stockmovement.ReceiveRequest{Tenant: tenant, Item: "SKU-1", Location: "WH-1",
		Quantity: quantity, IdempotencyKey: operationID}); err != nil {
		return valuations.Result{}, err
	}
	val, err := valuations.ReceiveTx(tx, valuations.ReceiveRequest{Tenant: tenant, Item: "SKU-1", Location: "WH-1",
		OperationID: operationID, Quantity: quantity, UnitCost: &unitCost})
	if err != nil {
		return valuations.Result{}, err
	}
	value := val.ValueChange()
	_, err = book.PostTx(tx, financial.Posting{Key: operationID, Date: financial.MustParseDate("2026-11-02"),
		Memo: "goods receipt " + operationID, Lines: []financial.Line{
			{Account: "1400", Side: financial.Debit, Amount: value, Currency: "EUR"},
			{Account: "2100", Side: financial.Credit, Amount: value, Currency: "EUR"}}})
	return val, err
}

// salesIssue takes stock out and posts its cost of goods sold from the value
// change the valuation computed: Dr COGS / Cr Inventory.
func salesIssue(tx *chain.Tx, book *financial.Book, tenant, operationID string, quantity decimal.Decimal) (valuations.Result, error) {
	if _, err := stockmovement.IssueTx(tx, stockmovement.IssueRequest{Tenant: tenant, Item: "SKU-1", Location: "WH-1",
		Quantity: quantity, IdempotencyKey: operationID}); err != nil {
		return valuations.Result{}, err
	}
	val, err := valuations.IssueTx(tx, valuations.IssueRequest{Tenant: tenant, Item: "SKU-1", Location: "WH-1",
		OperationID: operationID, Quantity: quantity})
	if err != nil {
		return valuations.Result{}, err
	}
	cost, err := val.ValueChange().Neg()
	if err != nil {
		return valuations.Result{}, err
	}
	_, err = book.PostTx(tx, financial.Posting{Key: operationID, Date: financial.MustParseDate("2026-11-03"),
		Memo: "cost of sales " + operationID, Lines: []financial.Line{
			{Account: "5000", Side: financial.Debit, Amount: cost, Currency: "EUR"},
			{Account: "1400", Side: financial.Credit, Amount: cost, Currency: "EUR"}}})
	return val, err
}

// entryCount is the number of entries in the ledger.
func entryCount(ctx context.Context, db *chain.DB) int64 {
	stats, err := db.Stats(ctx)
	if err != nil {
		panic(err)
	}
	return stats.Entries
}

// A purchase receipt and a sales issue, each written atomically across the
// stock, valuation and financial chains in one db.Update, and each retried
// without writing anything new.
func Example_composition() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "valuations-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := chain.Open(filepath.Join(dir, "ledger.db"), chain.Options{})
	if err != nil {
		panic(err)
	}
	defer db.Close()

	const tenant = "acme"
	must := func(_ any, err error) {
		if err != nil {
			panic(err)
		}
	}
	must(stockmovement.DefineItem(ctx, db, tenant, stockmovement.Item{ID: "SKU-1"}))
	must(stockmovement.DefineLocation(ctx, db, tenant, stockmovement.Location{ID: "WH-1"}))
	must(valuations.DefineItem(ctx, db, valuations.Item{Tenant: tenant, ID: "SKU-1", Method: valuations.MovingAverage,
		Currency: "EUR", MinorUnit: 2}))
	book, err := financial.NewBook(db, tenant, "main")
	must(book, err)
	must(book.AddCurrency(ctx, financial.Currency{Code: "EUR", Exponent: 2}))
	must(book.AddAccount(ctx, financial.Account{Code: "1400", Name: "Inventory", Type: financial.Asset}))
	must(book.AddAccount(ctx, financial.Account{Code: "2100", Name: "Goods received not invoiced", Type: financial.Liability}))
	must(book.AddAccount(ctx, financial.Account{Code: "5000", Name: "Cost of goods sold", Type: financial.Expense}))

	run := func() (receipt, issue valuations.Result) {
		err := db.Update(ctx, func(tx *chain.Tx) error {
			var err error
			receipt, err = purchaseReceipt(tx, book, tenant, "po-4711", decimal.MustNew(10, 0), decimal.MustNew(1001, 2))
			return err
		})
		if err != nil {
			panic(err)
		}
		err = db.Update(ctx, func(tx *chain.Tx) error {
			var err error
			issue, err = salesIssue(tx, book, tenant, "so-0815", decimal.MustNew(3, 0))
			return err
		})
		if err != nil {
			panic(err)
		}
		return receipt, issue
	}
	receipt, issue := run()
	fmt.Println("receipt value change:", receipt.ValueChange(), "issue value change:", issue.ValueChange())
	inventory, err := book.Balance(ctx, "1400", "EUR")
	must(inventory, err)
	fmt.Println("inventory account:", inventory.Amount)

	written := entryCount(ctx, db)
	receipt, issue = run()
	fmt.Println("retry replayed:", receipt.Replayed, issue.Replayed, "entries written by the retry:", entryCount(ctx, db)-written)
	failures, err := valuations.Check(ctx, db)
	must(failures, err)
	fmt.Println("valuation check failures:", len(failures))
	// Output:
	// receipt value change: 100.10 issue value change: -30.03
	// inventory account: 70.07
	// retry replayed: true true entries written by the retry: 0
	// valuation check failures: 0
}
