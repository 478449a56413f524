// Package pgtest gives tests a PostgreSQL backend on a schema of their own.
//
// # Basics
//
// The database comes from LEDGER_TEST_POSTGRES_URL (`source .ci/postgres.sh`
// starts a local server and sets it). When the variable is unset, URL skips
// the test with a message saying so, except under CI=true, where an unset
// URL fails the test: CI must not pass by skipping.
//
// Open creates a schema with a random name, opens a backend on it and, at
// the end of the test, closes the backend and drops the schema.
//
// # Caveats
//
// The schemas of tests that were killed before their cleanup ran stay
// behind; they are named ledgertest_* and can be dropped at any time.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerworks/ledger/storage/postgres"
)

// EnvURL names the environment variable holding the test database URL.
const EnvURL = "LEDGER_TEST_POSTGRES_URL"

const (
	ciMessage   = EnvURL + " is not set under CI=true: .ci/run must `source .ci/postgres.sh` before the tests"
	skipMessage = "PostgreSQL tests skipped: " + EnvURL + " is not set (run `source .ci/postgres.sh` to start a local server)"
)

// URL returns the test database URL. It skips the test when EnvURL is
// unset, and fails it instead when CI=true.
func URL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(EnvURL)
	if u != "" {
		return u
	}
	if os.Getenv("CI") == "true" {
		t.Fatal(ciMessage)
	}
	t.Skip(skipMessage)
	return ""
}

// Available reports whether the test database is configured, for tests
// that run on several backends and leave PostgreSQL out rather than skip.
// When it is not, it logs why, or fails the test under CI=true.
func Available(t testing.TB) bool {
	t.Helper()
	if os.Getenv(EnvURL) != "" {
		return true
	}
	if os.Getenv("CI") == "true" {
		t.Error(ciMessage)
	} else {
		t.Log(skipMessage)
	}
	return false
}

// NewSchema returns the name of a fresh schema (not yet created) that is
// dropped, with everything in it, when the test ends.
func NewSchema(t testing.TB, url string) string {
	t.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	schema := "ledgertest_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := DropSchema(ctx, url, schema); err != nil {
			t.Errorf("drop test schema %s: %v", schema, err)
		}
	})
	return schema
}

// SchemaURL creates a fresh, empty schema (dropped, with everything in it,
// when the test ends) and returns url with a search_path that selects it:
// a database of its own for a process that takes only a URL, such as
// `ledgerctl`.
func SchemaURL(t testing.TB, url string) string {
	t.Helper()
	schema := NewSchema(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	separator := "?"
	if strings.Contains(url, "?") {
		separator = "&"
	}
	return url + separator + "search_path=" + schema
}

// Connect opens a single connection to the database at url, which may
// carry pool parameters (pool_max_conns, …) as the backend's URL does.
func Connect(ctx context.Context, url string) (*pgx.Conn, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	return pgx.ConnectConfig(ctx, cfg.ConnConfig)
}

// DropSchema drops schema and everything in it.
func DropSchema(ctx context.Context, url, schema string) error {
	conn, err := Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	return err
}

// Open opens a backend on a fresh schema of the test database; the backend
// is closed and the schema dropped when the test ends.
func Open(t testing.TB) *postgres.Backend {
	t.Helper()
	return OpenWith(t, postgres.Options{})
}

// OpenWith is Open with options; opts.Schema is replaced by the fresh one.
func OpenWith(t testing.TB, opts postgres.Options) *postgres.Backend {
	t.Helper()
	url := URL(t)
	opts.Schema = NewSchema(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := postgres.Open(ctx, url, opts)
	if err != nil {
		t.Fatalf("open test backend: %v", err)
	}
	t.Cleanup(func() {
		// Close waits for open transactions; a test that failed with one
		// open reports it instead of hanging.
		done := make(chan struct{})
		go func() { _ = b.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("closing the test backend: a transaction is still open after 30s")
		}
	})
	return b
}

// OpenShared opens n backends, each with its own connection pool, on one
// fresh schema of the test database, as n processes of one service would
// share a database. The schema is dropped when the test ends; the caller
// closes the backends (a chain.DB does, when it owns one).
func OpenShared(t testing.TB, n int) []*postgres.Backend {
	t.Helper()
	url := URL(t)
	schema := NewSchema(t, url)
	backends := make([]*postgres.Backend, n)
	for i := range backends {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		b, err := postgres.Open(ctx, url, postgres.Options{Schema: schema})
		cancel()
		if err != nil {
			t.Fatalf("open shared backend %d: %v", i, err)
		}
		backends[i] = b
	}
	return backends
}
