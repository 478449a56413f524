package pgbuckets

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerworks/ledger/internal/pgschema"
	"github.com/ledgerworks/ledger/server/ratelimit"
)

// DefaultSchema is the schema of the table when Options.Schema is empty
// and the connection string names none: the ledger's default schema.
const DefaultSchema = "ledger"

// Limits and intervals.
const (
	// RateMax is the largest rate a bucket may have: its emission
	// interval is at least one microsecond.
	RateMax = 1_000_000
	// BucketSizeMax bounds a bucket's name in bytes.
	BucketSizeMax = 512
	// SweepInterval is how often Take deletes full buckets' rows.
	SweepInterval = time.Minute
	// SweepBatchMax bounds the rows one sweep deletes.
	SweepBatchMax = 1000
	// TakeBucketsMax bounds the buckets of one Take or Give (a request
	// spends from its address's and its key's).
	TakeBucketsMax = 8
)

var (
	// ErrSchema: the table is missing; run `ledgerctl migrate` or open
	// with Options.Migrate.
	ErrSchema = errors.New("pgbuckets: table ratelimit_buckets missing; run `ledgerctl migrate`")
	// ErrInvalidBucket is matched by a refusal of a bucket's name, rate or
	// burst out of bounds.
	ErrInvalidBucket = errors.New("pgbuckets: invalid bucket")
)

// Options configure Open.
type Options struct {
	// Schema holds the table. Empty: the first schema of the connection
	// string's search_path, else DefaultSchema, as the ledger's tables.
	Schema string
	// Migrate creates the table on Open when it is missing; when false,
	// Open fails with ErrSchema instead.
	Migrate bool
	// MaxConns is the pool size; 0 keeps pgxpool's default.
	MaxConns int32
	// Now, when set, is the clock instead of the database's (for tests:
	// the instants a test chooses). Every instance must use one clock.
	Now func() time.Time
}

// Store is the PostgreSQL ratelimit.Store. It is safe for concurrent use.
type Store struct {
	pool      *pgxpool.Pool
	ownsPool  bool
	now       func() time.Time
	take      string // statements on the qualified table
	give      string
	sweep     string
	nextSweep atomic.Int64 // Unix ns of the process clock
	swept     atomic.Int64 // rows the sweeps deleted
}

var _ ratelimit.Store = (*Store)(nil)

// Open connects to the database at url and returns its store; Close
// closes the pool.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("pgbuckets: %w", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	// A bucket's update need not wait for the WAL's flush: a crash of
	// the database forgets at most the last moments' spending, which
	// lets a few requests more through once, never fewer.
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	schema := pgschema.Choose(cfg, opts.Schema, DefaultSchema)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgbuckets: %w", err)
	}
	if opts.Migrate {
		if err := MigratePool(ctx, pool, schema); err != nil {
			pool.Close()
			return nil, err
		}
	}
	s := New(pool, schema)
	s.ownsPool, s.now = true, opts.Now
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", pgx.Identifier{schema, "ratelimit_buckets"}.Sanitize()).Scan(&exists); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgbuckets: %w", err)
	}
	if !exists {
		pool.Close()
		return nil, ErrSchema
	}
	return s, nil
}

// New returns the store of the table in schema (DefaultSchema when
// empty) on pool, which stays the caller's; the clock is the database's.
// Open's pool commits without waiting for the WAL's flush
// (synchronous_commit off), which a bucket does not need; give New a
// pool that does the same, or each request waits for a flush.
func New(pool *pgxpool.Pool, schema string) *Store {
	if schema == "" {
		schema = DefaultSchema
	}
	t := pgx.Identifier{schema, "ratelimit_buckets"}.Sanitize()
	s := &Store{pool: pool,
		take:  strings.ReplaceAll(sqlTake, "ratelimit_buckets", t),
		give:  strings.ReplaceAll(sqlGive, "ratelimit_buckets", t),
		sweep: strings.ReplaceAll(sqlSweep, "ratelimit_buckets", t)}
	s.nextSweep.Store(time.Now().Add(SweepInterval).UnixNano())
	return s
}

// Close closes the pool Open made.
func (s *Store) Close() {
	if s.ownsPool {
		s.pool.Close()
	}
}

// Swept returns the rows of full buckets the sweeps deleted.
func (s *Store) Swept() int64 { return s.swept.Load() }

// sqlNow is the database's clock in microseconds since the Unix epoch,
// unless $4 gives the instant.
const sqlNow = "coalesce($4::bigint, floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint)"

// sqlTake: $1 the bucket, $2 T, $3 τ (both µs), $4 the instant or NULL.
// A first request finds no row and inserts a bucket it has spent one
// token of (tat = now + T); otherwise the update tests and moves tat.
// excluded.tat − T is the statement's now; seen keeps it for RETURNING,
// which sees only the new row. The answer is whether the request was
// allowed and, when not, the wait in µs.
const sqlTake = `INSERT INTO ratelimit_buckets AS b (bucket, tat, seen, ok)
	SELECT $1, n + $2, n, true FROM ` + "(SELECT " + sqlNow + ` AS n) AS c
	ON CONFLICT (bucket) DO UPDATE SET
		ok = greatest(b.tat, excluded.seen) - excluded.seen <= $3,
		tat = CASE WHEN greatest(b.tat, excluded.seen) - excluded.seen <= $3
			THEN greatest(b.tat, excluded.seen) + $2 ELSE b.tat END,
		seen = excluded.seen
	RETURNING ok, greatest(tat - seen - $3, 0)`

// sqlGive puts a token back: $1 the bucket, $2 T.
const sqlGive = "UPDATE ratelimit_buckets SET tat = tat - $2 WHERE bucket = $1"

// sqlSweep deletes full buckets' rows ($1 the instant or NULL as $4 of
// sqlNow): tat is rechecked on the row a concurrent Take may have moved,
// so a bucket spent meanwhile stays.
var sqlSweep = strings.ReplaceAll(`DELETE FROM ratelimit_buckets WHERE tat < `+sqlNow+` AND bucket IN (
	SELECT bucket FROM ratelimit_buckets WHERE tat < `+sqlNow+` LIMIT `+fmt.Sprint(SweepBatchMax)+`)`, "$4", "$1")

// params checks a bucket and returns its emission interval and tolerance
// in microseconds.
func params(b ratelimit.Bucket) (t, tau int64, err error) {
	bucket, limit, burst := b.Name, b.Limit, b.Burst
	switch {
	case len(bucket) == 0 || len(bucket) > BucketSizeMax:
		return 0, 0, fmt.Errorf("%w: name of %d bytes, want 1 to %d", ErrInvalidBucket, len(bucket), BucketSizeMax)
	case !(limit > 0 && limit <= RateMax):
		return 0, 0, fmt.Errorf("%w: rate %v, want above 0 and at most %d a second", ErrInvalidBucket, limit, RateMax)
	case burst < 1 || burst > ratelimit.BurstMax:
		return 0, 0, fmt.Errorf("%w: burst %d, want 1 to %d", ErrInvalidBucket, burst, ratelimit.BurstMax)
	}
	t = max(int64(math.Round(1e6/float64(limit))), 1)
	return t, int64(burst-1) * t, nil
}

// instant is the clock's reading in µs, or nil for the database's.
func (s *Store) instant() any {
	if s.now == nil {
		return nil
	}
	return s.now().UnixMicro()
}

// Take implements ratelimit.Store: one statement a bucket, all in one
// round trip (with, once every SweepInterval, the sweep). It takes at
// most TakeBucketsMax buckets.
func (s *Store) Take(ctx context.Context, buckets []ratelimit.Bucket) ([]ratelimit.Taken, error) {
	if len(buckets) == 0 || len(buckets) > TakeBucketsMax {
		return nil, fmt.Errorf("%w: %d buckets, want 1 to %d", ErrInvalidBucket, len(buckets), TakeBucketsMax)
	}
	at := s.instant()
	taken := make([]ratelimit.Taken, len(buckets))
	b := &pgx.Batch{}
	for i, bk := range buckets {
		t, tau, err := params(bk)
		if err != nil {
			return nil, err
		}
		b.Queue(s.take, bk.Name, t, tau, at).QueryRow(func(row pgx.Row) error {
			var waitUs int64
			if err := row.Scan(&taken[i].OK, &waitUs); err != nil {
				return err
			}
			if !taken[i].OK {
				taken[i].Wait = time.Duration(waitUs) * time.Microsecond
			}
			return nil
		})
	}
	if next := s.nextSweep.Load(); time.Now().UnixNano() >= next &&
		s.nextSweep.CompareAndSwap(next, time.Now().Add(SweepInterval).UnixNano()) {
		b.Queue(s.sweep, at).Exec(func(ct pgconn.CommandTag) error {
			s.swept.Add(ct.RowsAffected())
			return nil
		})
	}
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("pgbuckets: take: %w", err)
	}
	return taken, nil
}

// Give implements ratelimit.Store, in one round trip.
func (s *Store) Give(ctx context.Context, buckets []ratelimit.Bucket) error {
	if len(buckets) == 0 || len(buckets) > TakeBucketsMax {
		return fmt.Errorf("%w: %d buckets, want 1 to %d", ErrInvalidBucket, len(buckets), TakeBucketsMax)
	}
	b := &pgx.Batch{}
	for _, bk := range buckets {
		t, _, err := params(bk)
		if err != nil {
			return err
		}
		b.Queue(s.give, bk.Name, t)
	}
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("pgbuckets: give: %w", err)
	}
	return nil
}

// Sweep deletes the rows of full buckets, at most SweepBatchMax, now
// rather than at the next interval, and returns how many it deleted.
func (s *Store) Sweep(ctx context.Context) (int64, error) {
	ct, err := s.pool.Exec(ctx, s.sweep, s.instant())
	if err != nil {
		return 0, fmt.Errorf("pgbuckets: sweep: %w", err)
	}
	s.swept.Add(ct.RowsAffected())
	return ct.RowsAffected(), nil
}

// Migrate creates the table in the schema (the connection string's
// search_path when schema is empty) of the database at url, when it is
// missing.
func Migrate(ctx context.Context, url, schema string) error {
	pool, schema, err := pgschema.MigrationPool(ctx, url, schema, DefaultSchema)
	if err != nil {
		return fmt.Errorf("pgbuckets: %w", err)
	}
	defer pool.Close()
	return MigratePool(ctx, pool, schema)
}

// MigratePool is Migrate on a pool.
func MigratePool(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	if schema == "" {
		schema = DefaultSchema
	}
	if err := pgschema.Apply(ctx, pool, "ratelimit/migrate", schema, schemaSQL); err != nil {
		return fmt.Errorf("pgbuckets: migrate: %w", err)
	}
	return nil
}

// schemaSQL creates the table: one row a bucket, kept while it is not
// full. tat and seen are µs since the Unix epoch; ok is the last Take's
// answer (RETURNING sees only the new row).
const schemaSQL = `
CREATE TABLE IF NOT EXISTS ratelimit_buckets (
	bucket bytea PRIMARY KEY,
	tat    bigint NOT NULL,
	seen   bigint NOT NULL,
	ok     boolean NOT NULL
) WITH (fillfactor = 50);
`
