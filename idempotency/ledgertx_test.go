package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/idempotency"
)

// paymentsChain is the chain the test handlers append to.
const paymentsChain = "acme/payments"

// paymentHandler appends one entry per request, keyed by the request's
// scope, and commits its SUCCESS record in the same ledger transaction.
// hook, when set, runs inside the transaction after the append.
func paymentHandler(db *chain.DB, hook func(tx *chain.Tx) error) http.Handler {
	return paymentHandlerAfter(db, hook, nil)
}

// paymentHandlerAfter is paymentHandler with a function run after the
// transaction committed and before the response is written.
func paymentHandlerAfter(db *chain.DB, hook func(tx *chain.Tx) error, after func()) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ic := idempotency.FromContext(r.Context())
		body, _ := io.ReadAll(r.Body)
		var status int
		var out []byte
		err := db.Update(r.Context(), func(tx *chain.Tx) error {
			res, err := tx.Append(chain.Request{Chain: paymentsChain, IdempotencyKey: ic.LedgerKey("pay:"), Type: "payment/v1", Payload: body})
			if err != nil {
				return err
			}
			status, out = http.StatusCreated, fmt.Appendf(nil, `{"seq":%d}`, res.Entry.Seq)
			if hook != nil {
				if err := hook(tx); err != nil {
					return err
				}
			}
			return ic.SucceedTx(tx, status, http.Header{"Content-Type": {"application/json"}}, out)
		})
		if err != nil {
			ic.Fail(err)
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		if after != nil {
			after()
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write(out)
	})
}

func alice(*http.Request) (string, error) { return "alice", nil }

func post(t *testing.T, url, key, body string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func entries(t *testing.T, db *chain.DB) int {
	t.Helper()
	h, err := db.Head(context.Background(), paymentsChain)
	if errors.Is(err, chain.ErrNotFound) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return int(h.Seq)
}

func TestSucceedTxCommitsWithTheEntries(t *testing.T) {
	db := openLedger(t)
	store := ledgerStore(t, db)
	g, err := idempotency.New(idempotency.Options{Store: store, User: alice})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Middleware(paymentHandler(db, nil)))
	defer srv.Close()
	st, body, _ := post(t, srv.URL, "k-1", `{"amount":"5.00"}`)
	if st != 201 || body != `{"seq":1}` {
		t.Fatalf("first: %d %s", st, body)
	}
	st, body2, h := post(t, srv.URL, "k-1", `{"amount":"5.00"}`)
	if st != 201 || body2 != body || h.Get(idempotency.ReplayedHeader) != "true" {
		t.Fatalf("retry: %d %s %v", st, body2, h)
	}
	rec, err := store.Get(context.Background(), idempotency.Scope{Operation: "POST /", User: "alice", Key: "k-1"}, time.Now())
	if err != nil || rec.Status != idempotency.StatusSuccess || string(rec.Response.Body) != body {
		t.Fatalf("record: %+v, %v", rec, err)
	}
	if n := entries(t, db); n != 1 {
		t.Fatalf("%d entries, want 1", n)
	}
}

// A transaction that rolls back after SucceedTx records nothing: the
// request ends as a transient failure and its retry runs again.
func TestSucceedTxRolledBackRecordsNothing(t *testing.T) {
	db := openLedger(t)
	store := ledgerStore(t, db)
	g, err := idempotency.New(idempotency.Options{Store: store, User: alice})
	if err != nil {
		t.Fatal(err)
	}
	fail := true
	srv := httptest.NewServer(g.Middleware(paymentHandler(db, func(*chain.Tx) error {
		if fail {
			return errors.New("rule refused")
		}
		return nil
	})))
	defer srv.Close()
	if st, _, _ := post(t, srv.URL, "k-1", `{}`); st != 503 {
		t.Fatalf("failing: %d", st)
	}
	if n := entries(t, db); n != 0 {
		t.Fatalf("%d entries after a rolled-back transaction", n)
	}
	fail = false
	if st, body, h := post(t, srv.URL, "k-1", `{}`); st != 201 || body != `{"seq":1}` || h.Get(idempotency.ReplayedHeader) != "" {
		t.Fatalf("retry: %d %s", st, body)
	}
}

// SucceedTx on a store that cannot join a ledger transaction says so.
func TestSucceedTxUnsupported(t *testing.T) {
	db := openLedger(t)
	g, err := idempotency.New(idempotency.Options{Store: idempotency.NewMemoryStore(), User: alice})
	if err != nil {
		t.Fatal(err)
	}
	var got error
	srv := httptest.NewServer(g.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = db.Update(r.Context(), func(tx *chain.Tx) error {
			return idempotency.FromContext(r.Context()).SucceedTx(tx, 200, nil, nil)
		})
	})))
	defer srv.Close()
	post(t, srv.URL, "k", "")
	if !errors.Is(got, idempotency.ErrTxUnsupported) {
		t.Fatalf("SucceedTx on a memory store: %v", got)
	}
}

// Context.Update runs the handler's appends and the SUCCESS record in one
// transaction and knows the outcome without reading the record back.
func TestContextUpdate(t *testing.T) {
	db := openLedger(t)
	store := ledgerStore(t, db)
	g, err := idempotency.New(idempotency.Options{Store: store, User: alice})
	if err != nil {
		t.Fatal(err)
	}
	refuse := true
	srv := httptest.NewServer(g.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ic := idempotency.FromContext(r.Context())
		body, _ := io.ReadAll(r.Body)
		resp, err := ic.Update(r.Context(), func(tx *chain.Tx) (idempotency.Response, error) {
			res, err := tx.Append(chain.Request{Chain: paymentsChain, IdempotencyKey: ic.LedgerKey("pay:"), Type: "payment/v1", Payload: body})
			if err != nil {
				return idempotency.Response{}, err
			}
			if refuse {
				return idempotency.Response{}, errors.New("refused")
			}
			return idempotency.Response{Status: 201, Header: http.Header{"Content-Type": {"application/json"}, "Set-Cookie": {"x=y"}},
				Body: fmt.Appendf(nil, `{"seq":%d}`, res.Entry.Seq)}, nil
		})
		if err != nil {
			ic.Fail(err)
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		idempotency.WriteResponse(w, resp)
	})))
	defer srv.Close()
	if st, _, _ := post(t, srv.URL, "k", `{"a":1}`); st != 503 || entries(t, db) != 0 {
		t.Fatalf("refused: %d, %d entries", st, entries(t, db))
	}
	refuse = false
	st, body, _ := post(t, srv.URL, "k", `{"a":1}`)
	st2, body2, h := post(t, srv.URL, "k", `{"a":1}`)
	if st != 201 || body != `{"seq":1}` || st2 != 201 || body2 != body || h.Get(idempotency.ReplayedHeader) != "true" || h.Get("Set-Cookie") != "" {
		t.Fatalf("first %d %s, retry %d %s %v", st, body, st2, body2, h)
	}
	if n := entries(t, db); n != 1 {
		t.Fatalf("%d entries, want 1", n)
	}
	rec, err := store.Get(context.Background(), idempotency.Scope{Operation: "POST /", User: "alice", Key: "k"}, time.Now())
	if err != nil || rec.Attempt != 2 || rec.Status != idempotency.StatusSuccess {
		t.Fatalf("record %+v, %v", rec, err)
	}
}
