package client_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/client"
)

const tenant = "acme"

// startLedger creates a ledger with an API key of every scope for tenant
// and serves it on 127.0.0.1.
func startLedger(t testing.TB) (s *served, db, token string) {
	t.Helper()
	db = filepath.Join(t.TempDir(), "ledger.db")
	token = createKey(t, db, tenant, "read,write,admin")
	return serve(t, db, "127.0.0.1:0"), db, token
}

// The catalog of the purchase-receipt tests: one item in stock and
// valuation, one location, one book with EUR and two accounts.
const (
	testItem      = "FLOUR-405"
	testLocation  = "WH-1"
	testBook      = api.BookDefault
	testInventory = "1400"
	testGRNI      = "3500"
)

func defineCatalog(t testing.TB, ctx context.Context, c *client.Client) {
	t.Helper()
	steps := []func() error{
		func() error {
			_, err := c.DefineStockItem(ctx, api.StockItemRequest{ID: testItem, Name: "Flour type 405, 25 kg"})
			return err
		},
		func() error {
			_, err := c.DefineStockLocation(ctx, api.StockLocationRequest{ID: testLocation})
			return err
		},
		func() error {
			_, err := c.DefineValItem(ctx, api.ValItemRequest{ID: testItem, Method: "moving_average", Currency: "EUR", MinorUnit: 2})
			return err
		},
		func() error {
			_, err := c.DefineCurrency(ctx, testBook, api.FinCurrencyRequest{Code: "EUR", Exponent: 2})
			return err
		},
		func() error {
			_, err := c.DefineAccount(ctx, testBook, api.FinAccountRequest{Code: testInventory, Name: "Inventory", Type: "asset"})
			return err
		},
		func() error {
			_, err := c.DefineAccount(ctx, testBook, api.FinAccountRequest{Code: testGRNI, Name: "Goods received not invoiced", Type: "liability"})
			return err
		},
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("catalog step %d: %v", i+1, err)
		}
	}
}

// receipt is purchase receipt i: 1 to 9 sacks at 2.50.
func receipt(i int) api.PurchaseReceiptRequest {
	return api.PurchaseReceiptRequest{Item: testItem, Location: testLocation, Quantity: fmt.Sprint(1 + i%9), UnitCost: "2.50",
		Date: "2026-11-30", InventoryAccount: testInventory, CreditAccount: testGRNI, Reference: fmt.Sprintf("PO-%05d", i)}
}

// cents formats an amount in cents as a decimal at scale 2.
func cents(v int64) string { return fmt.Sprintf("%d.%02d", v/100, v%100) }

func TestConcurrentDuplicatesThroughTheClient(t *testing.T) {
	t.Parallel()
	s, _, token := startLedger(t)
	c := newClient(t, s.URL, token, client.Options{BackoffBase: 5 * time.Millisecond})
	ctx := context.Background()
	key := c.NewKey()
	req := api.AppendRequest{Type: "audit.event/v1", Payload: []byte(`{"event":"period.opened","period":"2026-11"}`)}
	const callers = 24
	var wg sync.WaitGroup
	results := make([]api.AppendResponse, callers)
	infos := make([]client.ResponseInfo, callers)
	errs := make([]error, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = c.AppendEntry(ctx, "audit/erp-events", req, client.WithIdempotencyKey(key), client.WithResponseInfo(&infos[i]))
		}()
	}
	wg.Wait()
	fresh := 0
	for i := range callers {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if results[i] != results[0] || infos[i].Key != key || infos[i].Status != 201 {
			t.Fatalf("caller %d got %+v (%+v), caller 0 %+v", i, results[i], infos[i], results[0])
		}
		if !infos[i].Replayed {
			fresh++
		}
	}
	if fresh != 1 || results[0].Seq != 1 {
		t.Fatalf("%d answers were not replays, seq %d: want exactly one first answer at seq 1", fresh, results[0].Seq)
	}
	head, err := c.Head(ctx, "audit/erp-events")
	if err != nil || head.Seq != 1 || head.Hash != results[0].Hash {
		t.Fatalf("head %+v, %v: want the one entry", head, err)
	}

	// The same key with another body is an answer, not a retry.
	other := req
	other.Payload = []byte(`{"event":"period.opened","period":"2026-12"}`)
	var info client.ResponseInfo
	_, err = c.AppendEntry(ctx, "audit/erp-events", other, client.WithIdempotencyKey(key), client.WithResponseInfo(&info))
	var e *client.Error
	if !errors.As(err, &e) || e.Code != api.CodeKeyReused || e.Status != 409 || e.Retryable || e.Attempts != 1 || e.Key != key {
		t.Fatalf("key reused with another body: %v (%+v)", err, e)
	}
	if head, err := c.Head(ctx, "audit/erp-events"); err != nil || head.Seq != 1 {
		t.Fatalf("head after the refused reuse %+v, %v", head, err)
	}
}

func TestClientErrorsFromTheServer(t *testing.T) {
	t.Parallel()
	s, db, token := startLedger(t)
	ctx := context.Background()
	c := newClient(t, s.URL, token, client.Options{})

	_, err := c.Head(ctx, "audit/none")
	if e := (*client.Error)(nil); !errors.As(err, &e) || e.Code != api.CodeNotFound || e.Status != 404 || e.Retryable {
		t.Fatalf("head of a missing chain: %v", err)
	}
	_, err = c.AppendEntry(ctx, "audit/x", api.AppendRequest{Type: "", Payload: []byte("x")})
	if e := (*client.Error)(nil); !errors.As(err, &e) || e.Code != api.CodeInvalidInput || e.Status != 400 || e.Attempts != 1 {
		t.Fatalf("an append without a type: %v", err)
	}
	bad := newClient(t, s.URL, "lw_not_a_key", client.Options{})
	if _, err := bad.Head(ctx, "audit/x"); client.ErrorCode(err) != api.CodeUnauthenticated {
		t.Fatalf("a bad token: %v", err)
	}
	s.Stop()
	readOnly := createKey(t, db, tenant, "read")
	s = serve(t, db, "127.0.0.1:0")
	ro := newClient(t, s.URL, readOnly, client.Options{})
	if _, err := ro.AppendEntry(ctx, "audit/x", api.AppendRequest{Type: "t", Payload: []byte("x")}); client.ErrorCode(err) != api.CodeForbidden {
		t.Fatalf("a write with a read key: %v", err)
	}
}

// TestCallerKeySpansClientRestarts: an intent whose key the caller stored
// is sent again by a new client (a restarted process) with the same
// request, and gets the first answer back; with another request, the
// refusal.
func TestCallerKeySpansClientRestarts(t *testing.T) {
	t.Parallel()
	s, _, token := startLedger(t)
	ctx := context.Background()
	req := api.AppendRequest{Type: "audit.event/v1", Payload: []byte(`{"event":"import.started","import":4711}`)}
	const stored = "erp-import-4711-start"
	before := newClient(t, s.URL, token, client.Options{})
	first, err := before.AppendEntry(ctx, "audit/imports", req, client.WithIdempotencyKey(stored))
	if err != nil {
		t.Fatal(err)
	}
	before.CloseIdleConnections()
	after := newClient(t, s.URL, token, client.Options{})
	var info client.ResponseInfo
	again, err := after.AppendEntry(ctx, "audit/imports", req, client.WithIdempotencyKey(stored), client.WithResponseInfo(&info))
	if err != nil || again != first || !info.Replayed || info.Key != stored {
		t.Fatalf("after the restart: %+v (%+v), %v; first %+v", again, info, err, first)
	}
	if _, err := after.AppendEntry(ctx, "audit/imports", api.AppendRequest{Type: req.Type, Payload: []byte(`{}`)},
		client.WithIdempotencyKey(stored)); client.ErrorCode(err) != api.CodeKeyReused {
		t.Fatalf("the stored key with another request: %v", err)
	}
}
