package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/financial"
	"github.com/ledgerworks/ledger/stockmovement"
	"github.com/ledgerworks/ledger/valuations"
)

func init() {
	registerDemoStep(40, "valuations: the worked example, by moving average and by FIFO", demoValWorkedExample)
	registerDemoStep(41, "valuations: a purchase receipt and a sale, each one transaction across stock, valuation and journal", demoValComposition)
	registerDemoStep(42, "valuations: an issue beyond the stock, settled by the next receipt", demoValNegativeStock)
}

func demoValWorkedExample(ctx context.Context, d *demoEnv) error {
	for _, it := range []valuations.Item{
		{Tenant: d.Tenant, ID: "NUT-M8", Method: valuations.MovingAverage, Currency: "EUR", MinorUnit: 2},
		{Tenant: d.Tenant, ID: "WASHER-8", Method: valuations.FIFO, Currency: "EUR", MinorUnit: 2},
	} {
		if _, err := valuations.DefineItem(ctx, d.DB, it); err != nil {
			return err
		}
		d.Printf("%s (%s): +10 @ 10.00, +5 @ 11.01, -7, -5, -3 →", it.ID, it.Method)
		steps := []func(op string) (valuations.Result, error){
			func(op string) (valuations.Result, error) { return demoValReceive(ctx, d, it.ID, op, 10, 1000) },
			func(op string) (valuations.Result, error) { return demoValReceive(ctx, d, it.ID, op, 5, 1101) },
			func(op string) (valuations.Result, error) { return demoValIssue(ctx, d, it.ID, op, 7) },
			func(op string) (valuations.Result, error) { return demoValIssue(ctx, d, it.ID, op, 5) },
			func(op string) (valuations.Result, error) { return demoValIssue(ctx, d, it.ID, op, 3) },
		}
		for i, step := range steps {
			res, err := step(fmt.Sprintf("example-%d", i+1))
			if err != nil {
				return err
			}
			d.Printf(" %s", valSigned(res.ValueChange()))
		}
		b, err := valuations.GetBalance(ctx, d.DB, d.Tenant, it.ID, "WH-1")
		if err != nil {
			return err
		}
		d.Printf("; quantity %s, value %s\n", b.Quantity, b.Value)
	}
	return nil
}

func demoValReceive(ctx context.Context, d *demoEnv, item, op string, quantity, costCents int64) (valuations.Result, error) {
	cost := decimal.MustNew(costCents, 2)
	return valuations.Receive(ctx, d.DB, valuations.ReceiveRequest{Tenant: d.Tenant, Item: item, Location: "WH-1",
		OperationID: op, Quantity: decimal.MustNew(quantity, 0), UnitCost: &cost})
}

func demoValIssue(ctx context.Context, d *demoEnv, item, op string, quantity int64) (valuations.Result, error) {
	return valuations.Issue(ctx, d.DB, valuations.IssueRequest{Tenant: d.Tenant, Item: item, Location: "WH-1",
		OperationID: op, Quantity: decimal.MustNew(quantity, 0)})
}

// Accounts of the demo's inventory book.
const (
	demoValInventory = "1400"
	demoValGRNI      = "2100"
	demoValCOGS      = "5000"
	demoValItem      = "VALVE-12"
)

// demoValSetup defines the item in the stock catalog and for valuation, and
// the book with its currency and accounts. Repeated definitions write nothing.
func demoValSetup(ctx context.Context, d *demoEnv) (*financial.Book, error) {
	if _, err := stockmovement.DefineItem(ctx, d.DB, d.Tenant, stockmovement.Item{ID: demoValItem, Name: "Ball valve 1/2 inch"}); err != nil {
		return nil, err
	}
	if _, err := stockmovement.DefineLocation(ctx, d.DB, d.Tenant, stockmovement.Location{ID: "WH-1", Name: "Warehouse 1"}); err != nil {
		return nil, err
	}
	if _, err := valuations.DefineItem(ctx, d.DB, valuations.Item{Tenant: d.Tenant, ID: demoValItem,
		Method: valuations.MovingAverage, Currency: "EUR", MinorUnit: 2}); err != nil {
		return nil, err
	}
	book, err := financial.NewBook(d.DB, d.Tenant, "inventory")
	if err != nil {
		return nil, err
	}
	if _, err := book.AddCurrency(ctx, financial.Currency{Code: "EUR", Exponent: 2}); err != nil {
		return nil, err
	}
	for _, a := range []financial.Account{
		{Code: demoValInventory, Name: "Inventory", Type: financial.Asset},
		{Code: demoValGRNI, Name: "Goods received not invoiced", Type: financial.Liability},
		{Code: demoValCOGS, Name: "Cost of goods sold", Type: financial.Expense},
	} {
		if _, err := book.AddAccount(ctx, a); err != nil {
			return nil, err
		}
	}
	return book, nil
}

// demoValPurchase writes one goods receipt in the caller's transaction: the
// stock movement (key = the operation id), both valuation entries (id:qty,
// id:value) and the posting Dr Inventory / Cr GRNI (key = the operation id)
// for the value change the valuation computed.
func demoValPurchase(tx *chain.Tx, book *financial.Book, tenant, op string, quantity, unitCost decimal.Decimal) (valuations.Result, financial.PostingResult, error) {
	if _, err := stockmovement.ReceiveTx(tx, stockmovement.ReceiveRequest{Tenant: tenant, Item: demoValItem, Location: "WH-1",
		Quantity: quantity, Reference: op, IdempotencyKey: op}); err != nil {
		return valuations.Result{}, financial.PostingResult{}, err
	}
	val, err := valuations.ReceiveTx(tx, valuations.ReceiveRequest{Tenant: tenant, Item: demoValItem, Location: "WH-1",
		OperationID: op, Quantity: quantity, UnitCost: &unitCost})
	if err != nil {
		return valuations.Result{}, financial.PostingResult{}, err
	}
	posting, err := book.PostTx(tx, financial.Posting{Key: op, Date: financial.MustParseDate("2026-11-02"), Reference: op,
		Memo: "goods receipt", Lines: []financial.Line{
			{Account: demoValInventory, Side: financial.Debit, Amount: val.ValueChange(), Currency: "EUR"},
			{Account: demoValGRNI, Side: financial.Credit, Amount: val.ValueChange(), Currency: "EUR"}}})
	return val, posting, err
}

// demoValSale writes one sales issue: the stock movement, the valuation
// entries and the cost of goods sold, Dr COGS / Cr Inventory, from the
// issue's computed value change.
func demoValSale(tx *chain.Tx, book *financial.Book, tenant, op string, quantity decimal.Decimal) (valuations.Result, financial.PostingResult, error) {
	if _, err := stockmovement.IssueTx(tx, stockmovement.IssueRequest{Tenant: tenant, Item: demoValItem, Location: "WH-1",
		Quantity: quantity, Reference: op, IdempotencyKey: op}); err != nil {
		return valuations.Result{}, financial.PostingResult{}, err
	}
	val, err := valuations.IssueTx(tx, valuations.IssueRequest{Tenant: tenant, Item: demoValItem, Location: "WH-1",
		OperationID: op, Quantity: quantity})
	if err != nil {
		return valuations.Result{}, financial.PostingResult{}, err
	}
	cost, err := val.ValueChange().Neg()
	if err != nil {
		return valuations.Result{}, financial.PostingResult{}, err
	}
	posting, err := book.PostTx(tx, financial.Posting{Key: op, Date: financial.MustParseDate("2026-11-03"), Reference: op,
		Memo: "cost of goods sold", Lines: []financial.Line{
			{Account: demoValCOGS, Side: financial.Debit, Amount: cost, Currency: "EUR"},
			{Account: demoValInventory, Side: financial.Credit, Amount: cost, Currency: "EUR"}}})
	return val, posting, err
}

func demoValComposition(ctx context.Context, d *demoEnv) error {
	book, err := demoValSetup(ctx, d)
	if err != nil {
		return err
	}
	run := func() (receipt, sale valuations.Result, err error) {
		err = d.DB.Update(ctx, func(tx *chain.Tx) error {
			var err error
			receipt, _, err = demoValPurchase(tx, book, d.Tenant, "po-2026-0107", decimal.MustNew(12, 0), decimal.MustNew(825, 2))
			return err
		})
		if err != nil {
			return
		}
		err = d.DB.Update(ctx, func(tx *chain.Tx) error {
			var err error
			sale, _, err = demoValSale(tx, book, d.Tenant, "so-2026-0311", decimal.MustNew(5, 0))
			return err
		})
		return
	}
	receipt, sale, err := run()
	if err != nil {
		return err
	}
	d.Printf("purchase receipt po-2026-0107: stock +12, valuation %s (%s:qty, %s:value), posting Dr %s / Cr %s %s\n",
		valSigned(receipt.ValueChange()), "po-2026-0107", "po-2026-0107", demoValInventory, demoValGRNI, receipt.ValueChange())
	d.Printf("sales issue so-2026-0311: stock -5, valuation %s, cost of goods sold Dr %s / Cr %s\n",
		sale.ValueChange(), demoValCOGS, demoValInventory)
	inventory, err := book.Balance(ctx, demoValInventory, "EUR")
	if err != nil {
		return err
	}
	stock, err := valuations.GetBalance(ctx, d.DB, d.Tenant, demoValItem, "WH-1")
	if err != nil {
		return err
	}
	d.Printf("book %s/inventory, account %s Inventory: %s EUR = stock value of %s %s at WH-1: %s EUR\n",
		d.Tenant, demoValInventory, inventory.Amount, stock.Quantity, demoValItem, stock.Value)
	before, err := d.DB.Stats(ctx)
	if err != nil {
		return err
	}
	receipt, sale, err = run()
	if err != nil {
		return err
	}
	after, err := d.DB.Stats(ctx)
	if err != nil {
		return err
	}
	if !receipt.Replayed || !sale.Replayed || after.Entries != before.Entries {
		return fmt.Errorf("the retried receipt and sale wrote %d entries", after.Entries-before.Entries)
	}
	d.Printf("both transactions retried: replayed=true, %d entries written\n", after.Entries-before.Entries)
	d.Replayed(2)
	return nil
}

func demoValNegativeStock(ctx context.Context, d *demoEnv) error {
	it := valuations.Item{Tenant: d.Tenant, ID: "GASKET-3", Method: valuations.FIFO, Currency: "EUR", MinorUnit: 2, AllowNegative: true}
	if _, err := valuations.DefineItem(ctx, d.DB, it); err != nil {
		return err
	}
	if _, err := demoValReceive(ctx, d, it.ID, "neg-1", 4, 250); err != nil {
		return err
	}
	issue, err := demoValIssue(ctx, d, it.ID, "neg-2", 6)
	if err != nil {
		return err
	}
	d.Printf("%s: +4 @ 2.50, then -6: value change %s, quantity %s, value %s (2 estimated at the last rate)\n",
		it.ID, issue.ValueChange(), issue.Legs[0].Quantity, issue.Legs[0].Value)
	receipt, err := demoValReceive(ctx, d, it.ID, "neg-3", 10, 275)
	if err != nil {
		return err
	}
	d.Printf("+10 @ 2.75: value change %s, quantity %s, value %s\n", receipt.ValueChange(), receipt.Legs[0].Quantity, receipt.Legs[0].Value)
	for _, st := range receipt.Legs[0].Settlements {
		d.Printf("  settles %s: %s units estimated %s, actual %s, correction %s\n", st.OperationID, st.Quantity, st.Estimated, st.Actual, valSigned(st.Correction))
	}
	_, err = valuations.Issue(ctx, d.DB, valuations.IssueRequest{Tenant: d.Tenant, Item: "NUT-M8", Location: "WH-1",
		OperationID: "too-many", Quantity: decimal.MustNew(1, 0)})
	if !errors.Is(err, valuations.ErrInsufficientStock) {
		return fmt.Errorf("an issue beyond the stock of an item that refuses negative stock: %v", err)
	}
	d.Printf("NUT-M8 refuses negative stock (exit code %d from ledgerctl val issue): %v\n", exitUsage, err)
	d.Refused()
	return nil
}
