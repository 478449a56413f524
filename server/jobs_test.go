package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/chain/chaintest"
	"github.com/ledgerworks/ledger/server"
)

// The guard's jobs run inside the server: an expired record is purged.
// A retry after that is a new request to the guard, and the ledger's
// UNIQUE(chain, key) on the key derived from it still writes nothing
// twice: the business event is answered as the ledger's replay.
func TestExpiredRecordRetryIsWrittenOnce(t *testing.T) {
	db := openBolt(t)
	ts := startServer(t, db, server.Options{IdempotencyTTL: 100 * time.Millisecond, IdempotencyLease: 50 * time.Millisecond, JobsInterval: 20 * time.Millisecond,
		IdempotencyCacheSize: -1})
	token := ts.key("acme", allScopes...)
	fixture(t, ts, token)
	sale := api.SalesIssueRequest{Item: "SKU-1", Location: "WH-1", Quantity: "1", Date: "2026-11-03",
		CostAccount: "5000", InventoryAccount: "1400"}
	var first, again api.BusinessEvent
	ts.do(http.MethodPost, "/v1/sales-issues", token, "so-9", sale).decode(t, http.StatusCreated, &first)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		records := 0
		for k := range chaintest.TakeSnapshot(t, db).State {
			if strings.HasPrefix(k, "idempotency/r/") {
				records++
			}
		}
		if records == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d guard records left after their TTL", records)
		}
	}
	r := ts.do(http.MethodPost, "/v1/sales-issues", token, "so-9", sale)
	r.decode(t, http.StatusCreated, &again)
	if r.header.Get(api.HeaderReplayed) != "" || !again.Stock.Replayed || !again.Valuation.Replayed || !again.Posting.Replayed ||
		again.Operation != first.Operation || again.Posting.Seq != first.Posting.Seq {
		t.Fatalf("retry after the record expired: %s", r.body)
	}
	var bal api.StockBalance
	ts.do(http.MethodGet, "/v1/stock/balances/SKU-1/WH-1", token, "", nil).decode(t, http.StatusOK, &bal)
	if bal.Quantity != "9" {
		t.Fatalf("balance %s: the sale was written twice", bal.Quantity)
	}
}
