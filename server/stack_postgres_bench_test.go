package server_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/idempotency/pgstore"
	"github.com/ledgerworks/ledger/server"
	"github.com/ledgerworks/ledger/server/servertest"
	"github.com/ledgerworks/ledger/storage/postgres"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// BenchmarkStackPostgres is BenchmarkStack's full-append on PostgreSQL, as
// ledgerctl serve runs it there: the replay guard on idempotency/pgstore
// with the ledger (its claims batched, its SUCCESS records in the
// entries' transactions), keyed raw appends over 8 chains, 64
// goroutines. cpu-ns/op is this process's CPU a request (the handlers,
// the guard, the group commit and pgx; not PostgreSQL's), allocs/op its
// allocations. It skips without LEDGER_TEST_POSTGRES_URL.
//
//	go test -run '^$' -bench BenchmarkStackPostgres -cpu 2 -benchmem ./server
func BenchmarkStackPostgres(b *testing.B) {
	url := pgtest.URL(b)
	backend := pgtest.OpenWith(b, postgres.Options{})
	db, err := chain.OpenBackend(backend, chain.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	store, err := pgstore.Open(context.Background(), url, pgstore.Options{Schema: backend.Schema(), Migrate: true, Ledger: db})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(store.Close)
	token := servertest.Key(b, db, "acme", apikey.ScopeRead, apikey.ScopeWrite)
	srv, err := server.New(server.Options{DB: db, IdempotencyStore: store, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Stop(context.Background()) })
	h := srv.Handler()
	var next atomic.Int64
	runStack(b, func(w *discardWriter) { serveAppend(b, h, token, 8, next.Add(1), w) })
}
