package client

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/server"
)

// methodCall is a typed method's call and the request it must send.
type methodCall struct {
	call                func() error
	method, path, query string
}

// methodCalls calls every typed method once.
func methodCalls(ctx context.Context, c *Client) []methodCall {
	return []methodCall{

		{func() error { _, err := c.AppendEntry(ctx, "audit/erp events", api.AppendRequest{}); return err }, "POST", "/v1/chains/audit/erp%20events/entries", ""},
		{func() error { _, err := c.Entry(ctx, "audit/x", 7); return err }, "GET", "/v1/chains/audit/x/entries/7", ""},
		{func() error { _, err := c.Entries(ctx, "audit/x", 3, 10); return err }, "GET", "/v1/chains/audit/x/entries", "from=3&limit=10"},
		{func() error { _, err := c.Head(ctx, "audit/x"); return err }, "GET", "/v1/chains/audit/x/head", ""},
		{func() error { _, err := c.Chains(ctx, "audit/", "audit/b", 5); return err }, "GET", "/v1/chains", "from_name=audit%2Fb&limit=5&prefix=audit%2F"},
		{func() error { _, err := c.ProveEntry(ctx, "audit/x", 2); return err }, "GET", "/v1/proofs/entry", "chain=audit%2Fx&seq=2"},
		{func() error { _, err := c.DefineStockItem(ctx, api.StockItemRequest{}); return err }, "POST", "/v1/stock/items", ""},
		{func() error { _, err := c.StockItems(ctx); return err }, "GET", "/v1/stock/items", ""},
		{func() error { _, err := c.DefineStockLocation(ctx, api.StockLocationRequest{}); return err }, "POST", "/v1/stock/locations", ""},
		{func() error { _, err := c.StockLocations(ctx); return err }, "GET", "/v1/stock/locations", ""},
		{func() error { _, err := c.StockReceipt(ctx, api.StockMovementRequest{}); return err }, "POST", "/v1/stock/receipts", ""},
		{func() error { _, err := c.StockIssue(ctx, api.StockMovementRequest{}); return err }, "POST", "/v1/stock/issues", ""},
		{func() error { _, err := c.StockAdjustment(ctx, api.StockAdjustmentRequest{}); return err }, "POST", "/v1/stock/adjustments", ""},
		{func() error { _, err := c.StockTransfer(ctx, api.StockTransferRequest{}); return err }, "POST", "/v1/stock/transfers", ""},
		{func() error { _, err := c.StockReversal(ctx, api.StockReversalRequest{}); return err }, "POST", "/v1/stock/reversals", ""},
		{func() error { _, err := c.StockTotal(ctx, "SKU/1"); return err }, "GET", "/v1/stock/balances/SKU%2F1", ""},
		{func() error { _, err := c.StockBalance(ctx, "SKU-1", "WH 1", StockAt{Seq: 4}); return err }, "GET", "/v1/stock/balances/SKU-1/WH%201", "at_seq=4"},
		{func() error {
			_, err := c.StockBalance(ctx, "SKU-1", "WH-1", StockAt{Time: time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)})
			return err
		}, "GET", "/v1/stock/balances/SKU-1/WH-1", "at_time=2026-11-02T09%3A00%3A00Z"},
		{func() error { _, err := c.StockHistory(ctx, "SKU-1", "WH-1", 0, 5); return err }, "GET", "/v1/stock/history/SKU-1/WH-1", "limit=5"},
		{func() error { _, err := c.DefineAccount(ctx, "main", api.FinAccountRequest{}); return err }, "POST", "/v1/fin/books/main/accounts", ""},
		{func() error { _, err := c.CloseAccount(ctx, "main", "1400"); return err }, "POST", "/v1/fin/books/main/accounts/1400/close", ""},
		{func() error { _, err := c.Accounts(ctx, "main"); return err }, "GET", "/v1/fin/books/main/accounts", ""},
		{func() error { _, err := c.DefineCurrency(ctx, "main", api.FinCurrencyRequest{}); return err }, "POST", "/v1/fin/books/main/currencies", ""},
		{func() error { _, err := c.Currencies(ctx, "main"); return err }, "GET", "/v1/fin/books/main/currencies", ""},
		{func() error { _, err := c.Post(ctx, "main", api.FinPostingRequest{}); return err }, "POST", "/v1/fin/books/main/postings", ""},
		{func() error { _, err := c.Posting(ctx, "main", 9); return err }, "GET", "/v1/fin/books/main/postings/9", ""},
		{func() error { _, err := c.PostingByKey(ctx, "main", "req-1"); return err }, "GET", "/v1/fin/books/main/postings", "key=req-1"},
		{func() error { _, err := c.ReversePosting(ctx, "main", api.FinReversalRequest{}); return err }, "POST", "/v1/fin/books/main/reversals", ""},
		{func() error { _, err := c.AccountBalances(ctx, "main", "1400"); return err }, "GET", "/v1/fin/books/main/balances/1400", ""},
		{func() error {
			_, err := c.AccountBalance(ctx, "main", "1400", "EUR", FinAt{AsOf: "2026-11-30"})
			return err
		}, "GET", "/v1/fin/books/main/balances/1400/EUR", "as_of=2026-11-30"},
		{func() error { _, err := c.TrialBalance(ctx, "main"); return err }, "GET", "/v1/fin/books/main/trial-balance", ""},
		{func() error { _, err := c.DefineValItem(ctx, api.ValItemRequest{}); return err }, "POST", "/v1/val/items", ""},
		{func() error { _, err := c.ValItems(ctx); return err }, "GET", "/v1/val/items", ""},
		{func() error { _, err := c.ValReceipt(ctx, api.ValReceiptRequest{}); return err }, "POST", "/v1/val/receipts", ""},
		{func() error { _, err := c.ValIssue(ctx, api.ValIssueRequest{}); return err }, "POST", "/v1/val/issues", ""},
		{func() error { _, err := c.ValAdjustment(ctx, api.ValAdjustmentRequest{}); return err }, "POST", "/v1/val/adjustments", ""},
		{func() error { _, err := c.ValTransfer(ctx, api.ValTransferRequest{}); return err }, "POST", "/v1/val/transfers", ""},
		{func() error { _, err := c.ValReversal(ctx, api.ValReversalRequest{}); return err }, "POST", "/v1/val/reversals", ""},
		{func() error { _, err := c.ValBalances(ctx, "FLOUR"); return err }, "GET", "/v1/val/balances/FLOUR", ""},
		{func() error { _, err := c.ValBalance(ctx, "FLOUR", "WH-1", 2); return err }, "GET", "/v1/val/balances/FLOUR/WH-1", "at_seq=2"},
		{func() error { _, err := c.ValLayers(ctx, "FLOUR", "WH-1", 0); return err }, "GET", "/v1/val/layers/FLOUR/WH-1", ""},
		{func() error { _, err := c.PurchaseReceipt(ctx, api.PurchaseReceiptRequest{}); return err }, "POST", "/v1/purchase-receipts", ""},
		{func() error { _, err := c.SalesIssue(ctx, api.SalesIssueRequest{}); return err }, "POST", "/v1/sales-issues", ""},
		{func() error {
			_, err := c.OutboxMessages(ctx, OutboxFilter{Topic: "t", Status: "dead", Limit: 2})
			return err
		}, "GET", "/v1/outbox/messages", "limit=2&status=dead&topic=t"},
		{func() error { _, err := c.OutboxMessage(ctx, "m1"); return err }, "GET", "/v1/outbox/messages/m1", ""},
		{func() error { _, err := c.DeadMessages(ctx, ""); return err }, "GET", "/v1/outbox/dead", ""},
		{func() error { _, err := c.DeadMessagesFrom(ctx, "t", "6f1c"); return err }, "GET", "/v1/outbox/dead", "from=6f1c&topic=t"},
		{func() error { _, err := c.OutboxStats(ctx, "t"); return err }, "GET", "/v1/outbox/stats", "topic=t"},
		{func() error { _, err := c.OutboxActivity(ctx, "t", 30); return err }, "GET", "/v1/outbox/activity", "minutes=30&topic=t"},
		{func() error { _, err := c.Requeue(ctx, api.OutboxRequeueRequest{}); return err }, "POST", "/v1/outbox/requeue", ""},
		{func() error { _, err := c.CreateAPIKey(ctx, api.APIKeyRequest{}); return err }, "POST", "/v1/apikeys", ""},
		{func() error { _, err := c.APIKeys(ctx); return err }, "GET", "/v1/apikeys", ""},
		{func() error { _, err := c.Whoami(ctx); return err }, "GET", "/v1/whoami", ""},
		{func() error { _, err := c.Inbox(ctx); return err }, "GET", "/v1/inbox", ""},
		{func() error { _, err := c.GuardRecord(ctx, "k1", "POST", "/v1/x", "i-1"); return err }, "GET", "/v1/idempotency/records",
			"key=i-1&key_id=k1&method=POST&path=%2Fv1%2Fx"},
		{func() error { _, err := c.RevokeAPIKey(ctx, "k_1"); return err }, "DELETE", "/v1/apikeys/k_1", ""},
		{func() error { _, err := c.Verify(ctx, api.VerifyRequest{}); return err }, "POST", "/v1/verify", ""},
		{func() error { _, err := c.Health(ctx); return err }, "GET", "/healthz", ""},
		{func() error { _, err := c.Ready(ctx); return err }, "GET", "/readyz", ""},
	}
}

// TestMethodsCallTheirRoutes checks that every typed method sends its
// documented method, escaped path, query and key.
func TestMethodsCallTheirRoutes(t *testing.T) {
	var mu sync.Mutex
	var got struct{ method, path, query, key string }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got.method, got.path, got.query, got.key = r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Get(api.HeaderIdempotencyKey)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte("{}"))
	}))
	defer srv.Close()
	c, err := New(Options{BaseURL: srv.URL + "/ledger", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range methodCalls(ctx, c) {
		if err := tc.call(); err != nil {
			t.Fatalf("%s %s: %v", tc.method, tc.path, err)
		}
		mu.Lock()
		keyed := tc.method != "GET" && tc.path != "/v1/verify"
		if got.method != tc.method || got.path != "/ledger"+tc.path || got.query != tc.query || (got.key != "") != keyed {
			t.Errorf("sent %+v, want %s /ledger%s?%s (keyed %v)", got, tc.method, tc.path, tc.query, keyed)
		}
		mu.Unlock()
	}
	for _, bad := range []string{"", "/a", "a/", "a//b"} {
		if _, err := c.Head(ctx, bad); err == nil {
			t.Errorf("chain %q accepted", bad)
		}
	}
	if _, err := c.StockTotal(ctx, ""); err == nil {
		t.Error("an empty item accepted")
	}
}

// TestEveryRouteHasAMethod checks the client against the server's route
// table (the source of its OpenAPI document): every route an ERP calls
// has a typed method that sends its method and path, an Idempotency-Key
// exactly when the route is guarded, and only the query parameters the
// route documents; and every method calls a route.
func TestEveryRouteHasAMethod(t *testing.T) {
	db, err := chain.Open(filepath.Join(t.TempDir(), "l.db"), chain.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err := server.New(server.Options{DB: db, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	// Not for clients of the API: webhooks come from their providers,
	// metrics and the document from operators' tools.
	notForClients := map[string]bool{"POST /v1/webhooks/{provider}": true, "GET /metrics": true, "GET /openapi.json": true}

	type sent struct{ method, path, query, key string }
	var mu sync.Mutex
	var last sent
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		last = sent{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Get(api.HeaderIdempotencyKey)}
		mu.Unlock()
		w.Write([]byte("{}"))
	}))
	defer srv.Close()
	c, err := New(Options{BaseURL: srv.URL, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	calls := methodCalls(context.Background(), c)
	covered := make([]bool, len(calls))
	for _, rt := range s.Routes() {
		id := rt.Method + " " + rt.Path
		if notForClients[id] {
			continue
		}
		pattern := regexp.MustCompile("^" + regexp.MustCompile(`\\\{[a-z_]+\\\}`).ReplaceAllStringFunc(regexp.QuoteMeta(rt.Path),
			func(m string) string {
				if m == `\{name\}` {
					return `[^?]+` // a chain name may hold "/"
				}
				return `[^/]+`
			}) + "$")
		params := map[string]bool{}
		for _, p := range rt.Query {
			params[p.Name] = true
		}
		found := false
		for i, mc := range calls {
			if mc.method != rt.Method || !pattern.MatchString(mc.path) || (strings.Count(mc.path, "/") != strings.Count(rt.Path, "/") && !strings.Contains(rt.Path, "{name}")) {
				continue
			}
			if err := mc.call(); err != nil {
				t.Fatalf("%s: %v", id, err)
			}
			mu.Lock()
			got := last
			mu.Unlock()
			if (got.key != "") != rt.Guarded {
				t.Errorf("%s: the client sends a key %v, the route is guarded %v", id, got.key != "", rt.Guarded)
			}
			q, _ := url.ParseQuery(got.query)
			for name := range q {
				if !params[name] {
					t.Errorf("%s: the client sends query parameter %q, which the route does not document", id, name)
				}
			}
			found, covered[i] = true, true
		}
		if !found {
			t.Errorf("route %s has no typed method", id)
		}
	}
	for i, mc := range calls {
		if !covered[i] {
			t.Errorf("method sending %s %s matches no route of the server", mc.method, mc.path)
		}
	}
}
