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
	b.roundTrips.Add(1)
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

var _ storage.KeyBatchReader = (*Backend)(nil)

// ReadKeys implements storage.KeyBatchReader with one statement, where
// ReadKey takes one a key: the keys sent as two arrays and joined with the
// entries table's unique index (sqlPrepareKeys, without the locks a write
// transaction's PrepareKeys takes). Run on its own, it sees the
// transactions committed before it began.
func (b *Backend) ReadKeys(ctx context.Context, keys []storage.ChainKey, reads []storage.KeyRead) error {
	if err := storage.BeginReadKeys(ctx, keys, reads); err != nil {
		return err
	}
	if b.closed.Load() {
		return storage.ErrClosed
	}
	chains := make([]string, 0, len(keys))
	names := make([]string, 0, len(keys))
	sent := make([]int, 0, len(keys)) // the index in keys of each key sent
	for i, k := range keys {
		if !unstorable(k.Chain) && !unstorable(k.Key) { // Append refuses the others: none is stored
			chains, names, sent = append(chains, k.Chain), append(names, k.Key), append(sent, i)
		}
	}
	if len(sent) == 0 {
		return nil
	}
	b.roundTrips.Add(1)
	var found []foundKey
	rows, err := b.pool.Query(ctx, sqlPrepareKeys, chains, names)
	if err == nil {
		err = scanFoundKeys(rows, len(sent), &found)
		rows.Close()
	}
	if err != nil {
		if b.closed.Load() {
			return storage.ErrClosed
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		return fmt.Errorf("postgres: read keys: %w", classify(err, false))
	}
	for _, f := range found {
		reads[sent[f.index]] = storage.KeyRead{Seq: f.seq, Data: f.data, Found: true}
	}
	return nil
}
