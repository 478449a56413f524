package client_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/client"
	"github.com/ledgerworks/ledger/server"
	"github.com/ledgerworks/ledger/server/servertest"
)

// TestTourOfTheAPI calls the typed methods against an in-process server on
// 127.0.0.1 and checks that each answer decodes into what was written: a
// day of a tenant through every domain.
func TestTourOfTheAPI(t *testing.T) {
	t.Parallel()
	db, err := chain.Open(filepath.Join(t.TempDir(), "ledger.db"), chain.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	token := servertest.Key(t, db, tenant, apikey.ScopeRead, apikey.ScopeWrite, apikey.ScopeAdmin)
	r := servertest.Start(t, server.Options{DB: db})
	c := newClient(t, r.URL, token, client.Options{})
	ctx := context.Background()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	if h, err := c.Health(ctx); err != nil || h.Status != "ok" {
		t.Fatalf("health %+v, %v", h, err)
	}
	if h, err := c.Ready(ctx); err != nil || h.Status != "ok" {
		t.Fatalf("ready %+v, %v", h, err)
	}

	// Raw entries.
	for i := range 3 {
		_, err := c.AppendEntry(ctx, "audit/erp-events", api.AppendRequest{Type: "audit.event/v1", Payload: []byte{byte('a' + i)}})
		must("append", err)
	}
	page, err := c.Entries(ctx, "audit/erp-events", 2, 5)
	must("entries", err)
	if len(page.Entries) != 2 || page.Entries[0].Seq != 2 || string(page.Entries[1].Payload) != "c" || page.NextSeq != 0 {
		t.Fatalf("page %+v", page)
	}
	e, err := c.Entry(ctx, "audit/erp-events", 1)
	must("entry", err)
	if head, err := c.Head(ctx, "audit/erp-events"); err != nil || head.Seq != 3 || e.Hash == head.Hash || e.Chain != "audit/erp-events" {
		t.Fatalf("head %+v, %v; entry %+v", head, err, e)
	}

	// Stock, valuation and the journal, then the composed events.
	defineCatalog(t, ctx, c)
	must("location", func() error { _, err := c.DefineStockLocation(ctx, api.StockLocationRequest{ID: "WH-2"}); return err }())
	must("cogs", func() error {
		_, err := c.DefineAccount(ctx, testBook, api.FinAccountRequest{Code: "5000", Name: "Cost of goods sold", Type: "expense"})
		return err
	}())
	items, err := c.StockItems(ctx)
	must("items", err)
	locations, err := c.StockLocations(ctx)
	must("locations", err)
	valItems, err := c.ValItems(ctx)
	must("val items", err)
	if len(items.Items) != 1 || len(locations.Locations) != 2 || len(valItems.Items) != 1 || valItems.Items[0].Method != "moving_average" {
		t.Fatalf("catalog %+v %+v %+v", items, locations, valItems)
	}
	first, err := c.PurchaseReceipt(ctx, receipt(9)) // 1 sack at 2.50
	must("purchase receipt", err)
	_, err = c.PurchaseReceipt(ctx, receipt(3)) // 4 sacks
	must("purchase receipt", err)
	sale, err := c.SalesIssue(ctx, api.SalesIssueRequest{Item: testItem, Location: testLocation, Quantity: "2", Date: "2026-12-01",
		CostAccount: "5000", InventoryAccount: testInventory, Reference: "SO-1"})
	must("sales issue", err)
	if first.Posting.Seq == 0 || sale.Valuation.Legs[0].ValueChange != "-5.00" || sale.Message.ID == first.Message.ID {
		t.Fatalf("receipt %+v, sale %+v", first, sale)
	}
	moved, err := c.StockTransfer(ctx, api.StockTransferRequest{Item: testItem, From: testLocation, To: "WH-2", Quantity: "1"})
	must("transfer", err)
	if len(moved.Entries) != 2 || moved.Replayed {
		t.Fatalf("transfer %+v", moved)
	}
	total, err := c.StockTotal(ctx, testItem)
	must("stock total", err)
	if total.Total != "3" || len(total.Balances) != 2 {
		t.Fatalf("stock total %+v", total)
	}
	tb, err := c.TrialBalance(ctx, testBook)
	must("trial balance", err)
	if len(tb.Totals) != 1 || tb.Totals[0].Net != "0.00" || tb.Totals[0].Debit != "12.50" {
		t.Fatalf("trial balance %+v", tb)
	}
	p, err := c.Posting(ctx, testBook, first.Posting.Seq)
	must("posting", err)
	byKey, err := c.PostingByKey(ctx, testBook, first.Posting.Key)
	must("posting by key", err)
	if p.Seq != first.Posting.Seq || byKey.Seq != p.Seq || len(p.Lines) != 2 {
		t.Fatalf("posting %+v, by key %+v", p, byKey)
	}
	balances, err := c.AccountBalances(ctx, testBook, testInventory)
	must("account balances", err)
	if len(balances.Balances) != 1 || balances.Balances[0].Amount != "7.50" {
		t.Fatalf("inventory %+v", balances)
	}
	vals, err := c.ValBalances(ctx, testItem)
	must("val balances", err)
	if len(vals.Balances) == 0 {
		t.Fatalf("valuation %+v", vals)
	}

	// The outbox and the keys.
	msgs, err := c.OutboxMessages(ctx, client.OutboxFilter{Topic: api.TopicDefault})
	must("outbox messages", err)
	if len(msgs.Messages) != 3 {
		t.Fatalf("outbox %+v: want the three business events' messages", msgs)
	}
	hist, err := c.OutboxMessage(ctx, sale.Message.ID)
	must("outbox message", err)
	dead, err := c.DeadMessages(ctx, "")
	must("dead", err)
	if hist.Message.ID != sale.Message.ID || len(dead.Messages) != 0 {
		t.Fatalf("message %+v, dead %+v", hist, dead)
	}
	created, err := c.CreateAPIKey(ctx, api.APIKeyRequest{Name: "reader", Scopes: []string{"read"}})
	must("create key", err)
	keys, err := c.APIKeys(ctx)
	must("keys", err)
	revoked, err := c.RevokeAPIKey(ctx, created.Key.ID)
	must("revoke", err)
	if created.Token == "" || len(keys.Keys) != 2 || revoked.RevokedUnixNano == 0 {
		t.Fatalf("created %+v, keys %+v, revoked %+v", created, keys, revoked)
	}
	report, err := c.Verify(ctx, api.VerifyRequest{})
	if err != nil || !report.OK || report.Entries == 0 {
		t.Fatalf("verify %+v, %v", report, err)
	}
}
