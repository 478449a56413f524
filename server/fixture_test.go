package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/server"
)

var allScopes = []apikey.Scope{apikey.ScopeRead, apikey.ScopeWrite, apikey.ScopeAdmin}

// samplePath fills a route's path parameters with the fixture's names.
func samplePath(rt *server.Route) string {
	r := strings.NewReplacer("{name}", "orders", "{seq}", "1", "{item}", "SKU-1", "{location}", "WH-1",
		"{book}", "main", "{code}", "1400", "{account}", "1400", "{currency}", "EUR", "{id}", "0000000000000000",
		"{provider}", "hooks")
	return r.Replace(rt.Path)
}

// fixture defines, for the tenant of token, what the routes name: an item
// in both catalogs, two locations, a book with EUR and three accounts, a
// receipt, a posting and a raw entry.
func fixture(t *testing.T, ts *testServer, token string) {
	t.Helper()
	steps := []struct {
		path string
		body any
	}{
		{"/v1/stock/items", api.StockItemRequest{ID: "SKU-1", Name: "Valve"}},
		{"/v1/stock/locations", api.StockLocationRequest{ID: "WH-1"}},
		{"/v1/stock/locations", api.StockLocationRequest{ID: "WH-2"}},
		{"/v1/val/items", api.ValItemRequest{ID: "SKU-1", Method: "moving_average", Currency: "EUR", MinorUnit: 2}},
		{"/v1/fin/books/main/currencies", api.FinCurrencyRequest{Code: "EUR", Exponent: 2}},
		{"/v1/fin/books/main/accounts", api.FinAccountRequest{Code: "1400", Name: "Inventory", Type: "asset"}},
		{"/v1/fin/books/main/accounts", api.FinAccountRequest{Code: "2100", Name: "Goods received not invoiced", Type: "liability"}},
		{"/v1/fin/books/main/accounts", api.FinAccountRequest{Code: "5000", Name: "Cost of goods sold", Type: "expense"}},
		{"/v1/purchase-receipts", api.PurchaseReceiptRequest{Item: "SKU-1", Location: "WH-1", Quantity: "10", UnitCost: "8.25",
			Date: "2026-11-02", InventoryAccount: "1400", CreditAccount: "2100", Reference: "po-1"}},
		{"/v1/chains/orders/entries", api.AppendRequest{Type: "order/v1", Payload: []byte("{}")}},
	}
	for i, st := range steps {
		r := ts.do(http.MethodPost, st.path, token, "fixture-"+itoa(i), st.body)
		if r.status >= 300 {
			t.Fatalf("fixture %s: %d %s", st.path, r.status, r.body)
		}
	}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}
