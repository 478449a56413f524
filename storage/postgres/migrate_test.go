package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerworks/ledger/storage/postgres"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// withParams returns dbURL with query parameters added.
func withParams(t *testing.T, dbURL string, kv ...string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for i := 0; i < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func TestMigrate(t *testing.T) {
	dbURL := pgtest.URL(t)
	schema := pgtest.NewSchema(t, dbURL)
	ctx := context.Background()
	schemaURL := withParams(t, dbURL, "search_path", schema)

	// NoMigrate refuses a database without the schema.
	if _, err := postgres.Open(ctx, dbURL, postgres.Options{Schema: schema, NoMigrate: true}); !errors.Is(err, postgres.ErrSchemaVersion) {
		t.Fatalf("open without migrating a missing schema: %v", err)
	}
	// The search_path of the URL names the schema; the first run applies
	// every migration, the second none.
	applied, err := postgres.Migrate(ctx, schemaURL)
	if err != nil {
		t.Fatal(err)
	}
	if want := postgres.SchemaVersion(); len(applied) != want || applied[0] != 1 {
		t.Fatalf("applied %v, want versions 1..%d", applied, want)
	}
	if applied, err := postgres.Migrate(ctx, schemaURL); err != nil || len(applied) != 0 {
		t.Fatalf("second migrate applied %v, %v", applied, err)
	}
	b, err := postgres.Open(ctx, schemaURL, postgres.Options{NoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	if b.Schema() != schema {
		t.Fatalf("schema %q, want the URL's search_path %q", b.Schema(), schema)
	}
	appendN(t, b, "c", 0, 1, true)
	b.Close()

	// A schema migrated by a newer program is refused.
	conn, err := pgtest.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, fmt.Sprintf("INSERT INTO %s.schema_migrations (version, name) VALUES ($1, 'future')",
		pgx.Identifier{schema}.Sanitize()), postgres.SchemaVersion()+1); err != nil {
		t.Fatal(err)
	}
	if _, err := postgres.Open(ctx, dbURL, postgres.Options{Schema: schema}); !errors.Is(err, postgres.ErrSchemaVersion) {
		t.Fatalf("open of a newer schema: %v", err)
	}
}

// Many processes starting at once on a fresh schema apply each migration
// once.
func TestConcurrentOpensMigrateOnce(t *testing.T) {
	dbURL := pgtest.URL(t)
	schema := pgtest.NewSchema(t, dbURL)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := postgres.Open(ctx, dbURL, postgres.Options{Schema: schema})
			if err != nil {
				errs <- err
				return
			}
			b.Close()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	conn, err := pgtest.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n, maxV int
	if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT count(*), max(version) FROM %s.schema_migrations",
		pgx.Identifier{schema}.Sanitize())).Scan(&n, &maxV); err != nil {
		t.Fatal(err)
	}
	if n != postgres.SchemaVersion() || maxV != postgres.SchemaVersion() {
		t.Fatalf("schema_migrations has %d rows up to version %d, want %d", n, maxV, postgres.SchemaVersion())
	}
}

// A pooled connection that the server ended while it was idle is replaced
// transparently at the first round trip of the next transaction.
func TestDeadPooledConnectionIsReplaced(t *testing.T) {
	dbURL := pgtest.URL(t)
	schema := pgtest.NewSchema(t, dbURL)
	ctx := context.Background()
	app := "lt_" + schema[len(schema)-12:]
	b, err := postgres.Open(ctx, withParams(t, dbURL, "application_name", app), postgres.Options{Schema: schema, MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	appendN(t, b, "c", 0, 1, true)

	conn, err := pgtest.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1",
		app).Scan(&n); err != nil || n != 1 {
		t.Fatalf("terminated %d sessions, %v; want the pool's one", n, err)
	}
	for _, writable := range []bool{true, false} {
		tx, err := b.Begin(ctx, writable)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if h, err := tx.Head(ctx, "c"); err != nil || h.Seq != 1 {
			t.Fatalf("head on a replaced connection (writable %v): %v, %v", writable, h, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if writable {
			conn.QueryRow(ctx, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n)
		}
	}
}
