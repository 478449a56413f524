package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerworks/ledger/storage"
)

// sqlReadKey reads a retry's entry in one statement: run on its own, it
// sees the transactions committed before it began, as a read-only
// transaction would, in one round trip instead of a transaction's three.
const sqlReadKey = "SELECT seq, data FROM entries WHERE chain_id = $1 AND idempotency_key = $2"

var _ storage.KeyReader = (*Backend)(nil)

// ReadKey implements storage.KeyReader with one statement on a connection
// of the pool. A commit acknowledged by Commit is durable in the server,
// so every row the statement sees is.
func (b *Backend) ReadKey(ctx context.Context, chain, key string) (seq uint64, data []byte, found bool, err error) {
	if key == "" {
		panic("postgres: ReadKey of an empty idempotency key")
	}
	if err := ctx.Err(); err != nil {
		return 0, nil, false, err
	}
	if b.closed.Load() {
		return 0, nil, false, storage.ErrClosed
	}
	if unstorable(chain) || unstorable(key) {
		return 0, nil, false, nil // Append refuses such names: none is stored
	}
	var stored int64
	err = b.pool.QueryRow(ctx, sqlReadKey, chain, key).Scan(&stored, &data)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, nil, false, nil
	case err != nil:
		if b.closed.Load() {
			return 0, nil, false, storage.ErrClosed
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return 0, nil, false, ctxErr
		}
		return 0, nil, false, fmt.Errorf("postgres: read key: %w", classify(err, false))
	case stored <= 0:
		return 0, nil, false, fmt.Errorf("postgres: chain %q key %q: %w: seq %d", chain, key, storage.ErrCorrupt, stored)
	}
	return uint64(stored), data, true, nil
}
