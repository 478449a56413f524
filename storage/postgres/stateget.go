package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerworks/ledger/storage"
)

// sqlStateGetBatch reads many keys in one statement, locking none of
// them (see storage.StateBatchGetter).
const sqlStateGetBatch = "SELECT key, value FROM state WHERE key = ANY($1::bytea[])"

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
		rows = rows[:0]
		b.Queue(sqlStateGetBatch, ask).Query(func(r pgx.Rows) error {
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
