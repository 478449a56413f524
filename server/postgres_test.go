package server_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/chain/chaintest"
	"github.com/ledgerworks/ledger/idempotency/pgstore"
	"github.com/ledgerworks/ledger/server"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// Two instances on one PostgreSQL database answer as one: a request made
// on one is replayed by the other, byte for byte, and the same key with
// another body is refused there too.
func TestTwoInstancesOnPostgres(t *testing.T) {
	dbA, dbB := chaintest.OpenShared(t)
	url := pgtest.URL(t)
	schema := pgtest.NewSchema(t, url)
	var servers []*testServer
	for _, db := range []*chain.DB{dbA, dbB} {
		store, err := pgstore.Open(context.Background(), url, pgstore.Options{Schema: schema, Migrate: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(store.Close)
		servers = append(servers, startServer(t, db, server.Options{IdempotencyStore: store}))
	}
	a, b := servers[0], servers[1]
	token := a.key("acme", allScopes...)
	fixture(t, a, token)
	receipt := api.PurchaseReceiptRequest{Item: "SKU-1", Location: "WH-1", Quantity: "2", UnitCost: "9.00",
		Date: "2026-11-05", InventoryAccount: "1400", CreditAccount: "2100"}
	first := a.do(http.MethodPost, "/v1/purchase-receipts", token, "po-2", receipt)
	if first.status != http.StatusCreated {
		t.Fatalf("on A: %d %s", first.status, first.body)
	}
	again := b.do(http.MethodPost, "/v1/purchase-receipts", token, "po-2", receipt)
	if again.header.Get(api.HeaderReplayed) != "true" || !bytes.Equal(again.body, first.body) {
		t.Fatalf("on B: %q %s", again.header.Get(api.HeaderReplayed), again.body)
	}
	receipt.Quantity = "3"
	b.do(http.MethodPost, "/v1/purchase-receipts", token, "po-2", receipt).wantProblem(t, http.StatusConflict, api.CodeKeyReused)
	var bal api.StockBalance
	b.do(http.MethodGet, "/v1/stock/balances/SKU-1/WH-1", token, "", nil).decode(t, http.StatusOK, &bal)
	if bal.Quantity != "12" {
		t.Fatalf("balance %+v: want the fixture's 10 and one receipt of 2", bal)
	}
}
