package pgstore_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/idempotency"
	"github.com/ledgerworks/ledger/idempotency/idempotencytest"
	"github.com/ledgerworks/ledger/idempotency/pgstore"
	"github.com/ledgerworks/ledger/storage/postgres"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// appendHandler appends one entry to a ledger on PostgreSQL, keyed by the
// request's scope when guarded.
func appendHandler(db *chain.DB) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		key := "pay:" + r.Header.Get("Idempotency-Key")
		if ic := idempotency.FromContext(r.Context()); ic != nil {
			key = ic.LedgerKey("pay:")
		}
		res, err := db.Append(r.Context(), chain.Request{Chain: "acme/payments", IdempotencyKey: key, Type: "payment/v1", Payload: body})
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(201)
		fmt.Fprintf(w, `{"seq":%d}`, res.Entry.Seq)
	})
}

// BenchmarkPostgres: 64 clients with new keys, on PostgreSQL. "bare-insert"
// is a handler doing one INSERT … ON CONFLICT DO NOTHING per request on a
// pool of the ledger's size (the floor of any guard on this database); "ledger" appends one ledger entry
// (ledger on PostgreSQL), unguarded; "guarded" is the same handler behind
// the guard with the PostgreSQL store; "guarded-tx" appends through the
// guard's Context.Update, its SUCCESS record in the ledger's transaction.
// "replays" retries 1,000 finished requests on 2 goroutines.
func BenchmarkPostgres(b *testing.B) {
	url := pgtest.URL(b)
	ctx := context.Background()
	b.Run("bare-insert", func(b *testing.B) {
		schema := pgtest.NewSchema(b, url)
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			b.Fatal(err)
		}
		cfg.MaxConns = 32 // the ledger's pool size below
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		defer pool.Close()
		if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema+"; CREATE TABLE "+schema+".bare (key text PRIMARY KEY, body bytea NOT NULL)"); err != nil {
			b.Fatal(err)
		}
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if _, err := pool.Exec(r.Context(), "INSERT INTO "+schema+".bare (key, body) VALUES ($1, $2) ON CONFLICT DO NOTHING",
				r.Header.Get("Idempotency-Key"), body); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(201)
		})
		idempotencytest.RunClients(b, h, 64, 0, fmt.Sprint("bare", b.N))
	})
	for _, guarded := range []bool{false, true} {
		name := "ledger"
		if guarded {
			name = "guarded"
		}
		b.Run(name, func(b *testing.B) {
			db, err := chain.OpenBackend(pgtest.OpenWith(b, postgres.Options{MaxConns: 32}), chain.Options{})
			if err != nil {
				b.Fatal(err)
			}
			h := appendHandler(db)
			if guarded {
				g, err := idempotency.New(idempotency.Options{Store: openB(b), User: func(*http.Request) (string, error) { return "alice", nil },
					Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					b.Fatal(err)
				}
				h = g.Middleware(h)
			}
			idempotencytest.RunClients(b, h, 64, 0, fmt.Sprint(name, b.N))
		})
	}
	b.Run("guarded-tx", func(b *testing.B) {
		// The handler writes through Context.Update: its SUCCESS record
		// commits in the ledger's transaction, with the group's COMMIT.
		db, err := chain.OpenBackend(pgtest.OpenWith(b, postgres.Options{MaxConns: 32}), chain.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		s, err := pgstore.Open(ctx, url, pgstore.Options{Schema: pgtest.NewSchema(b, url), Migrate: true, MaxConns: 32, Ledger: db})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		g, err := idempotency.New(idempotency.Options{Store: s, User: func(*http.Request) (string, error) { return "alice", nil },
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		idempotencytest.RunClients(b, g.Middleware(txHandler(nil)), 64, 0, fmt.Sprint("guarded-tx", b.N))
	})
	b.Run("replays", func(b *testing.B) {
		g, err := idempotency.New(idempotency.Options{Store: openB(b), User: func(*http.Request) (string, error) { return "alice", nil },
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		h := g.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(201); w.Write([]byte(`{"seq":1}`)) }))
		idempotencytest.Seed(h, 1000, "replay")
		idempotencytest.RunClients(b, h, 2, 1000, "replay")
	})
}

// openB is open for benchmarks.
func openB(b *testing.B) *pgstore.Store {
	url := pgtest.URL(b)
	schema := pgtest.NewSchema(b, url)
	s, err := pgstore.Open(context.Background(), url, pgstore.Options{Schema: schema, Migrate: true, MaxConns: 32})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	return s
}
