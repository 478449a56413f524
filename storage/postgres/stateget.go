package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerworks/ledger/storage"
)

const (
	// sqlStateGetBatch reads many keys in one statement. In a writable
	// transaction sqlStateGetBatchLock locks the rows it finds in key
	// order (the sort runs below the lock), the order every writer's
	// flush uses too, so two batches cannot lock each other's rows in
	// opposite orders.
	sqlStateGetBatch     = "SELECT key, value FROM state WHERE key = ANY($1::bytea[])"
	sqlStateGetBatchLock = "SELECT key, value FROM state WHERE key = ANY($1::bytea[]) ORDER BY key FOR UPDATE"
)

var _ storage.StateBatchGetter = (*tx)(nil)

// StateGetBatch implements storage.StateBatchGetter: the keys the
// transaction has buffered writes for are answered from the buffer, the
// others with one statement in one round trip.
func (t *tx) StateGetBatch(ctx context.Context, keys [][]byte, found func(i int, value []byte)) error {
	if err := t.usable(); err != nil {
		return err
	}
	if len(keys) > storage.StateGetBatchMax {
		return fmt.Errorf("postgres: state get batch: %d keys, at most %d", len(keys), storage.StateGetBatchMax)
	}
	index := make(map[string]int, len(keys))
	ask := make([][]byte, 0, len(keys))
	for i, k := range keys {
		if w, ok := t.state[string(k)]; ok {
			if !w.deleted {
				found(i, w.value)
			}
			continue
		}
		if _, dup := index[string(k)]; !dup {
			ask = append(ask, nonNil(k))
		}
		index[string(k)] = i
	}
	if len(ask) == 0 {
		return nil
	}
	type pair struct{ key, value []byte }
	var rows []pair
	err := t.run(ctx, "state get batch", false, func(b *pgx.Batch) {
		query := sqlStateGetBatch
		if t.writable {
			query = sqlStateGetBatchLock
		}
		rows = rows[:0]
		b.Queue(query, ask).Query(func(r pgx.Rows) error {
			for r.Next() {
				var p pair
				if err := r.Scan(&p.key, &p.value); err != nil {
					return err
				}
				rows = append(rows, p)
			}
			return r.Err()
		})
	})
	if err != nil {
		return err
	}
	for _, p := range rows {
		if p.value == nil {
			p.value = []byte{}
		}
		found(index[string(p.key)], p.value)
	}
	return nil
}
