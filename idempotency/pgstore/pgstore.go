package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/idempotency"
	"github.com/ledgerworks/ledger/internal/pgschema"
	"github.com/ledgerworks/ledger/internal/pgsession"
	"github.com/ledgerworks/ledger/internal/pgtrace"
)

// DefaultSchema is the schema of the tables when Options.Schema is empty:
// the ledger's default schema.
const DefaultSchema = "ledger"

// cleanupBatchMax bounds the rows one DELETE of DeleteExpired removes.
const cleanupBatchMax = 1000

// ErrSchema: the tables are missing; run `ledgerctl migrate`.
var ErrSchema = errors.New("pgstore: idempotency tables missing; run `ledgerctl migrate`")

// Options configure Open.
type Options struct {
	// Schema holds the tables. Empty: the first schema of the connection
	// string's search_path, else DefaultSchema, as the ledger's tables.
	Schema string
	// Migrate creates missing tables on Open; when false, Open fails with
	// ErrSchema instead (the service's role then needs no DDL rights).
	Migrate bool
	// MaxConns is the size of each of the store's two pools (claims, and
	// the rest); 0 keeps pgxpool's default.
	MaxConns int32
	// Ledger, when set, is the ledger on this same database: the store is
	// then an idempotency.LedgerTxStore, whose SUCCESS record commits in
	// the transaction of the handler's entries (Context.Update). It must
	// be the same database, or every such transaction fails.
	Ledger *chain.DB
	// TracerProvider, when set, makes each statement a span under the
	// span of the call's context, when that one records (the guard's
	// span). None when nil.
	TracerProvider trace.TracerProvider
}

// Store is the PostgreSQL store. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	// claims, when Open made the store, is a second pool on the same
	// database whose sessions default to synchronous_commit off: a claim
	// is then one autocommit INSERT, one statement in one round trip.
	// Nil on New's store (the caller's pool only), whose claims set
	// synchronous_commit in a transaction of their own.
	claims   *pgxpool.Pool
	ownsPool bool
	// claimBatch and successes gather concurrent claims (on the claims
	// pool) and SUCCESS records into one statement each.
	claimBatch   *batcher[idempotency.Claim, claimed1]
	successes    *batcher[success, bool]
	claimsSQL    string
	successesSQL string
	successTxSQL string // SucceedTx's statement, built once
	schema       string
	records      string // qualified table names
	retries      string
	recovery     string
	ledger       *chain.DB // Options.Ledger
	// lastHeader is the response header headerJSON last encoded.
	lastHeader atomic.Pointer[encodedHeader]
}

// Open connects to the database at url and returns its store; Close
// closes the pool.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if t := pgtrace.New(opts.TracerProvider); t != nil {
		cfg.ConnConfig.Tracer = t
	}
	opts.Schema = pgschema.Choose(cfg, opts.Schema, DefaultSchema)
	pgsession.Defaults(cfg)
	claimsCfg := cfg.Copy()
	claimsCfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	claims, err := pgxpool.NewWithConfig(ctx, claimsCfg)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	s := New(pool, opts.Schema)
	s.claims, s.ownsPool, s.ledger = claims, true, opts.Ledger
	s.claimBatch = &batcher[idempotency.Claim, claimed1]{send: s.sendClaims}
	if err := s.check(ctx, opts.Migrate); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// check migrates the tables when asked to, then makes sure they exist.
func (s *Store) check(ctx context.Context, migrate bool) error {
	if migrate {
		if err := MigratePool(ctx, s.pool, s.schema); err != nil {
			return err
		}
	}
	var exists bool
	if err := s.pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL AND to_regclass($3) IS NOT NULL",
		s.records, s.retries, s.recovery).Scan(&exists); err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	if !exists {
		return ErrSchema
	}
	return nil
}

// New returns the store of the tables in schema (DefaultSchema when empty)
// on pool, which stays the caller's.
func New(pool *pgxpool.Pool, schema string) *Store {
	if schema == "" {
		schema = DefaultSchema
	}
	s := &Store{pool: pool, schema: schema,
		records:  pgx.Identifier{schema, "idempotency_records"}.Sanitize(),
		retries:  pgx.Identifier{schema, "idempotency_retry_counts"}.Sanitize(),
		recovery: pgx.Identifier{schema, "idempotency_recovery"}.Sanitize()}
	s.successesSQL = successesSQL(s.records)
	s.successTxSQL = `UPDATE ` + s.records + ` SET ` + successSet + ` WHERE ` + held
	s.claimsSQL = claimsSQL(s.records, s.retries)
	s.successes = &batcher[success, bool]{send: s.sendSuccesses}
	return s
}

// Close closes the pools Open made.
func (s *Store) Close() {
	if s.ownsPool {
		s.pool.Close()
		s.claims.Close()
	}
}

// Migrate creates the tables in the schema (see Options.Schema; the
// connection string's search_path when schema is empty) of the database
// at url, when they are missing.
func Migrate(ctx context.Context, url, schema string) error {
	pool, schema, err := pgschema.MigrationPool(ctx, url, schema, DefaultSchema)
	if err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	defer pool.Close()
	return MigratePool(ctx, pool, schema)
}

// MigratePool is Migrate on a pool.
func MigratePool(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	if schema == "" {
		schema = DefaultSchema
	}
	if err := pgschema.Apply(ctx, pool, "idempotency/migrate", schema, schemaSQL); err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	return nil
}

// recordsFillfactor is the fillfactor of idempotency_records (in the
// DDL's text): the share of a page that inserts fill, the rest left for
// the SUCCESS versions of its rows. A claim's row is about 230 bytes and
// the SUCCESS row of a raw append on ledgerctl serve about 410 (a body of
// about 150 bytes, and its headers), so a page filled to a third by claims
// has room for their SUCCESS versions, each written beside its claim as a
// heap-only tuple (the claim's version is pruned once no snapshot needs
// it). That holds for responses up to about 450 bytes with their headers;
// a larger one goes to another page when its own is full, a plain update.
const recordsFillfactor = "35"

// schemaSQL creates the tables, and brings tables of an older version to
// this one. Names compare as bytes (COLLATE "C"), so that List's order is
// the scopes' byte order on every store.
//
// No index covers a column that SUCCESS, FAILED or a poisoning release
// write (status, response_*, failure, finished_expires_at, updated_at):
// those UPDATEs are then heap-only (HOT) when their page has room, and
// insert nothing into any index. expires_at is the claim's expiry and is
// never updated; cleanup finds rows by it and checks the finished record's
// own expiry, finished_expires_at, which the finish wrote. Recovery finds
// ended leases by idempotency_records_lease from the watermark of
// idempotency_recovery (see RecoverStuck).
//
// The ALTERs run only when their change is missing, so that a Migrate of
// a current schema takes no lock that would stop the requests.
const schemaSQL = `
CREATE TABLE IF NOT EXISTS idempotency_records (
	operation           text COLLATE "C" NOT NULL,
	user_id             text COLLATE "C" NOT NULL,
	key                 text COLLATE "C" NOT NULL,
	status              text NOT NULL CHECK (status IN ('PROCESSING', 'SUCCESS', 'FAILED')),
	request_hash        bytea NOT NULL,
	token               text NOT NULL,
	attempt             integer NOT NULL,
	response_status     integer,
	response_headers    jsonb,
	response_body       bytea,
	failure             text NOT NULL DEFAULT '',
	created_at          timestamptz NOT NULL,
	updated_at          timestamptz NOT NULL,
	lease_expires_at    timestamptz NOT NULL,
	expires_at          timestamptz NOT NULL,
	finished_expires_at timestamptz,
	UNIQUE (operation, user_id, key)
) WITH (fillfactor = ` + recordsFillfactor + `);
DO $migrate$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'idempotency_records'::regclass
			AND attname = 'finished_expires_at' AND NOT attisdropped) THEN
		ALTER TABLE idempotency_records ADD COLUMN finished_expires_at timestamptz;
	END IF;
	IF NOT EXISTS (SELECT 1 FROM pg_class WHERE oid = 'idempotency_records'::regclass
			AND 'fillfactor=` + recordsFillfactor + `' = ANY (reloptions)) THEN
		ALTER TABLE idempotency_records SET (fillfactor = ` + recordsFillfactor + `);
	END IF;
END
$migrate$;
CREATE TABLE IF NOT EXISTS idempotency_recovery (
	singleton       boolean PRIMARY KEY DEFAULT true CHECK (singleton),
	leases_ended_by timestamptz NOT NULL
);
DO $migrate$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM idempotency_recovery) THEN
		-- Before the partial index of older versions is dropped: it finds
		-- their PROCESSING records, from whose first lease recovery starts.
		INSERT INTO idempotency_recovery (leases_ended_by)
		SELECT coalesce(min(lease_expires_at) - interval '1 microsecond', '-infinity')
		FROM idempotency_records WHERE status = 'PROCESSING';
	END IF;
END
$migrate$;
CREATE INDEX IF NOT EXISTS idempotency_records_expires_at ON idempotency_records (expires_at);
CREATE INDEX IF NOT EXISTS idempotency_records_lease ON idempotency_records (lease_expires_at);
DROP INDEX IF EXISTS idempotency_records_stuck;
CREATE TABLE IF NOT EXISTS idempotency_retry_counts (
	operation  text COLLATE "C" NOT NULL,
	user_id    text COLLATE "C" NOT NULL,
	key        text COLLATE "C" NOT NULL,
	retries    integer NOT NULL,
	expires_at timestamptz NOT NULL,
	PRIMARY KEY (operation, user_id, key)
);
CREATE INDEX IF NOT EXISTS idempotency_retry_counts_expires_at ON idempotency_retry_counts (expires_at);
`

// recordExpiry is a record's expiry in SQL: the finished record's, else
// (PROCESSING, or a record an older version finished) the claim's.
const recordExpiry = `coalesce(finished_expires_at, expires_at)`

const recordColumns = `operation, user_id, key, status, request_hash, token, attempt, response_status,
	response_headers, response_body, failure, created_at, updated_at, lease_expires_at, ` + recordExpiry

func scanRecord(row pgx.Row) (idempotency.Record, error) {
	var (
		r       idempotency.Record
		status  string
		hash    []byte
		rstatus *int32
		headers []byte
		body    []byte
	)
	err := row.Scan(&r.Operation, &r.User, &r.Key, &status, &hash, &r.Token, &r.Attempt, &rstatus,
		&headers, &body, &r.Failure, &r.CreatedAt, &r.UpdatedAt, &r.LeaseExpiresAt, &r.ExpiresAt)
	if err != nil {
		return idempotency.Record{}, err
	}
	r.Status = idempotency.Status(status)
	copy(r.RequestHash[:], hash)
	if rstatus != nil {
		resp := &idempotency.Response{Status: int(*rstatus), Header: http.Header{}, Body: body}
		if len(headers) > 0 {
			if err := json.Unmarshal(headers, &resp.Header); err != nil {
				return idempotency.Record{}, fmt.Errorf("pgstore: response headers: %w", err)
			}
		}
		r.Response = resp
	}
	for _, t := range []*time.Time{&r.CreatedAt, &r.UpdatedAt, &r.LeaseExpiresAt, &r.ExpiresAt} {
		*t = t.UTC()
	}
	return r, nil
}

// Create implements idempotency.Store.
func (s *Store) Create(ctx context.Context, c idempotency.Claim) (idempotency.CreateResult, error) {
	if err := c.Scope.Validate(); err != nil {
		return idempotency.CreateResult{}, err
	}
	for range 8 {
		rec, err := s.insertProcessing(ctx, c)
		if err == nil {
			return idempotency.CreateResult{Created: true, Record: rec}, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return idempotency.CreateResult{}, err
		}
		rec, err = s.get(ctx, c.Scope)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // deleted between the two statements: insert again
		}
		if err != nil {
			return idempotency.CreateResult{}, err
		}
		if c.Now.Before(rec.ExpiresAt) {
			return idempotency.CreateResult{Record: rec}, nil
		}
		// Expired: purge it (only if it is still expired) and insert again.
		if _, err := s.pool.Exec(ctx, `DELETE FROM `+s.records+` WHERE operation = $1 AND user_id = $2 AND key = $3 AND `+recordExpiry+` <= $4`,
			c.Operation, c.User, c.Key, c.Now); err != nil {
			return idempotency.CreateResult{}, err
		}
	}
	return idempotency.CreateResult{}, fmt.Errorf("pgstore: create %v: the record kept changing", c.Scope)
}

// insertProcessing runs the INSERT of a PROCESSING record in a transaction
// that does not wait for its WAL flush (synchronous_commit off), in one
// round trip: on the claims pool, whose sessions default to it, one
// autocommit statement with the claims made meanwhile (sendClaims); else
// BEGIN, SET LOCAL, the INSERT and COMMIT in one batch.
// A PROCESSING record is a lease, not a result: one lost in a server crash
// frees the key, and the retry's handler is kept exactly once by the
// ledger's UNIQUE(chain, key). Its uniqueness is not relaxed: the row is
// visible, and conflicts, as soon as the commit returns. SUCCESS and
// FAILED records are committed durably (the other pool, and the ledger's).
func (s *Store) insertProcessing(ctx context.Context, c idempotency.Claim) (idempotency.Record, error) {
	if s.claims != nil {
		r, err := s.claimBatch.do(ctx, c)
		if err == nil && !r.created {
			err = pgx.ErrNoRows
		}
		return claimed(c, r.attempt), err
	}
	var b pgx.Batch
	b.Queue("BEGIN")
	b.Queue("SET LOCAL synchronous_commit TO OFF")
	b.Queue(s.claimsSQL, []string{c.Operation}, []string{c.User}, []string{c.Key}, [][]byte{c.RequestHash[:]},
		[]string{c.Token}, []time.Time{c.Now}, []time.Time{c.LeaseExpiresAt}, []time.Time{c.ExpiresAt})
	b.Queue("COMMIT")
	br := s.pool.SendBatch(ctx, &b)
	var rec idempotency.Record
	err := func() error {
		for range 2 {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		var (
			sc      idempotency.Scope
			attempt int
		)
		err := br.QueryRow().Scan(&sc.Operation, &sc.User, &sc.Key, &attempt)
		rec = claimed(c, attempt)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if _, cerr := br.Exec(); cerr != nil {
			return cerr
		}
		return err
	}()
	if cerr := br.Close(); cerr != nil && err == nil {
		err = cerr
	}
	return rec, err
}

// claimed is the record a claim's INSERT wrote, given the attempt it
// returned: the INSERT returns that column only, the others are the
// claim's, with the precision PostgreSQL keeps (pgx sends times truncated
// to the microsecond).
func claimed(c idempotency.Claim, attempt int) idempotency.Record {
	us := func(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }
	return idempotency.Record{Scope: c.Scope, Status: idempotency.StatusProcessing, RequestHash: c.RequestHash,
		Token: c.Token, Attempt: attempt, CreatedAt: us(c.Now), UpdatedAt: us(c.Now),
		LeaseExpiresAt: us(c.LeaseExpiresAt), ExpiresAt: us(c.ExpiresAt)}
}

func (s *Store) get(ctx context.Context, sc idempotency.Scope) (idempotency.Record, error) {
	return scanRecord(s.pool.QueryRow(ctx, `SELECT `+recordColumns+` FROM `+s.records+`
		WHERE operation = $1 AND user_id = $2 AND key = $3`, sc.Operation, sc.User, sc.Key))
}

// Get implements idempotency.Store.
func (s *Store) Get(ctx context.Context, sc idempotency.Scope, now time.Time) (idempotency.Record, error) {
	rec, err := s.get(ctx, sc)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && !now.Before(rec.ExpiresAt)) {
		return idempotency.Record{}, idempotency.ErrNotFound
	}
	return rec, err
}

// held is the condition of a statement acting on the attempt holding $4.
const held = `operation = $1 AND user_id = $2 AND key = $3 AND token = $4 AND status = 'PROCESSING' AND expires_at > $5`

func (s *Store) update(ctx context.Context, sc idempotency.Scope, token string, now time.Time, set string, args ...any) error {
	all := append([]any{sc.Operation, sc.User, sc.Key, token, now}, args...)
	tag, err := s.pool.Exec(ctx, `UPDATE `+s.records+` SET `+set+` WHERE `+held, all...)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return idempotency.ErrLeaseLost
	}
	return nil
}

// Extend implements idempotency.Store.
func (s *Store) Extend(ctx context.Context, sc idempotency.Scope, token string, leaseExpiresAt, now time.Time) error {
	return s.update(ctx, sc, token, now, `lease_expires_at = $6, updated_at = $5`, leaseExpiresAt)
}

// Succeed implements idempotency.Store. Concurrent calls are written in one
// statement (one transaction, one WAL flush).
func (s *Store) Succeed(ctx context.Context, sc idempotency.Scope, token string, resp idempotency.Response, expiresAt, now time.Time) error {
	headers, err := s.headerJSON(resp.Header)
	if err != nil {
		return err
	}
	body := resp.Body
	if body == nil {
		body = []byte{}
	}
	held, err := s.successes.do(ctx, success{sc: sc, token: token, now: now, status: resp.Status, headers: string(headers), body: body, expiresAt: expiresAt})
	if err != nil {
		return err
	}
	if !held {
		return idempotency.ErrLeaseLost
	}
	return nil
}

// successSet is the SET clause of a SUCCESS record, whose arguments
// SucceedTx gives ($6 on; update's come first).
const successSet = `status = 'SUCCESS', response_status = $6, response_headers = $7,
		response_body = $8, finished_expires_at = $9, updated_at = $5`

// encodedHeader is a header of one key and one value and its JSON.
type encodedHeader struct {
	key, value string
	json       []byte
}

// headerJSON is json.Marshal of h. A header of one key with one value,
// both printable ASCII that JSON writes as they are (the header of every
// response of a server's write routes), is encoded without reflection,
// and the last one is kept: the next record with the same header shares
// its JSON, which the statements only read.
func (s *Store) headerJSON(h http.Header) ([]byte, error) {
	if len(h) == 1 {
		for k, v := range h {
			if len(v) != 1 {
				break
			}
			if last := s.lastHeader.Load(); last != nil && last.key == k && last.value == v[0] {
				return last.json, nil
			}
			if !plainJSON(k) || !plainJSON(v[0]) {
				break
			}
			b := make([]byte, 0, len(k)+len(v[0])+8)
			b = append(append(append(append(append(b, `{"`...), k...), `":["`...), v[0]...), `"]}`...)
			s.lastHeader.Store(&encodedHeader{key: k, value: v[0], json: b})
			return b, nil
		}
	}
	return json.Marshal(h)
}

// plainJSON reports whether json.Marshal writes s between its quotes
// unchanged: printable ASCII without a quote, a backslash, or the
// characters it escapes for HTML.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// Fail implements idempotency.Store.
func (s *Store) Fail(ctx context.Context, sc idempotency.Scope, token string, failure string, expiresAt, now time.Time) error {
	return s.update(ctx, sc, token, now, `status = 'FAILED', failure = $6, finished_expires_at = $7, updated_at = $5`, failure, expiresAt)
}

// Release implements idempotency.Store: in one transaction, the record is
// locked (if still held), the retry count raised, and the record deleted
// or, at maxRetries, made FAILED.
func (s *Store) Release(ctx context.Context, sc idempotency.Scope, token string, maxRetries int, expiresAt, now time.Time) (idempotency.ReleaseResult, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return idempotency.ReleaseResult{}, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	res, err := s.release(ctx, tx, `SELECT 1 FROM `+s.records+` WHERE `+held+` FOR UPDATE`,
		[]any{sc.Operation, sc.User, sc.Key, token, now}, maxRetries, expiresAt)
	if err != nil {
		return idempotency.ReleaseResult{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return idempotency.ReleaseResult{}, err
	}
	return res, nil
}

// release is Release in tx: lock runs with args (held's, then its own)
// and locks the record when it is to be released; ErrLeaseLost when it
// finds none.
func (s *Store) release(ctx context.Context, tx pgx.Tx, lock string, args []any, maxRetries int, expiresAt time.Time) (idempotency.ReleaseResult, error) {
	tag, err := tx.Exec(ctx, lock, args...)
	if err != nil {
		return idempotency.ReleaseResult{}, err
	}
	if tag.RowsAffected() == 0 {
		return idempotency.ReleaseResult{}, idempotency.ErrLeaseLost
	}
	args = args[:5]
	var n int
	err = tx.QueryRow(ctx, `INSERT INTO `+s.retries+` AS c (operation, user_id, key, retries, expires_at)
		VALUES ($1, $2, $3, 1, $4)
		ON CONFLICT (operation, user_id, key) DO UPDATE
		SET retries = CASE WHEN c.expires_at > $5 THEN c.retries + 1 ELSE 1 END, expires_at = $4
		RETURNING retries`, args[0], args[1], args[2], expiresAt, args[4]).Scan(&n)
	if err != nil {
		return idempotency.ReleaseResult{}, err
	}
	res := idempotency.ReleaseResult{Retries: n, Poisoned: n >= maxRetries}
	if res.Poisoned {
		_, err = tx.Exec(ctx, `UPDATE `+s.records+` SET status = 'FAILED', failure = $6, finished_expires_at = $7, updated_at = $5 WHERE `+held,
			append(args, "transient failures reached the retry limit", expiresAt)...)
	} else {
		_, err = tx.Exec(ctx, `DELETE FROM `+s.records+` WHERE `+held, args...)
	}
	if err != nil {
		return idempotency.ReleaseResult{}, err
	}
	return res, nil
}

// Abandon implements idempotency.Store: one conditional DELETE; the retry
// count is not touched.
func (s *Store) Abandon(ctx context.Context, sc idempotency.Scope, token string, now time.Time) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM `+s.records+` WHERE `+held, sc.Operation, sc.User, sc.Key, token, now)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return idempotency.ErrLeaseLost
	}
	return nil
}

// RecoverStuck implements idempotency.Store. It scans only the leases that
// ended since the watermark of idempotency_recovery (leases_ended_by: every
// PROCESSING record whose lease ended by then was released), not the table,
// so that a run costs the requests of one interval. One transaction locks
// the watermark (a process that finds it locked returns 0 at once: another
// is recovering), releases the records found, each fenced by its token and
// by its lease having ended (a heartbeat that extended it meanwhile keeps
// it), and moves the watermark up to what it covered. A failure rolls all
// of it back and leaves the watermark where it was.
//
// A record whose row becomes visible more than its lease after its writer
// read the clock (its commit delayed past its lease's end, or the writer's
// clock behind the others' by more than a lease) may fall below the
// watermark; a retry of its key takes it over (the guard's takeover of an
// ended lease), and cleanup deletes it at its expiry.
func (s *Store) RecoverStuck(ctx context.Context, leaseEndedBy time.Time, limit, maxRetries int, expiresAt, now time.Time) (int, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var from pgtype.Timestamptz
	err = tx.QueryRow(ctx, `SELECT leases_ended_by FROM `+s.recovery+` FOR UPDATE SKIP LOCKED`).Scan(&from)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if from.InfinityModifier == pgtype.Finite && !from.Time.Before(leaseEndedBy) {
		return 0, nil
	}
	found, err := s.stuck(ctx, tx, from, leaseEndedBy, now, limit)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, st := range found {
		_, err := s.release(ctx, tx, `SELECT 1 FROM `+s.records+` WHERE `+held+` AND lease_expires_at <= $6 FOR UPDATE`,
			[]any{st.sc.Operation, st.sc.User, st.sc.Key, st.token, now, leaseEndedBy}, maxRetries, expiresAt)
		if errors.Is(err, idempotency.ErrLeaseLost) {
			continue
		}
		if err != nil {
			return 0, err
		}
		n++
	}
	// Every record below covered was released; at the limit, the last
	// lease found may be shared by records not yet seen.
	covered := leaseEndedBy
	if len(found) == limit {
		covered = found[len(found)-1].lease.Add(-time.Microsecond)
	}
	if _, err := tx.Exec(ctx, `UPDATE `+s.recovery+` SET leases_ended_by = greatest(leases_ended_by, $1)`, covered); err != nil {
		return 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, err
	}
	return n, nil
}

// stuckRecord is a PROCESSING record whose lease ended.
type stuckRecord struct {
	sc    idempotency.Scope
	token string
	lease time.Time
}

// stuck returns up to limit live PROCESSING records whose lease ended after
// from and by leaseEndedBy, in the order of their leases.
func (s *Store) stuck(ctx context.Context, tx pgx.Tx, from pgtype.Timestamptz, leaseEndedBy, now time.Time, limit int) ([]stuckRecord, error) {
	rows, err := tx.Query(ctx, `SELECT operation, user_id, key, token, lease_expires_at FROM `+s.records+`
		WHERE lease_expires_at > $1 AND lease_expires_at <= $2 AND status = 'PROCESSING' AND expires_at > $3
		ORDER BY lease_expires_at LIMIT $4`, from, leaseEndedBy, now, limit)
	if err != nil {
		return nil, err
	}
	var found []stuckRecord
	var st stuckRecord
	_, err = pgx.ForEachRow(rows, []any{&st.sc.Operation, &st.sc.User, &st.sc.Key, &st.token, &st.lease}, func() error {
		found = append(found, st)
		return nil
	})
	return found, err
}

// DeleteExpired implements idempotency.Store. It deletes in batches of at
// most cleanupBatchMax rows, each its own statement, and skips rows that
// writers hold (FOR UPDATE SKIP LOCKED), so it never makes a request wait.
// It finds rows by the claim's expiry (indexed) and deletes those whose
// record expired: a record finished after its claim is passed over until
// its own expiry.
func (s *Store) DeleteExpired(ctx context.Context, now time.Time, limit int) (int, error) {
	deleted := 0
	for deleted < limit {
		batch := min(limit-deleted, cleanupBatchMax)
		tag, err := s.pool.Exec(ctx, `DELETE FROM `+s.records+` WHERE ctid IN (
			SELECT ctid FROM `+s.records+` WHERE expires_at <= $1 AND `+recordExpiry+` <= $1
			LIMIT $2 FOR UPDATE SKIP LOCKED)`, now, batch)
		if err != nil {
			return deleted, err
		}
		deleted += int(tag.RowsAffected())
		if int(tag.RowsAffected()) < batch {
			break
		}
	}
	_, err := s.pool.Exec(ctx, `DELETE FROM `+s.retries+` WHERE ctid IN (
		SELECT ctid FROM `+s.retries+` WHERE expires_at <= $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`, now, max(limit, cleanupBatchMax))
	return deleted, err
}

// List implements idempotency.Store.
func (s *Store) List(ctx context.Context, after idempotency.Scope, status idempotency.Status, limit int, now time.Time) ([]idempotency.Record, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+recordColumns+` FROM `+s.records+`
		WHERE (operation, user_id, key) > ($1, $2, $3) AND `+recordExpiry+` > $4 AND ($5 = '' OR status = $5)
		ORDER BY operation, user_id, key LIMIT $6`, after.Operation, after.User, after.Key, now, string(status), limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []idempotency.Record
	for rows.Next() {
		rec, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, rows.Err()
}
