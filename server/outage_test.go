package server_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/idempotency"
	"github.com/ledgerworks/ledger/idempotency/pgstore"
	"github.com/ledgerworks/ledger/server"
	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
	"github.com/ledgerworks/ledger/storage/storagetest"
)

// Commit modes of outageBackend.
const (
	commitPasses  = iota
	commitRefused // the store refuses the commit: nothing is written (a full disk)
	commitUnknown // the commit is written, and its answer lost (a connection lost during COMMIT)
)

// outageBackend fails the commits of writable transactions as its mode
// says, with errors matching storage.ErrIO, as a store in an outage does.
type outageBackend struct {
	storage.Backend
	mode atomic.Int32
}

type outageTx struct {
	storage.Tx
	b *outageBackend
}

func (b *outageBackend) Begin(ctx context.Context, writable bool) (storage.Tx, error) {
	tx, err := b.Backend.Begin(ctx, writable)
	if err != nil || !writable {
		return tx, err
	}
	return &outageTx{Tx: tx, b: b}, nil
}

func (t *outageTx) Commit() error {
	switch t.b.mode.Load() {
	case commitRefused:
		_ = t.Tx.Rollback()
		return fmt.Errorf("commit: no space left on device: %w", storage.ErrIO)
	case commitUnknown:
		if err := t.Tx.Commit(); err != nil {
			return err
		}
		return fmt.Errorf("connection lost during commit, outcome unknown: %w", storage.ErrIO)
	}
	return t.Tx.Commit()
}

// Exec forwards a statement of the caller's (the guard's SUCCESS record)
// to a SQL backend's transaction.
func (t *outageTx) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	e, ok := t.Tx.(storage.Execer)
	if !ok {
		return 0, chain.ErrExecUnsupported
	}
	return e.Exec(ctx, sql, args...)
}

// ExecAtCommit forwards a statement held for the commit (the guard's
// SUCCESS record) to a SQL backend's transaction.
func (t *outageTx) ExecAtCommit(sql string, args []any, none error) int {
	return t.Tx.(storage.CommitExecer).ExecAtCommit(sql, args, none)
}

// startOutageServer serves a ledger whose commits fail as the returned
// backend's mode says: on the embedded default with a guard store of its
// own (the ledger store holds the file itself), or on PostgreSQL with
// pgstore, whose SUCCESS records commit in the ledger's transactions.
func startOutageServer(t *testing.T, backend string) (*testServer, *outageBackend, string) {
	t.Helper()
	b := &outageBackend{}
	opts := server.Options{IdempotencyCacheSize: -1}
	if backend == "postgres" {
		b.Backend = pgtest.Open(t)
	} else {
		b.Backend = storagetest.OpenBolt(t)
		opts.IdempotencyStore = idempotency.NewMemoryStore()
	}
	db, err := chain.OpenBackend(b, chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if backend == "postgres" {
		url := pgtest.URL(t)
		store, err := pgstore.Open(context.Background(), url, pgstore.Options{Schema: pgtest.NewSchema(t, url), Migrate: true, Ledger: db})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(store.Close)
		opts.IdempotencyStore = store
	}
	ts := startServer(t, db, opts)
	return ts, b, ts.key("acme", allScopes...)
}

// forOutageBackends runs fn on the embedded default, and on PostgreSQL
// when it is configured.
func forOutageBackends(t *testing.T, fn func(t *testing.T, backend string)) {
	t.Run("bolt", func(t *testing.T) { fn(t, "bolt") })
	if pgtest.Available(t) {
		t.Run("postgres", func(t *testing.T) { fn(t, "postgres") })
	}
}

// A store that fails to commit is an outage: 503 with Retry-After, as
// often as it lasts, and the key is never poisoned by it; once the store
// answers, the request runs, once.
func TestStoreOutageIs503AndNeverPoisonsTheKey(t *testing.T) {
	forOutageBackends(t, testStoreOutage)
}

func testStoreOutage(t *testing.T, backend string) {
	ts, b, token := startOutageServer(t, backend)
	body := api.AppendRequest{Type: "order/v1", Payload: []byte(`{"id":1}`)}
	b.mode.Store(commitRefused)
	for i := range 5 { // more than the guard's three retries
		r := ts.do(http.MethodPost, "/v1/chains/orders/entries", token, "k-1", body)
		p := r.wantProblem(t, http.StatusServiceUnavailable, api.CodeStorage)
		if r.header.Get("Retry-After") == "" {
			t.Fatalf("outage %d: no Retry-After: %+v", i+1, p)
		}
	}
	b.mode.Store(commitPasses)
	first := ts.do(http.MethodPost, "/v1/chains/orders/entries", token, "k-1", body)
	if first.status != http.StatusCreated || first.header.Get(api.HeaderReplayed) != "" {
		t.Fatalf("after the outage: %d %s, want the request run", first.status, first.body)
	}
	again := ts.do(http.MethodPost, "/v1/chains/orders/entries", token, "k-1", body)
	if again.status != http.StatusCreated || again.header.Get(api.HeaderReplayed) != "true" || !bytes.Equal(again.body, first.body) {
		t.Fatalf("retry: %d %v %s, want the replay of %s", again.status, again.header, again.body, first.body)
	}
	if h, err := ts.db.Head(context.Background(), "acme/orders"); err != nil || h.Seq != 1 {
		t.Fatalf("head %+v, %v: want one entry", h, err)
	}
}

// A commit whose outcome is unknown is answered 503; the retry finds what
// was committed and replays it: the entry is written once. On PostgreSQL
// the guard's record committed with the entry and replays the response;
// beside a guard store of its own, the ledger's key replays the entry.
func TestCommitOutcomeUnknownIsResolvedByTheRetry(t *testing.T) {
	forOutageBackends(t, testCommitUnknown)
}

func testCommitUnknown(t *testing.T, backend string) {
	ts, b, token := startOutageServer(t, backend)
	body := api.AppendRequest{Type: "order/v1", Payload: []byte(`{"id":2}`)}
	b.mode.Store(commitUnknown)
	ts.do(http.MethodPost, "/v1/chains/orders/entries", token, "k-2", body).wantProblem(t, http.StatusServiceUnavailable, api.CodeStorage)
	b.mode.Store(commitPasses)
	retry := ts.do(http.MethodPost, "/v1/chains/orders/entries", token, "k-2", body)
	var got api.AppendResponse
	retry.decode(t, http.StatusCreated, &got)
	if (backend == "postgres") != (retry.header.Get(api.HeaderReplayed) == "true") || got.Seq != 1 {
		t.Fatalf("retry after the unknown outcome: %v %s, want the committed entry replayed", retry.header, retry.body)
	}
	again := ts.do(http.MethodPost, "/v1/chains/orders/entries", token, "k-2", body)
	if !bytes.Equal(again.body, retry.body) {
		t.Fatalf("replays differ: %s and %s", retry.body, again.body)
	}
	if h, err := ts.db.Head(context.Background(), "acme/orders"); err != nil || h.Seq != 1 {
		t.Fatalf("head %+v, %v: want one entry", h, err)
	}
}
