package stockmovement_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/stockmovement"
)

func Example() {
	dir, _ := os.MkdirTemp("", "stock-example-")
	defer os.RemoveAll(dir)
	db, err := chain.Open(filepath.Join(dir, "ledger.db"), chain.Options{})
	if err != nil {
		panic(err)
	}
	defer db.Close()
	ctx := context.Background()
	stockmovement.DefineItem(ctx, db, "acme", stockmovement.Item{ID: "FLOUR", Scale: 3})
	stockmovement.DefineLocation(ctx, db, "acme", stockmovement.Location{ID: "WH-1"})
	stockmovement.DefineLocation(ctx, db, "acme", stockmovement.Location{ID: "WH-2"})

	receipt := stockmovement.ReceiveRequest{Tenant: "acme", Item: "FLOUR", Location: "WH-1",
		Quantity: decimal.MustNew(12_500, 3), Reference: "GRN-1", IdempotencyKey: "grn-1"}
	first, _ := stockmovement.Receive(ctx, db, receipt)
	retry, _ := stockmovement.Receive(ctx, db, receipt) // a retry: the original entry, nothing written
	fmt.Println(first.Entries[0].Balance, retry.Replayed, retry.Entries[0].Seq)

	stockmovement.Transfer(ctx, db, stockmovement.TransferRequest{Tenant: "acme", Item: "FLOUR",
		From: "WH-1", To: "WH-2", Quantity: decimal.MustNew(2_000, 3), IdempotencyKey: "tr-1"})
	_, err = stockmovement.Issue(ctx, db, stockmovement.IssueRequest{Tenant: "acme", Item: "FLOUR",
		Location: "WH-2", Quantity: decimal.MustNew(3_000, 3), IdempotencyKey: "pick-1"})
	fmt.Println(err)

	wh1, _ := stockmovement.GetBalance(ctx, db, "acme", "FLOUR", "WH-1")
	total, _ := stockmovement.ItemTotal(ctx, db, "acme", "FLOUR")
	fmt.Println(wh1.Quantity, total)
	// Output:
	// 12.500 true 1
	// stockmovement: issue: negative stock refused: item "FLOUR" at location "WH-2" has 2.000, change -3.000 is short by 1.000
	// 10.500 12.500
}
