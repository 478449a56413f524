// Package pgschema holds what the PostgreSQL stores beside the ledger
// (the replay guard's records, the shared rate-limit buckets) share to
// choose their schema and create their tables in it.
package pgschema

import (
	"context"
	"hash/fnv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Choose returns schema, else the first of cfg's search_path, else
// fallback: the schema a store's Open and Migrate use.
func Choose(cfg *pgxpool.Config, schema, fallback string) string {
	if schema != "" {
		return schema
	}
	if sp := cfg.ConnConfig.RuntimeParams["search_path"]; sp != "" {
		first, _, _ := strings.Cut(sp, ",")
		if first = strings.Trim(strings.TrimSpace(first), `"`); first != "" && first != "$user" {
			return first
		}
	}
	return fallback
}

// MigrationPool opens a pool of one connection to the database at url,
// for a migration, and returns it with the schema Choose picks. The pool
// is the caller's to close.
func MigrationPool(ctx context.Context, url, schema, fallback string) (*pgxpool.Pool, string, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, "", err
	}
	cfg.MaxConns = 1
	schema = Choose(cfg, schema, fallback)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, "", err
	}
	return pool, schema, nil
}

// Apply creates schema when it is missing and runs ddl in it, in one
// transaction that holds an advisory lock named by lock and schema, so
// that processes starting together migrate one after the other. ddl must
// be idempotent (CREATE ... IF NOT EXISTS).
func Apply(ctx context.Context, pool *pgxpool.Pool, lock, schema, ddl string) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	h := fnv.New64a()
	h.Write([]byte(lock + "\x00" + schema))
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(h.Sum64())); err != nil {
		return err
	}
	sc := pgx.Identifier{schema}.Sanitize()
	for _, stmt := range []string{"CREATE SCHEMA IF NOT EXISTS " + sc, "SET LOCAL search_path TO " + sc, ddl} {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}
