package financial_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/financial"
)

func Example() {
	dir, _ := os.MkdirTemp("", "financial-example-")
	defer os.RemoveAll(dir)
	db, err := chain.Open(filepath.Join(dir, "ledger.db"), chain.Options{})
	if err != nil {
		panic(err)
	}
	defer db.Close()
	ctx := context.Background()
	b, _ := financial.NewBook(db, "acme", "main")
	b.AddCurrency(ctx, financial.Currency{Code: "EUR", Exponent: 2})
	b.AddAccount(ctx, financial.Account{Code: "1400", Name: "Inventory", Type: financial.Asset})
	b.AddAccount(ctx, financial.Account{Code: "2100", Name: "Goods received", Type: financial.Liability})

	receipt := financial.Posting{Key: "grn-42", Date: financial.MustParseDate("2026-11-02"), Lines: []financial.Line{
		{Account: "1400", Side: financial.Debit, Amount: decimal.MustNew(125000, 2), Currency: "EUR"},
		{Account: "2100", Side: financial.Credit, Amount: decimal.MustNew(125000, 2), Currency: "EUR"}}}
	first, _ := b.Post(ctx, receipt)
	retry, _ := b.Post(ctx, receipt)
	fmt.Println("seq", first.Seq, "retry seq", retry.Seq, "replayed", retry.Replayed)

	receipt.Key, receipt.Lines[1].Amount = "grn-43", decimal.MustNew(124999, 2)
	_, err = b.Post(ctx, receipt)
	fmt.Println(err)

	bal, _ := b.Balance(ctx, "2100", "EUR")
	fmt.Println("2100:", bal.Amount, "normal", bal.Normal, bal.NormalSide)
	october, _ := b.BalanceAtDate(ctx, "2100", "EUR", financial.MustParseDate("2026-10-31"))
	fmt.Println("2100 as of 2026-10-31:", october.Amount)
	// Output:
	// seq 4 retry seq 4 replayed true
	// financial: posting does not balance: EUR debits 1250.00, credits 1249.99, difference 0.01
	// 2100: -1250.00 normal 1250.00 credit
	// 2100 as of 2026-10-31: 0.00
}
