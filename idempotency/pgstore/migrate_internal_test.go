package pgstore

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerworks/ledger/idempotency"
	"github.com/ledgerworks/ledger/internal/pgschema"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// olderSchemaSQL is the schema of the version before the heap-only
// finishes: expires_at updated by every finish, a partial index on status
// for recovery, no watermark.
const olderSchemaSQL = `
CREATE TABLE idempotency_records (
	operation        text COLLATE "C" NOT NULL,
	user_id          text COLLATE "C" NOT NULL,
	key              text COLLATE "C" NOT NULL,
	status           text NOT NULL CHECK (status IN ('PROCESSING', 'SUCCESS', 'FAILED')),
	request_hash     bytea NOT NULL,
	token            text NOT NULL,
	attempt          integer NOT NULL,
	response_status  integer,
	response_headers jsonb,
	response_body    bytea,
	failure          text NOT NULL DEFAULT '',
	created_at       timestamptz NOT NULL,
	updated_at       timestamptz NOT NULL,
	lease_expires_at timestamptz NOT NULL,
	expires_at       timestamptz NOT NULL,
	UNIQUE (operation, user_id, key)
);
CREATE INDEX idempotency_records_expires_at ON idempotency_records (expires_at);
CREATE INDEX idempotency_records_stuck ON idempotency_records (lease_expires_at) WHERE status = 'PROCESSING';
CREATE TABLE idempotency_retry_counts (
	operation  text COLLATE "C" NOT NULL,
	user_id    text COLLATE "C" NOT NULL,
	key        text COLLATE "C" NOT NULL,
	retries    integer NOT NULL,
	expires_at timestamptz NOT NULL,
	PRIMARY KEY (operation, user_id, key)
);
CREATE INDEX idempotency_retry_counts_expires_at ON idempotency_retry_counts (expires_at);
`

// TestMigrateFromOlderSchema: tables of the older version, with a finished
// record and a stuck one, are brought to this one by Migrate (twice, as
// every start does): the partial index is gone, the lease index and the
// fillfactor are there, the watermark starts below the stuck lease, and
// both records keep their meaning (the stuck one is recovered, the
// finished one replays until its expiry, then is cleaned up).
func TestMigrateFromOlderSchema(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	schema := pgtest.NewSchema(t, url)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := pgschema.Apply(ctx, pool, "test/older", schema, olderSchemaSQL); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	records := pgx.Identifier{schema, "idempotency_records"}.Sanitize()
	if _, err := pool.Exec(ctx, `INSERT INTO `+records+` (operation, user_id, key, status, request_hash, token, attempt,
		response_status, response_headers, response_body, created_at, updated_at, lease_expires_at, expires_at) VALUES
		('op', 'u', 'done', 'SUCCESS', '\x01', 't-done', 1, 201, '{}', 'body', $1, $1, $1::timestamptz + interval '10 seconds', $1::timestamptz + interval '1 hour'),
		('op', 'u', 'stuck', 'PROCESSING', '\x02', 't-stuck', 1, NULL, NULL, NULL, $1, $1, $1::timestamptz + interval '10 seconds', $1::timestamptz + interval '1 hour')`,
		now); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, url, Options{Schema: schema}); !errors.Is(err, ErrSchema) {
		t.Fatalf("Open of the older schema without Migrate: %v, want ErrSchema", err)
	}
	for range 2 {
		if err := Migrate(ctx, url, schema); err != nil {
			t.Fatal(err)
		}
	}
	var indexes []string
	if err := pool.QueryRow(ctx, `SELECT array_agg(indexname::text ORDER BY indexname) FROM pg_indexes
		WHERE schemaname = $1 AND tablename = 'idempotency_records'`, schema).Scan(&indexes); err != nil {
		t.Fatal(err)
	}
	want := []string{"idempotency_records_expires_at", "idempotency_records_lease", "idempotency_records_operation_user_id_key_key"}
	if !slices.Equal(indexes, want) {
		t.Fatalf("indexes %v, want %v", indexes, want)
	}
	var options []string
	if err := pool.QueryRow(ctx, `SELECT reloptions FROM pg_class WHERE oid = $1::regclass`, records).Scan(&options); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(options, []string{"fillfactor=" + recordsFillfactor}) {
		t.Fatalf("reloptions %v", options)
	}
	var from time.Time
	if err := pool.QueryRow(ctx, `SELECT leases_ended_by FROM `+pgx.Identifier{schema, "idempotency_recovery"}.Sanitize()).Scan(&from); err != nil {
		t.Fatal(err)
	}
	if want := now.Add(10*time.Second - time.Microsecond); !from.Equal(want) {
		t.Fatalf("watermark %v, want %v: just below the stuck record's lease", from, want)
	}

	s, err := Open(ctx, url, Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	done := idempotency.Scope{Operation: "op", User: "u", Key: "done"}
	later := now.Add(time.Minute)
	if rec, err := s.Get(ctx, done, later); err != nil || rec.Status != idempotency.StatusSuccess ||
		!rec.ExpiresAt.Equal(now.Add(time.Hour)) || string(rec.Response.Body) != "body" {
		t.Fatalf("the older finished record: %+v, %v", rec, err)
	}
	if n, err := s.RecoverStuck(ctx, later, 10, 3, later.Add(time.Hour), later); err != nil || n != 1 {
		t.Fatalf("RecoverStuck of the older stuck record: %d, %v, want 1", n, err)
	}
	if _, err := s.Get(ctx, idempotency.Scope{Operation: "op", User: "u", Key: "stuck"}, later); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("the stuck record after recovery: %v", err)
	}
	if n, err := s.DeleteExpired(ctx, now.Add(time.Hour-time.Second), 10); err != nil || n != 0 {
		t.Fatalf("DeleteExpired before the expiry: %d, %v", n, err)
	}
	if n, err := s.DeleteExpired(ctx, now.Add(time.Hour), 10); err != nil || n != 1 {
		t.Fatalf("DeleteExpired at the expiry: %d, %v, want 1", n, err)
	}
}
