package idempotency_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/idempotency"
)

// A payments route behind the guard, on the embedded ledger: the handler
// appends one entry and commits its response with it; the retry is
// answered from the record without running the handler.
func Example() {
	dir, _ := os.MkdirTemp("", "idempotency-example")
	defer os.RemoveAll(dir)
	db, err := chain.Open(filepath.Join(dir, "ledger.db"), chain.Options{})
	if err != nil {
		panic(err)
	}
	defer db.Close()
	store, err := idempotency.NewLedgerStore(db)
	if err != nil {
		panic(err)
	}
	guard, err := idempotency.New(idempotency.Options{
		Store:      store,
		User:       func(r *http.Request) (string, error) { return r.Header.Get("X-User"), nil }, // from your authentication
		RequireKey: true,
		Logger:     slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	payments := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ic := idempotency.FromContext(r.Context())
		body, _ := io.ReadAll(r.Body)
		resp, err := ic.Update(r.Context(), func(tx *chain.Tx) (idempotency.Response, error) {
			res, err := tx.Append(chain.Request{Chain: "acme/payments", IdempotencyKey: ic.LedgerKey("pay:"), Type: "payment/v1", Payload: body})
			if err != nil {
				return idempotency.Response{}, err
			}
			return idempotency.Response{Status: http.StatusCreated, Header: http.Header{"Content-Type": {"application/json"}},
				Body: fmt.Appendf(nil, `{"payment":%d}`, res.Entry.Seq)}, nil
		})
		if err != nil {
			ic.Fail(err)
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		idempotency.WriteResponse(w, resp)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /payments", guard.Middleware(payments))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	for _, body := range []string{`{"amount":"10.00"}`, `{"amount":"10.00"}`, `{"amount":"99.00"}`} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/payments", strings.NewReader(body))
		req.Header.Set("X-User", "alice")
		req.Header.Set("Idempotency-Key", "order-1187-payment")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), strings.TrimSpace(string(out)))
	}
	// Output:
	// 201  {"payment":1}
	// 201 true {"payment":1}
	// 409  {"type":"urn:ledgerworks:problem:KEY_REUSED_WITH_DIFFERENT_REQUEST","title":"Idempotency-Key reused with a different request","status":409,"code":"KEY_REUSED_WITH_DIFFERENT_REQUEST","detail":"this key was used with a different request"}
}
