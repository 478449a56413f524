package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/chain/chaintest"
	"github.com/ledgerworks/ledger/server"
)

// ledgerSnapshot is everything the ledger holds but the replay guard's
// records, which remember each refusal so that its retry gets the same
// answer.
func ledgerSnapshot(t *testing.T, ts *testServer) chaintest.Snapshot {
	s := chaintest.TakeSnapshot(t, ts.db)
	for k := range s.State {
		if strings.HasPrefix(k, "idempotency/") {
			delete(s.State, k)
		}
	}
	return s
}

// badCase is one bad request of a route.
type badCase struct {
	name, path, key string
	body            any
}

// badCases are the bad requests of a route: no Idempotency-Key, bodies that
// are not its JSON type or lack its fields, query and path parameters that
// do not parse.
func badCases(rt *server.Route, n *int) []badCase {
	key := func() string { *n++; return "bad-" + itoa(*n) }
	path := samplePath(rt)
	var cases []badCase
	if rt.Guarded {
		cases = append(cases, badCase{"no Idempotency-Key", path, "", "{}"})
	}
	if rt.Request != nil && rt.Scope != "" {
		for _, body := range []string{"{", `{"no_such_field":1}`, "[]", `"text"`, "{}", `{} {}`} {
			if body == "{}" && rt.ID == "verify" { // verify every chain: valid
				continue
			}
			cases = append(cases, badCase{"body " + body, path, key(), body})
		}
	}
	for _, q := range rt.Query {
		switch {
		case q.Type == "integer", q.Type == "int64", q.Name == "at_time", q.Name == "as_of", q.Name == "status", q.Name == "key":
			cases = append(cases, badCase{"query " + q.Name, path + "?" + q.Name + "=x!", key(), bodyOf(rt)})
		}
	}
	if strings.Contains(rt.Path, "{seq}") {
		cases = append(cases, badCase{"seq", strings.Replace(path, "/1", "/one", 1), key(), nil})
	}
	switch rt.ID {
	case "apikeys.revoke", "fin.accounts.close":
		cases = append(cases, badCase{"unknown", strings.Replace(strings.Replace(path, "0000000000000000", "ffffffffffffffff", 1), "/1400/", "/9999/", 1), key(), nil})
	case "entries.append":
		for _, domain := range []string{"stock", "fin", "val", "outbox", "inbox"} {
			cases = append(cases, badCase{"domain chain " + domain, "/v1/chains/" + domain + "/x/entries", key(),
				api.AppendRequest{Type: "t", Payload: []byte("p")}})
		}
		cases = append(cases, badCase{"bad type", path, key(), api.AppendRequest{Type: "", Payload: []byte("p")}},
			badCase{"unsafe name", "/v1/chains/a/%2E%2E/entries", key(), api.AppendRequest{Type: "t"}})
	case "stock.issues.create":
		cases = append(cases, badCase{"negative stock", path, key(), api.StockMovementRequest{Item: "SKU-1", Location: "WH-1", Quantity: "1000"}},
			badCase{"scale", path, key(), api.StockMovementRequest{Item: "SKU-1", Location: "WH-1", Quantity: "1.5"}},
			badCase{"float", path, key(), `{"item":"SKU-1","location":"WH-1","quantity":1}`})
	case "fin.postings.create":
		cases = append(cases, badCase{"unbalanced", path, key(), api.FinPostingRequest{Date: "2026-11-02", Lines: []api.PostingLine{
			{Account: "1400", Side: "debit", Amount: "1.00", Currency: "EUR"}, {Account: "2100", Side: "credit", Amount: "2.00", Currency: "EUR"}}}})
	case "business.sales-issues.create":
		cases = append(cases, badCase{"beyond the stock", path, key(), api.SalesIssueRequest{Item: "SKU-1", Location: "WH-1",
			Quantity: "11", Date: "2026-11-03", CostAccount: "5000", InventoryAccount: "1400"}})
	case "business.purchase-receipts.create":
		cases = append(cases, badCase{"unknown account", path, key(), api.PurchaseReceiptRequest{Item: "SKU-1", Location: "WH-1",
			Quantity: "1", UnitCost: "1", Date: "2026-11-03", InventoryAccount: "1400", CreditAccount: "9999"}})
	}
	return cases
}

func bodyOf(rt *server.Route) any {
	if rt.Request != nil {
		return "{}"
	}
	return nil
}

// Every route refuses bad input with a 4xx problem and writes nothing: the
// ledger holds the same chains, entries and state afterwards.
func TestBadInputWritesNothing(t *testing.T) {
	forEachBackend(t, server.Options{Providers: []server.Provider{{Name: "hooks", Kind: server.ProviderGitHub,
		Tenant: "acme", Secrets: []string{"s3cret"}}}}, func(t *testing.T, ts *testServer) {
		token := ts.key("acme", allScopes...)
		fixture(t, ts, token)
		before := ledgerSnapshot(t, ts)
		n := 0
		for _, rt := range ts.srv.Routes() {
			cases := badCases(rt, &n)
			if rt.ID == "webhooks.receive" {
				cases = append(cases, badCase{"unsigned", samplePath(rt), "", `{"id":"evt_1"}`})
			}
			if rt.Scope != "" && len(cases) == 0 && rt.Method != http.MethodGet {
				t.Errorf("route %s has no bad-input case", rt.ID)
			}
			for _, c := range cases {
				r := ts.do(rt.Method, c.path, token, c.key, c.body)
				if r.status < 400 || r.status >= 500 {
					t.Errorf("%s %s (%s): %d %s, want a 4xx", rt.Method, c.path, c.name, r.status, r.body)
					continue
				}
				if p := r.problem(t); c.name == "no Idempotency-Key" && p.Code != api.CodeKeyRequired {
					t.Errorf("%s %s without a key: %s, want %s", rt.Method, c.path, p.Code, api.CodeKeyRequired)
				}
			}
		}
		if n < 50 {
			t.Fatalf("only %d bad requests", n)
		}
		if diff := diffSnapshots(before, ledgerSnapshot(t, ts)); diff != "" {
			t.Fatalf("bad input wrote (-before +after):\n%s", diff)
		}
	})
}

func diffSnapshots(a, b chaintest.Snapshot) string { return cmp.Diff(a, b) }

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }
