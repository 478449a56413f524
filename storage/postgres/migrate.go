package postgres

import (
	"context"
	"embed"
	"fmt"
	"hash/fnv"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one numbered schema change.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in version order. File names
// are NNNN_description.sql; versions start at 1 and have no gaps.
func migrations() ([]migration, error) {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, n := range names {
		base := path.Base(n)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("postgres: migration file %s: name must be NNNN_description.sql", base)
		}
		body, err := migrationFiles.ReadFile(n)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: strings.TrimSuffix(base, ".sql"), sql: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("postgres: migration %s: expected version %d", m.name, i+1)
		}
	}
	return ms, nil
}

// SchemaVersion is the schema version this package writes and reads.
func SchemaVersion() int {
	ms, err := migrations()
	if err != nil {
		return 0
	}
	return len(ms)
}

// migrate brings the schema up to date in one transaction. The transaction
// holds an advisory lock derived from the schema name, so that concurrent
// Opens of one schema apply each migration once and wait for each other;
// DDL being transactional in PostgreSQL, a failed migration leaves nothing
// behind. With check set it applies nothing and fails if the schema is not
// current.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string, check bool) (applied []int, err error) {
	ms, err := migrations()
	if err != nil {
		return nil, err
	}
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return nil, classify(err, false)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	// Names are stored as text and compared as bytes: the database must
	// keep UTF-8 as it is.
	var encoding string
	if err := tx.QueryRow(ctx, "SELECT current_setting('server_encoding')").Scan(&encoding); err != nil {
		return nil, classify(err, false)
	}
	if encoding != "UTF8" && encoding != "SQL_ASCII" {
		return nil, fmt.Errorf("postgres: database encoding is %s; the ledger needs a UTF8 database", encoding)
	}

	target := schema
	if target == "" {
		// The connection string's search_path decides: the first schema
		// in it that exists.
		var cur *string
		if err := tx.QueryRow(ctx, "SELECT current_schema()").Scan(&cur); err != nil {
			return nil, classify(err, false)
		}
		if cur == nil {
			return nil, fmt.Errorf("postgres: no schema of the search_path exists; create it or set Options.Schema")
		}
		target = *cur
	}
	h := fnv.New64a()
	h.Write([]byte("ledger/migrate\x00" + target))
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(h.Sum64())); err != nil {
		return nil, classify(err, false)
	}

	var exists bool
	if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL",
		pgx.Identifier{target, "schema_migrations"}.Sanitize()).Scan(&exists); err != nil {
		return nil, classify(err, false)
	}
	current := 0
	if exists {
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+
			pgx.Identifier{target, "schema_migrations"}.Sanitize()).Scan(&current); err != nil {
			return nil, classify(err, false)
		}
	}
	if current > len(ms) {
		return nil, fmt.Errorf("%w: schema %q is at version %d, this program knows versions up to %d",
			ErrSchemaVersion, target, current, len(ms))
	}
	if current == len(ms) {
		return nil, nil
	}
	if check {
		return nil, fmt.Errorf("%w: schema %q is at version %d, this program needs %d; run `ledgerctl migrate`",
			ErrSchemaVersion, target, current, len(ms))
	}

	if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{target}.Sanitize()); err != nil {
		return nil, fmt.Errorf("create schema %q: %w", target, classify(err, false))
	}
	if _, err := tx.Exec(ctx, "SET LOCAL search_path TO "+pgx.Identifier{target}.Sanitize()); err != nil {
		return nil, classify(err, false)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return nil, classify(err, false)
	}
	for _, m := range ms[current:] {
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return nil, fmt.Errorf("apply migration %s: %w", m.name, classify(err, false))
		}
		if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
			return nil, classify(err, false)
		}
		applied = append(applied, m.version)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, classify(err, true)
	}
	return applied, nil
}
