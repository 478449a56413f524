package idempotency_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/idempotency"
	"github.com/ledgerworks/ledger/idempotency/idempotencytest"
)

// benchHandler appends one ledger entry per request. Guarded, it keys the
// entry by the request's scope and commits the SUCCESS record in the same
// transaction (separate: through the guard's own commit after the
// handler); unguarded, it keys the entry by the Idempotency-Key header.
func benchHandler(db *chain.DB, mode string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ic := idempotency.FromContext(r.Context())
		key := "pay:" + r.Header.Get("Idempotency-Key")
		if ic != nil {
			key = ic.LedgerKey("pay:")
		}
		if mode == "update" {
			resp, err := ic.Update(r.Context(), func(tx *chain.Tx) (idempotency.Response, error) {
				res, err := tx.Append(chain.Request{Chain: paymentsChain, IdempotencyKey: key, Type: "payment/v1", Payload: body})
				if err != nil {
					return idempotency.Response{}, err
				}
				return idempotency.Response{Status: http.StatusCreated, Header: jsonHeader,
					Body: fmt.Appendf(nil, `{"seq":%d}`, res.Entry.Seq)}, nil
			})
			if err != nil {
				ic.Fail(err)
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			idempotency.WriteResponse(w, resp)
			return
		}
		var out []byte
		err := db.Update(r.Context(), func(tx *chain.Tx) error {
			res, err := tx.Append(chain.Request{Chain: paymentsChain, IdempotencyKey: key, Type: "payment/v1", Payload: body})
			if err != nil {
				return err
			}
			out = fmt.Appendf(out[:0], `{"seq":%d}`, res.Entry.Seq)
			if mode == "same-tx" {
				return ic.SucceedTx(tx, http.StatusCreated, jsonHeader, out)
			}
			return nil
		})
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		w.Write(out)
	})
}

// jsonHeader is the header of every response of benchHandler: built once,
// as a handler that answers with the same headers does (the guard never
// changes a response's header).
var jsonHeader = http.Header{"Content-Type": {"application/json"}}

func benchGuard(b *testing.B, store idempotency.Store) *idempotency.Guard {
	g, err := idempotency.New(idempotency.Options{Store: store, User: alice, Logger: discardLogger})
	if err != nil {
		b.Fatal(err)
	}
	return g
}

// BenchmarkNewKeys: 64 concurrent clients, each request a new key, a
// handler that appends one entry, on the embedded store. "unguarded" is
// the same handler without the guard, the baseline; "same-tx" commits the
// SUCCESS record in the handler's transaction (one durable commit per
// request, shared with the others by the group commit) from the handler's
// own Update; "update" does the same through Context.Update; "separate" lets the
// guard commit it after the handler (two).
func BenchmarkNewKeys(b *testing.B) {
	for _, mode := range []string{"unguarded", "update", "same-tx", "separate"} {
		b.Run(mode, func(b *testing.B) {
			db := openLedger(b)
			h := benchHandler(db, mode)
			var store idempotency.Store
			if mode != "unguarded" {
				store = ledgerStore(b, db)
				h = benchGuard(b, store).Middleware(h)
			}
			idempotencytest.RunClients(b, h, 64, 0, fmt.Sprint("new-", mode, b.N))
			b.StopTimer()
			// Every acknowledged request's entry, and its SUCCESS record, is
			// in the ledger.
			head, err := db.Head(context.Background(), paymentsChain)
			if err != nil || head.Seq != uint64(b.N) {
				b.Fatalf("%d requests acknowledged, the chain holds %d entries (%v)", b.N, head.Seq, err)
			}
			if store != nil {
				recs, err := store.List(context.Background(), idempotency.Scope{}, idempotency.StatusSuccess, b.N+1, time.Now())
				if err != nil || len(recs) != b.N {
					b.Fatalf("%d requests acknowledged, %d SUCCESS records (%v)", b.N, len(recs), err)
				}
			}
		})
	}
}

// BenchmarkReplays: 2 goroutines retrying 1,000 finished requests on the
// embedded store, without and with the LRU cache; "static" is the
// harness's ceiling: a handler that writes a fixed response, unguarded.
func BenchmarkReplays(b *testing.B) {
	b.Run("static", func(b *testing.B) {
		idempotencytest.RunClients(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte(`{"seq":1}`))
		}), 2, 1000, "static")
	})
	for _, cached := range []bool{false, true} {
		b.Run(fmt.Sprint("cache=", cached), func(b *testing.B) {
			db := openLedger(b)
			opts := idempotency.Options{Store: ledgerStore(b, db), User: alice, Logger: discardLogger}
			if cached {
				opts.Cache = idempotency.NewLRU(4096)
			}
			g, err := idempotency.New(opts)
			if err != nil {
				b.Fatal(err)
			}
			var runs atomic.Int64
			inner := benchHandler(db, "update")
			h := g.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs.Add(1)
				inner.ServeHTTP(w, r)
			}))
			const keys = 1000
			idempotencytest.Seed(h, keys, "replay")
			if n := runs.Swap(0); n != keys {
				b.Fatalf("seeding %d keys ran the handler %d times", keys, n)
			}
			idempotencytest.RunClients(b, h, 2, keys, "replay")
			if n := runs.Load(); n != 0 {
				b.Fatalf("the handler ran %d times on replays", n)
			}
		})
	}
}
