package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/financial"
)

func init() {
	registerDemoStep(30, "financial: currencies and a chart of accounts", demoFinChart)
	registerDemoStep(31, "financial: the day's journal postings", demoFinPostings)
	registerDemoStep(32, "financial: a retry replays, an unbalanced posting is refused, a mistake is reversed", demoFinRules)
	registerDemoStep(33, "financial: balances and the trial balance", demoFinBalances)
}

func demoFinBook(d *demoEnv) (*financial.Book, error) {
	return financial.NewBook(d.DB, d.Tenant, finBookDefault)
}

func demoFinChart(ctx context.Context, d *demoEnv) error {
	b, err := demoFinBook(d)
	if err != nil {
		return err
	}
	for _, c := range []financial.Currency{{Code: "EUR", Exponent: 2}, {Code: "JPY", Exponent: 0}} {
		res, err := b.AddCurrency(ctx, c)
		if err != nil {
			return err
		}
		d.Printf("currency %s (exponent %d) defined at %s seq %d\n", c.Code, c.Exponent, b.Journal(), res.Seq)
	}
	for _, acc := range []financial.Account{
		{Code: "1200", Name: "Trade receivables", Type: financial.Asset},
		{Code: "1400", Name: "Inventory", Type: financial.Asset},
		{Code: "2100", Name: "Goods received not invoiced", Type: financial.Liability},
		{Code: "2300", Name: "VAT payable", Type: financial.Liability},
		{Code: "4000", Name: "Sales", Type: financial.Income},
		{Code: "5000", Name: "Cost of goods sold", Type: financial.Expense},
		{Code: "6100", Name: "Freight", Type: financial.Expense},
	} {
		res, err := b.AddAccount(ctx, acc)
		if err != nil {
			return err
		}
		d.Printf("account %s %-28s %-9s normal %-6s seq %d\n", acc.Code, acc.Name, res.Account.Type, res.Account.NormalSide, res.Seq)
	}
	return nil
}

func eur(units int64) decimal.Decimal { return decimal.MustNew(units, 2) }

// demoFinReceipt is the posting of the flour receipt of the stock steps,
// which the demo retries.
func demoFinReceipt() financial.Posting {
	return financial.Posting{Key: "grn-2026-0042", Date: financial.MustParseDate("2026-11-02"),
		Memo: "250 kg wheat flour received", Reference: "GRN-2026-0042", Lines: []financial.Line{
			{Account: "1400", Side: financial.Debit, Amount: eur(200_00), Currency: "EUR"},
			{Account: "2100", Side: financial.Credit, Amount: eur(200_00), Currency: "EUR"}}}
}

func demoFinPostings(ctx context.Context, d *demoEnv) error {
	b, err := demoFinBook(d)
	if err != nil {
		return err
	}
	postings := []financial.Posting{
		demoFinReceipt(),
		{Key: "inv-7781", Date: financial.MustParseDate("2026-11-02"), Memo: "42.5 kg flour sold", Reference: "INV-7781",
			Lines: []financial.Line{
				{Account: "1200", Side: financial.Debit, Amount: eur(60_69), Currency: "EUR"},
				{Account: "4000", Side: financial.Credit, Amount: eur(51_00), Currency: "EUR"},
				{Account: "2300", Side: financial.Credit, Amount: eur(9_69), Currency: "EUR"},
				{Account: "5000", Side: financial.Debit, Amount: eur(34_00), Currency: "EUR"},
				{Account: "1400", Side: financial.Credit, Amount: eur(34_00), Currency: "EUR"}}},
		// Arrives today, belongs to last week: balances as of earlier dates
		// include it, balances by seq before it do not.
		{Key: "freight-0815", Date: financial.MustParseDate("2026-10-28"), Memo: "freight of October, late invoice",
			Reference: "FRT-0815", Lines: []financial.Line{
				{Account: "6100", Side: financial.Debit, Amount: eur(45_00), Currency: "EUR"},
				{Account: "2100", Side: financial.Credit, Amount: eur(45_00), Currency: "EUR"}}},
		{Key: "freight-0816", Date: financial.MustParseDate("2026-11-02"), Memo: "freight booked twice by mistake",
			Reference: "FRT-0815", Lines: []financial.Line{
				{Account: "6100", Side: financial.Debit, Amount: eur(45_00), Currency: "EUR"},
				{Account: "2100", Side: financial.Credit, Amount: eur(45_00), Currency: "EUR"}}},
	}
	for _, p := range postings {
		res, err := b.Post(ctx, p)
		if err != nil {
			return err
		}
		demoFinPrint(d, res)
	}
	return nil
}

func demoFinRules(ctx context.Context, d *demoEnv) error {
	b, err := demoFinBook(d)
	if err != nil {
		return err
	}
	retry, err := b.Post(ctx, demoFinReceipt())
	if err != nil {
		return err
	}
	if !retry.Replayed {
		return fmt.Errorf("the retried posting was recorded again at seq %d", retry.Seq)
	}
	demoFinPrint(d, retry)
	d.Replayed(1)
	unbalanced := demoFinReceipt()
	unbalanced.Key = "grn-2026-0043"
	unbalanced.Lines[1].Amount = eur(199_99)
	_, err = b.Post(ctx, unbalanced)
	if !errors.Is(err, financial.ErrUnbalanced) || !errors.Is(err, chain.ErrInvalid) {
		return fmt.Errorf("an unbalanced posting: want it refused, got %v", err)
	}
	d.Printf("posting %s: refused (exit code %d from ledgerctl fin post): %v\n", unbalanced.Key, exitUsage, err)
	d.Refused()
	reversal, err := b.Reverse(ctx, financial.Reversal{Key: "freight-0816", Date: financial.MustParseDate("2026-11-02"),
		Memo: "booked twice"})
	if err != nil {
		return err
	}
	demoFinPrint(d, reversal)
	return nil
}

func demoFinBalances(ctx context.Context, d *demoEnv) error {
	b, err := demoFinBook(d)
	if err != nil {
		return err
	}
	for _, account := range []string{"1400", "2100", "6100"} {
		bal, err := b.Balance(ctx, account, "EUR")
		if err != nil {
			return err
		}
		d.Printf("balance %s: %s %s (%s)\n", account, bal.Normal, bal.Currency, bal.NormalSide)
	}
	october, err := b.BalanceAtDate(ctx, "6100", "EUR", financial.MustParseDate("2026-10-31"))
	if err != nil {
		return err
	}
	d.Printf("freight as of 2026-10-31: %s EUR (the late invoice is dated October)\n", october.Amount)
	tb, err := b.TrialBalance(ctx)
	if err != nil {
		return err
	}
	for _, total := range tb.Totals {
		if !total.Net.IsZero() {
			return fmt.Errorf("trial balance in %s is off by %s", total.Currency, total.Net)
		}
		d.Printf("trial balance at journal seq %d: %s debits %s, credits %s, difference %s\n", tb.Seq, total.Currency,
			total.Debit, total.Credit, total.Net)
	}
	return nil
}

func demoFinPrint(d *demoEnv, res financial.PostingResult) {
	p := res.Posting
	what := "posting " + p.Key
	if p.Reverses != 0 {
		what = fmt.Sprintf("reversal of seq %d", p.Reverses)
	}
	suffix := ""
	if res.Replayed {
		suffix = ", replayed=true (nothing written)"
	}
	d.Printf("%s: journal seq %d, dated %s, %d lines%s\n", what, res.Seq, p.Date, len(p.Lines), suffix)
}
