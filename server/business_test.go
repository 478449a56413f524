package server_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/server"
)

// A purchase receipt and a sales issue each write stock, valuation,
// journal and an outbox message in one transaction; retries replay them,
// and the four agree.
func TestBusinessEvents(t *testing.T) {
	forEachBackend(t, server.Options{}, func(t *testing.T, ts *testServer) {
		token := ts.key("acme", allScopes...)
		fixture(t, ts, token) // a receipt po-1 of 10 @ 8.25 at WH-1
		sale := api.SalesIssueRequest{Item: "SKU-1", Location: "WH-1", Quantity: "4", Date: "2026-11-03",
			CostAccount: "5000", InventoryAccount: "1400", Reference: "so-1"}
		first := ts.do(http.MethodPost, "/v1/sales-issues", token, "so-1", sale)
		var ev api.BusinessEvent
		first.decode(t, http.StatusCreated, &ev)
		again := ts.do(http.MethodPost, "/v1/sales-issues", token, "so-1", sale)
		if again.header.Get(api.HeaderReplayed) != "true" || !bytes.Equal(again.body, first.body) {
			t.Fatalf("retry: %q %s", again.header.Get(api.HeaderReplayed), again.body)
		}
		if ev.Stock.Entries[0].Quantity != "-4" || ev.Stock.Entries[0].Balance != "6" || ev.Valuation.Legs[0].ValueChange != "-33.00" ||
			ev.Posting.Lines[0].Amount != "33.00" || ev.Posting.Lines[0].Account != "5000" || ev.Message.Topic != api.TopicDefault {
			t.Fatalf("sales issue %+v", ev)
		}
		if ev.Stock.Entries[0].IdempotencyKey != ev.Operation || ev.Posting.Key != ev.Operation || ev.Message.IdempotencyKey != ev.Operation {
			t.Fatalf("keys not derived from one operation id %q: %+v", ev.Operation, ev)
		}
		var msg api.BusinessMessage
		if err := json.Unmarshal([]byte(ev.Message.Payload), &msg); err != nil || msg.Event != "sales_issue" || msg.Value != "33.00" {
			t.Fatalf("message %q: %+v %v", ev.Message.Payload, msg, err)
		}
		// The four agree: stock, valuation, the inventory account, the outbox.
		var stock api.StockBalance
		ts.do(http.MethodGet, "/v1/stock/balances/SKU-1/WH-1", token, "", nil).decode(t, http.StatusOK, &stock)
		var val api.ValBalanceList
		ts.do(http.MethodGet, "/v1/val/balances/SKU-1/WH-1", token, "", nil).decode(t, http.StatusOK, &val)
		var inventory api.FinBalance
		ts.do(http.MethodGet, "/v1/fin/books/main/balances/1400/EUR", token, "", nil).decode(t, http.StatusOK, &inventory)
		var msgs api.OutboxMessageList
		ts.do(http.MethodGet, "/v1/outbox/messages", token, "", nil).decode(t, http.StatusOK, &msgs)
		if stock.Quantity != "6" || val.Balances[0].Quantity != "6" || val.Balances[0].Value != "49.50" ||
			inventory.Amount != "49.50" || len(msgs.Messages) != 2 {
			t.Fatalf("stock %+v valuation %+v inventory %+v messages %d", stock, val, inventory, len(msgs.Messages))
		}
		var tb api.FinTrialBalance
		ts.do(http.MethodGet, "/v1/fin/books/main/trial-balance", token, "", nil).decode(t, http.StatusOK, &tb)
		if len(tb.Totals) != 1 || tb.Totals[0].Net != "0.00" {
			t.Fatalf("trial balance %+v", tb)
		}
		var rep api.VerifyReport
		ts.do(http.MethodPost, "/v1/verify", token, "", nil).decode(t, http.StatusOK, &rep)
		if !rep.OK || rep.Chains == 0 {
			t.Fatalf("verify %+v", rep)
		}
	})
}

// The domain routes do what the command line does: movements, a transfer
// and its reversal, history pages, a posting and its reversal, valuation
// operations and FIFO layers.
func TestDomainRoutes(t *testing.T) {
	db := openBolt(t)
	ts := startServer(t, db, server.Options{})
	token := ts.key("acme", allScopes...)
	fixture(t, ts, token)
	post := func(path, key string, body any, v any) {
		t.Helper()
		ts.do(http.MethodPost, path, token, key, body).decode(t, http.StatusCreated, v)
	}
	var res api.StockResult
	post("/v1/stock/transfers", "t-1", api.StockTransferRequest{Item: "SKU-1", From: "WH-1", To: "WH-2", Quantity: "3"}, &res)
	if len(res.Entries) != 2 || res.Entries[1].Balance != "3" {
		t.Fatalf("transfer %+v", res)
	}
	post("/v1/stock/reversals", "r-1", api.StockReversalRequest{Chain: res.Entries[0].Chain, Seq: res.Entries[0].Seq}, &res)
	post("/v1/stock/adjustments", "a-1", api.StockAdjustmentRequest{Item: "SKU-1", Location: "WH-1", Quantity: "-1", Reason: "count"}, &res)
	var total api.StockTotal
	ts.do(http.MethodGet, "/v1/stock/balances/SKU-1", token, "", nil).decode(t, http.StatusOK, &total)
	if total.Total != "9" {
		t.Fatalf("total %+v", total)
	}
	var hist api.StockHistory
	ts.do(http.MethodGet, "/v1/stock/history/SKU-1/WH-1?limit=2", token, "", nil).decode(t, http.StatusOK, &hist)
	if len(hist.Entries) != 2 || hist.NextSeq != 3 || hist.Chain != "stock/SKU-1/WH-1" {
		t.Fatalf("history %+v", hist)
	}
	var p api.FinPosting
	post("/v1/fin/books/main/postings", "p-1", api.FinPostingRequest{Date: "2026-11-04", Memo: "landed cost", Lines: []api.PostingLine{
		{Account: "1400", Side: "debit", Amount: "5.00", Currency: "EUR"}, {Account: "2100", Side: "credit", Amount: "5.00", Currency: "EUR"}}}, &p)
	var rev api.FinPosting
	post("/v1/fin/books/main/reversals", "p-1-rev", api.FinReversalRequest{Seq: p.Seq}, &rev)
	if rev.Reverses != p.Seq || rev.Date != "2026-11-04" || p.Journal != "fin/main/journal" {
		t.Fatalf("posting %+v reversal %+v", p, rev)
	}
	var got api.FinPosting
	ts.do(http.MethodGet, "/v1/fin/books/main/postings/"+itoa(int(p.Seq)), token, "", nil).decode(t, http.StatusOK, &got)
	if got.Key != p.Key || got.Hash != p.Hash {
		t.Fatalf("posting read back %+v", got)
	}
	var item api.ValItem
	ts.do(http.MethodPost, "/v1/val/items", token, "bolt", api.ValItemRequest{ID: "BOLT", Method: "fifo", Currency: "EUR", MinorUnit: 2}).
		decode(t, http.StatusOK, &item)
	var vr api.ValResult
	post("/v1/val/receipts", "v-1", api.ValReceiptRequest{Item: "BOLT", Location: "WH-1", Quantity: "5", UnitCost: "1.00"}, &vr)
	post("/v1/val/receipts", "v-2", api.ValReceiptRequest{Item: "BOLT", Location: "WH-1", Quantity: "5", Value: "10.00"}, &vr)
	var issue api.ValResult
	post("/v1/val/issues", "v-3", api.ValIssueRequest{Item: "BOLT", Location: "WH-1", Quantity: "6"}, &issue)
	if issue.Legs[0].ValueChange != "-7.00" || issue.Legs[0].ValueChain != "val/BOLT/WH-1/value" {
		t.Fatalf("FIFO issue %+v", issue)
	}
	var layers api.ValLayerList
	ts.do(http.MethodGet, "/v1/val/layers/BOLT/WH-1", token, "", nil).decode(t, http.StatusOK, &layers)
	if len(layers.Layers) != 1 || layers.Layers[0].Quantity != "4" || layers.Layers[0].Value != "8.00" {
		t.Fatalf("layers %+v", layers)
	}
	post("/v1/val/reversals", "v-4", api.ValReversalRequest{Item: "BOLT", Location: "WH-1", Reverses: issue.Operation}, &vr)
	var bal api.ValBalanceList
	ts.do(http.MethodGet, "/v1/val/balances/BOLT", token, "", nil).decode(t, http.StatusOK, &bal)
	if len(bal.Balances) != 1 || bal.Balances[0].Quantity != "10" || bal.Balances[0].Value != "15.00" {
		t.Fatalf("after the reversal %+v", bal)
	}
}
