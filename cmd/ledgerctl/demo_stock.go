package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/stockmovement"
)

func init() {
	registerDemoStep(20, "stock: items, locations and goods receipts", demoStockReceipts)
	registerDemoStep(21, "stock: an issue, a transfer and the reversal of a mistaken receipt", demoStockMovements)
	registerDemoStep(22, "stock: a retried receipt replays, an issue beyond the balance is refused", demoStockRules)
}

// demoStockReceipt is the receipt the demo retries.
func demoStockReceipt(d *demoEnv) stockmovement.ReceiveRequest {
	return stockmovement.ReceiveRequest{Tenant: d.Tenant, Item: "FLOUR-405", Location: "WH-1",
		Quantity: decimal.MustNew(250_000, 3), Reference: "GRN-2026-0042", Note: "25 sacks of 10 kg",
		IdempotencyKey: "grn-2026-0042-line-1"}
}

func demoStockReceipts(ctx context.Context, d *demoEnv) error {
	items := []stockmovement.Item{
		{ID: "FLOUR-405", Name: "Wheat flour type 405, kg", Scale: 3},
		{ID: "SACK-10", Name: "Paper sack 10 kg, pieces"},
	}
	for _, it := range items {
		res, err := stockmovement.DefineItem(ctx, d.DB, d.Tenant, it)
		if err != nil {
			return err
		}
		d.Printf("item %s (scale %d) defined at catalog seq %d\n", res.ID, res.Scale, res.Seq)
	}
	for _, id := range []string{"WH-1", "WH-2"} {
		res, err := stockmovement.DefineLocation(ctx, d.DB, d.Tenant, stockmovement.Location{ID: id, Name: "Warehouse " + id[3:]})
		if err != nil {
			return err
		}
		d.Printf("location %s defined at catalog seq %d\n", res.ID, res.Seq)
	}
	receipts := []stockmovement.ReceiveRequest{
		demoStockReceipt(d),
		{Tenant: d.Tenant, Item: "SACK-10", Location: "WH-1", Quantity: decimal.MustNew(500, 0),
			Reference: "GRN-2026-0043", IdempotencyKey: "grn-2026-0043-line-1"},
		{Tenant: d.Tenant, Item: "SACK-10", Location: "WH-1", Quantity: decimal.MustNew(50, 0),
			Reference: "GRN-2026-0044", Note: "booked twice by mistake", IdempotencyKey: "grn-2026-0044-line-1"},
	}
	for _, r := range receipts {
		res, err := stockmovement.Receive(ctx, d.DB, r)
		if err != nil {
			return err
		}
		demoStockPrint(d, res)
	}
	return nil
}

func demoStockMovements(ctx context.Context, d *demoEnv) error {
	issue, err := stockmovement.Issue(ctx, d.DB, stockmovement.IssueRequest{Tenant: d.Tenant, Item: "FLOUR-405",
		Location: "WH-1", Quantity: decimal.MustNew(42_500, 3), Reference: "PO-7781", IdempotencyKey: "pick-7781-1"})
	if err != nil {
		return err
	}
	demoStockPrint(d, issue)
	transfer, err := stockmovement.Transfer(ctx, d.DB, stockmovement.TransferRequest{Tenant: d.Tenant, Item: "FLOUR-405",
		From: "WH-1", To: "WH-2", Quantity: decimal.MustNew(100_000, 3), Reference: "TR-0012", IdempotencyKey: "tr-0012"})
	if err != nil {
		return err
	}
	demoStockPrint(d, transfer)
	mistaken, err := stockmovement.MovementChain(d.Tenant, "SACK-10", "WH-1")
	if err != nil {
		return err
	}
	reversal, err := stockmovement.Reverse(ctx, d.DB, stockmovement.ReverseRequest{Tenant: d.Tenant,
		Original: stockmovement.Ref{Chain: mistaken, Seq: 2}, Reference: "GRN-2026-0044-CANCEL", IdempotencyKey: "cancel-grn-2026-0044"})
	if err != nil {
		return err
	}
	demoStockPrint(d, reversal)
	return nil
}

func demoStockRules(ctx context.Context, d *demoEnv) error {
	retry, err := stockmovement.Receive(ctx, d.DB, demoStockReceipt(d))
	if err != nil {
		return err
	}
	if !retry.Replayed {
		return fmt.Errorf("the retried receipt was recorded again at seq %d", retry.Entries[0].Seq)
	}
	demoStockPrint(d, retry)
	d.Replayed(1)
	_, err = stockmovement.Issue(ctx, d.DB, stockmovement.IssueRequest{Tenant: d.Tenant, Item: "FLOUR-405",
		Location: "WH-2", Quantity: decimal.MustNew(120_000, 3), Reference: "PO-7790", IdempotencyKey: "pick-7790-1"})
	var short *stockmovement.InsufficientStockError
	if !errors.As(err, &short) {
		return fmt.Errorf("issuing 120 kg from 100 kg: want negative stock refused, got %v", err)
	}
	d.Printf("issue of 120.000 FLOUR-405 from WH-2: refused, short by %s (exit code %d from ledgerctl stock issue)\n",
		short.Shortfall, exitUsage)
	d.Refused()
	for _, item := range []string{"FLOUR-405", "SACK-10"} {
		balances, err := stockmovement.ItemBalances(ctx, d.DB, d.Tenant, item)
		if err != nil {
			return err
		}
		total, err := stockmovement.ItemTotal(ctx, d.DB, d.Tenant, item)
		if err != nil {
			return err
		}
		for _, b := range balances {
			d.Printf("balance %s at %s: %s\n", item, b.Location, b.Quantity)
		}
		d.Printf("total %s: %s\n", item, total)
	}
	return nil
}

func demoStockPrint(d *demoEnv, res stockmovement.Result) {
	for _, e := range res.Entries {
		suffix := ""
		if res.Replayed {
			suffix = ", replayed=true (nothing written)"
		}
		d.Printf("%s seq %d: %s %s, balance %s, key %s%s\n", e.Chain, e.Seq, e.Kind, signed(e.Quantity), e.Balance,
			e.IdempotencyKey, suffix)
	}
}
