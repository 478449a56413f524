package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/ledgerworks/ledger/internal/pgsession"
	"github.com/ledgerworks/ledger/internal/pgtrace"
	"github.com/ledgerworks/ledger/storage"
)

// Limits and defaults.
const (
	// MaxSeq is the highest seq the entries table can hold (bigint).
	MaxSeq = math.MaxInt64

	// DefaultSchema is the schema that holds the ledger tables when neither
	// Options.Schema nor the connection string's search_path names one.
	DefaultSchema = "ledger"

	// ScanPageSize is the number of rows that Entries, Chains and StateScan
	// fetch per query, and so the most they hold in memory at once.
	ScanPageSize = 256

	// MaxBufferedEntries and MaxBufferedBytes bound the appends and state
	// writes a transaction keeps in memory before it sends them to the
	// server; whichever is reached first triggers the flush.
	MaxBufferedEntries = 4096
	MaxBufferedBytes   = 8 << 20

	// UnorderedLockWait bounds the wait for a chain head that a transaction
	// locks while it holds the head of a chain whose name sorts after it.
	// Such a wait can be part of a deadlock (two group commits in two
	// processes locking the same chains in different orders); instead of
	// waiting for the server's deadlock detection (deadlock_timeout, 1s by
	// default) the transaction fails with ErrRetryable after this time.
	// Heads locked in ascending order wait without bound (or
	// Options.LockTimeout, which also caps this wait), and cannot deadlock
	// among themselves.
	UnorderedLockWait = 50 * time.Millisecond

	// DefaultCommitTimeout bounds a COMMIT round trip, and the time spent
	// establishing the outcome of a commit whose connection was lost.
	DefaultCommitTimeout = 30 * time.Second
)

// Options configure Open.
type Options struct {
	// Schema is the PostgreSQL schema that holds the ledger tables; it is
	// created when missing. Empty means the connection string's
	// search_path (a single name is created when missing; of a list, the
	// first schema that exists is used), or DefaultSchema when it sets
	// none.
	Schema string

	// NoMigrate makes Open fail with ErrSchemaVersion instead of applying
	// missing migrations (for deployments where the service's role has no
	// DDL rights and `ledgerctl migrate` runs separately).
	NoMigrate bool

	// MaxConns is the pool size; 0 keeps pgxpool's default (or the
	// connection string's pool_max_conns).
	MaxConns int32

	// LockTimeout, when positive, bounds the wait for a chain head that
	// another transaction holds; the waiting transaction then fails with
	// ErrRetryable. Zero waits as long as the holder runs.
	LockTimeout time.Duration

	// CommitTimeout bounds COMMIT; 0 means DefaultCommitTimeout.
	CommitTimeout time.Duration

	// TracerProvider, when set, makes each statement and statement batch
	// a span ("postgres SELECT", "postgres BATCH") under the span of the
	// call's context, when that one records. None when nil.
	TracerProvider trace.TracerProvider
}

// Backend is a storage.Backend on a PostgreSQL database. It is safe for
// concurrent use; each transaction holds one pooled connection.
type Backend struct {
	pool   *pgxpool.Pool
	name   string
	schema string
	opts   Options
	closed atomic.Bool
	// roundTrips counts the statement batches transactions sent and the
	// statements ReadKey and ReadKeys sent, for tests that check what a
	// batch of look-ups costs.
	roundTrips atomic.Int64
	filters    *keyFilters
	seen       *headsSeen
	// shortLockWait sets the wait for a head locked out of order.
	shortLockWait string
	// lastHeld is the statement ExecAtCommit last wrapped (heldSQL).
	lastHeld atomic.Pointer[heldStmt]
}

var _ storage.Backend = (*Backend)(nil)

// Open connects to the database at url (a postgres:// URL or a keyword/value
// connection string), applies missing schema migrations (unless
// opts.NoMigrate) and returns the backend.
func Open(ctx context.Context, url string, opts Options) (*Backend, error) {
	cfg, schema, err := poolConfig(url, opts)
	if err != nil {
		return nil, err
	}
	if opts.CommitTimeout <= 0 {
		opts.CommitTimeout = DefaultCommitTimeout
	}
	name := RedactURL(url)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open %s: %w", name, classify(err, false))
	}
	wait := UnorderedLockWait
	if opts.LockTimeout > 0 {
		wait = min(wait, opts.LockTimeout)
	}
	b := &Backend{pool: pool, name: name, schema: schema, opts: opts, filters: newKeyFilters(), seen: newHeadsSeen(),
		shortLockWait: fmt.Sprintf("SET LOCAL lock_timeout = %d", max(wait.Milliseconds(), 1))}
	if _, err := migrate(ctx, pool, schema, opts.NoMigrate); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: open %s: %w", name, err)
	}
	return b, nil
}

// Migrate applies the schema migrations that the database at url lacks and
// returns the versions it applied (none when the schema is current). The
// schema is the connection string's search_path, or DefaultSchema. Open does
// the same unless Options.NoMigrate is set.
func Migrate(ctx context.Context, url string) (applied []int, err error) {
	cfg, schema, err := poolConfig(url, Options{MaxConns: 1})
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: migrate %s: %w", RedactURL(url), classify(err, false))
	}
	defer pool.Close()
	applied, err = migrate(ctx, pool, schema, false)
	if err != nil {
		return nil, fmt.Errorf("postgres: migrate %s: %w", RedactURL(url), err)
	}
	return applied, nil
}

// poolConfig parses url and applies opts. The schema it returns is the one
// migrations create; it is empty when the connection string's search_path
// decides.
func poolConfig(url string, opts Options) (*pgxpool.Config, string, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// The parser's errors may quote the connection string, password
		// included; never repeat them.
		return nil, "", errors.New("postgres: invalid connection string (expected postgres://user:password@host:port/database?options)")
	}
	params := cfg.ConnConfig.RuntimeParams
	schema := opts.Schema
	if schema == "" {
		schema = singleSchema(params["search_path"])
	}
	if schema == "" && params["search_path"] == "" {
		schema = DefaultSchema
	}
	if schema != "" {
		if strings.ContainsRune(schema, 0) {
			return nil, "", fmt.Errorf("postgres: schema name contains NUL")
		}
		params["search_path"] = pgx.Identifier{schema}.Sanitize()
	}
	if opts.LockTimeout > 0 {
		params["lock_timeout"] = fmt.Sprintf("%dms", max(opts.LockTimeout.Milliseconds(), 1))
	}
	if _, ok := params["application_name"]; !ok {
		params["application_name"] = "ledger"
	}
	pgsession.Defaults(cfg)
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if t := pgtrace.New(opts.TracerProvider); t != nil {
		cfg.ConnConfig.Tracer = t
	}
	return cfg, schema, nil
}

// singleSchema returns the schema that a search_path of one name selects
// (unquoted names fold to lower case, as in SQL), or "" for a list.
func singleSchema(path string) string {
	path = strings.TrimSpace(path)
	if len(path) >= 2 && path[0] == '"' && path[len(path)-1] == '"' {
		inner := path[1 : len(path)-1]
		if !strings.Contains(strings.ReplaceAll(inner, `""`, ""), `"`) {
			return strings.ReplaceAll(inner, `""`, `"`)
		}
		return ""
	}
	for i, r := range path {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && (r >= '0' && r <= '9' || r == '$')) {
			return ""
		}
	}
	return strings.ToLower(path)
}

// Name returns the connection URL without its password.
func (b *Backend) Name() string { return b.name }

// Schema returns the schema that holds the ledger tables (empty when the
// connection string's search_path lists several and the first that exists
// decides).
func (b *Backend) Schema() string { return b.schema }

// Stats reports the total size on disk (tables, indexes and TOAST) of the
// ledger's tables in its schema, not of the whole database, which other
// applications may share.
func (b *Backend) Stats(ctx context.Context) (storage.Stats, error) {
	if b.closed.Load() {
		return storage.Stats{}, storage.ErrClosed
	}
	var size int64
	err := b.pool.QueryRow(ctx, sqlStats).Scan(&size)
	if err != nil {
		return storage.Stats{}, fmt.Errorf("postgres: stats: %w", classify(err, false))
	}
	return storage.Stats{SizeBytes: size}, nil
}

// Close closes the pool. Transactions must have ended.
func (b *Backend) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	b.pool.Close()
	return nil
}

// Begin starts a transaction. No round trip happens here: BEGIN is sent
// together with the transaction's first statement.
func (b *Backend) Begin(ctx context.Context, writable bool) (storage.Tx, error) {
	if b.closed.Load() {
		return nil, storage.ErrClosed
	}
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		if b.closed.Load() {
			return nil, storage.ErrClosed
		}
		return nil, fmt.Errorf("postgres: begin: %w", classify(err, false))
	}
	return newTx(ctx, b, conn, writable), nil
}

// RedactURL returns the connection string s as a URL without its password,
// for messages.
func RedactURL(s string) string {
	if u, err := url.Parse(s); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		if u.User != nil {
			u.User = url.User(u.User.Username())
		}
		q := u.Query()
		if q.Has("password") {
			q.Del("password")
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	// A keyword/value string: rebuild a URL from its parsed parts.
	cfg, err := pgxpool.ParseConfig(s)
	if err != nil {
		return "postgres://(unparsable connection string)"
	}
	c := cfg.ConnConfig
	u := url.URL{Scheme: "postgres", User: url.User(c.User), Path: "/" + c.Database}
	if strings.HasPrefix(c.Host, "/") {
		u.RawQuery = url.Values{"host": {c.Host}}.Encode()
	} else {
		u.Host = net.JoinHostPort(c.Host, fmt.Sprint(c.Port))
	}
	return u.String()
}
