package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/server"
)

// A body is hashed as exactly what the handler acts on: a member named in
// another case, or given twice, is refused with 400 and nothing is written,
// so a reordered body can never be answered with the replay of a body that
// meant something else. Both routes of the finding: a stock movement
// (quantity/Quantity) and a raw entry (type/Type).
func TestMembersMatchExactly(t *testing.T) {
	forEachBackend(t, server.Options{}, func(t *testing.T, ts *testServer) {
		token := ts.key("acme", allScopes...)
		fixture(t, ts, token)
		cases := []struct {
			name, path string
			bodies     []string
		}{
			{"stock movement", "/v1/stock/receipts", []string{
				`{"item":"SKU-1","location":"WH-1","quantity":"1","Quantity":"500"}`,
				`{"item":"SKU-1","location":"WH-1","Quantity":"500","quantity":"1"}`,
				`{"item":"SKU-1","location":"WH-1","quantity":"1","quantity":"500"}`,
				`{"item":"SKU-1","location":"WH-1","QUANTITY":"500"}`,
				`{"item":"SKU-1","location":"WH-1","quantit\u0059":"500"}`,
			}},
			{"raw entry", "/v1/chains/orders/entries", []string{
				`{"type":"order/v1","Type":"order/v2","payload":"e30="}`,
				`{"Type":"order/v2","type":"order/v1","payload":"e30="}`,
				`{"type":"order/v1","type":"order/v2","payload":"e30="}`,
				`{"Type":"order/v2","payload":"e30="}`,
				`{"type":"order/v1","payload":"e30=","PAYLOAD":"e30="}`,
			}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				before := ledgerSnapshot(t, ts)
				for i, body := range tc.bodies {
					// One key for every body: the first one's refusal is what
					// each retry with another body must not be given.
					r := ts.do(http.MethodPost, tc.path, token, "members-"+tc.name+"-"+itoa(i), body)
					p := r.wantProblem(t, http.StatusBadRequest, api.CodeInvalidInput)
					if !strings.Contains(p.Detail, "member") || strings.Contains(p.Detail, "Go ") || strings.Contains(p.Detail, "acme/") {
						t.Errorf("%s: detail %q", body, p.Detail)
					}
				}
				if d := diffSnapshots(before, ledgerSnapshot(t, ts)); d != "" {
					t.Fatalf("a refused body wrote:\n%s", d)
				}
				// The first body of the finding, then the same members reordered,
				// under one key: two refusals, never a replayed 201.
				for _, body := range tc.bodies[:2] {
					r := ts.do(http.MethodPost, tc.path, token, "members-one-key-"+tc.name, body)
					if r.status != http.StatusBadRequest || r.header.Get(api.HeaderReplayed) == "true" && r.status < 300 {
						t.Fatalf("%s: %d %s", body, r.status, r.body)
					}
				}
			})
		}
		// The exact names still work, escaped or not.
		r := ts.do(http.MethodPost, "/v1/stock/receipts", token, "members-ok",
			`{"item":"SKU-1","location":"WH-1","quantit\u0079":"2"}`)
		var res api.StockResult
		r.decode(t, http.StatusCreated, &res)
		r = ts.do(http.MethodPost, "/v1/stock/receipts", token, "members-ok",
			` { "quantity" : "2", "location":"WH-1", "item":"SKU-1" } `)
		if r.status != http.StatusCreated || r.header.Get(api.HeaderReplayed) != "true" {
			t.Fatalf("the same request reordered: %d %s", r.status, r.body)
		}
	})
}

// A body of the wrong JSON type is refused naming the member and its JSON
// type, never a Go type or field.
func TestDecodeErrorsNameMembers(t *testing.T) {
	ts := startServer(t, openBolt(t), server.Options{})
	token := ts.key("acme", allScopes...)
	fixture(t, ts, token)
	for body, want := range map[string]string{
		`{"item":"SKU-1","location":"WH-1","quantity":1}`:     `member "quantity": a JSON number where a string is wanted`,
		`{"item":"SKU-1","location":"WH-1","quantity":"1"`:    "ends inside a JSON value",
		`{"item":"SKU-1","location":"WH-1","quantity":"1"} 1`: "more than one JSON value",
		`[]`: "a JSON array where an object is wanted",
	} {
		p := ts.do(http.MethodPost, "/v1/stock/receipts", token, "decode-"+body, body).wantProblem(t, http.StatusBadRequest, api.CodeInvalidInput)
		if !strings.Contains(p.Detail, want) || strings.Contains(p.Detail, "Go ") || strings.Contains(p.Detail, "StockMovementRequest.") {
			t.Errorf("%s: detail %q, want %q", body, p.Detail, want)
		}
	}
}
