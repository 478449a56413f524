package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/idempotency"
)

func init() {
	registerDemoStep(60, "HTTP: a payment retried over HTTP runs once and replays its response", demoIdempotencyHTTP)
}

// demoIdempotencyHTTP serves a guarded payments route on 127.0.0.1 and
// sends it a request, the retry of a client that timed out, a reused key
// with another amount, and a request without a key. The summary counts the
// replay; the guard's two refusals are HTTP answers, not ledger conflicts
// or rule refusals, and are shown here only.
func demoIdempotencyHTTP(ctx context.Context, d *demoEnv) error {
	var store idempotency.Store
	ls, err := idempotency.NewLedgerStore(d.DB)
	if err == nil {
		store = ls
		d.Printf("guard records kept in the ledger's own state, committed with the payment entry\n")
	} else {
		store = idempotency.NewMemoryStore()
		d.Printf("guard records kept in memory for this demo (services on PostgreSQL use idempotency/pgstore)\n")
	}
	chainID, err := chain.ScopedName(d.Tenant, "payments")
	if err != nil {
		return err
	}
	var runs atomic.Int64
	guard, err := idempotency.New(idempotency.Options{
		Store:      store,
		User:       func(r *http.Request) (string, error) { return r.Header.Get("X-Demo-User"), nil },
		Operation:  func(*http.Request) string { return d.Tenant + ":payments:create" },
		RequireKey: true,
		Logger:     slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /payments", guard.Middleware(demoPaymentHandler(d.DB, chainID, &runs)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Shutdown(context.WithoutCancel(ctx))
	url := "http://" + ln.Addr().String() + "/payments"
	d.Printf("server listening on %s\n", ln.Addr())

	send := func(key, body string) (int, string, http.Header, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			return 0, "", nil, err
		}
		req.Header.Set("X-Demo-User", "erp-checkout")
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b)), resp.Header, err
	}
	const key = "checkout-7f3a-pay-1"
	body := `{"order":"SO-2026-1187","amount":"129.90","currency":"EUR"}`
	st, out, _, err := send(key, body)
	if err != nil {
		return err
	}
	d.Printf("POST /payments  Idempotency-Key: %s  -> %d %s\n", key, st, out)
	st2, out2, h, err := send(key, `{ "currency": "EUR", "amount": "129.90", "order": "SO-2026-1187" }`)
	if err != nil {
		return err
	}
	d.Printf("retry, same key and request          -> %d %s  Idempotent-Replayed: %s (replayed=true)\n", st2, out2, h.Get(idempotency.ReplayedHeader))
	if st != http.StatusCreated || st2 != st || out2 != out || h.Get(idempotency.ReplayedHeader) != "true" || runs.Load() != 1 {
		return fmt.Errorf("demo: the retry was not replayed (%d %q, then %d %q, handler ran %d times)", st, out, st2, out2, runs.Load())
	}
	d.Replayed(1)
	if h, err := d.DB.Head(ctx, chainID); err != nil || h.Seq != 1 {
		return fmt.Errorf("demo: the payments chain holds %d entries (%v), want 1", h.Seq, err)
	}
	d.Printf("the handler ran once; %s holds one entry\n", chainID)
	st, out, _, err = send(key, `{"order":"SO-2026-1187","amount":"1299.00","currency":"EUR"}`)
	if err != nil {
		return err
	}
	if code := demoProblemCode(out); st != http.StatusConflict || code != string(idempotency.CodeKeyReused) {
		return fmt.Errorf("demo: a reused key was not refused: %d %s", st, out)
	} else {
		d.Printf("same key, amount 1299.00             -> %d %s\n", st, code)
	}
	st, out, _, err = send("", body)
	if err != nil {
		return err
	}
	if code := demoProblemCode(out); st != http.StatusBadRequest || code != string(idempotency.CodeKeyRequired) {
		return fmt.Errorf("demo: a request without a key was not refused: %d %s", st, out)
	} else {
		d.Printf("no Idempotency-Key                   -> %d %s\n", st, code)
	}
	return nil
}

// demoPaymentHandler records a payment as one ledger entry, keyed by the
// request's scope, committed with the guard's SUCCESS record.
func demoPaymentHandler(db *chain.DB, chainID string, runs *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		ic := idempotency.FromContext(r.Context())
		body, err := io.ReadAll(r.Body)
		if err != nil {
			ic.Fail(err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		write := func(tx *chain.Tx) (idempotency.Response, error) {
			res, err := tx.Append(chain.Request{Chain: chainID, IdempotencyKey: ic.LedgerKey("pay:"), Type: "payment/v1", Payload: body})
			if err != nil {
				return idempotency.Response{}, err
			}
			return idempotency.Response{Status: http.StatusCreated,
				Header: http.Header{"Content-Type": {"application/json"}, "Location": {fmt.Sprintf("/payments/%d", res.Entry.Seq)}},
				Body:   fmt.Appendf(nil, `{"payment":%d,"hash":"%.16s…"}`, res.Entry.Seq, res.Entry.Hash)}, nil
		}
		resp, err := ic.Update(r.Context(), write)
		if errors.Is(err, idempotency.ErrTxUnsupported) {
			var res idempotency.Response
			err = db.Update(r.Context(), func(tx *chain.Tx) error {
				var err error
				res, err = write(tx)
				return err
			})
			resp = res
		}
		if err != nil {
			ic.Fail(err)
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		idempotency.WriteResponse(w, resp)
	})
}

// demoProblemCode returns the code of a problem+json body.
func demoProblemCode(body string) string {
	var p struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal([]byte(body), &p)
	return p.Code
}
