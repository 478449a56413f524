package chain

import (
	"errors"

	"github.com/ledgerworks/ledger/storage"
)

// StateGetBatch reads many keys of derived state: found(i, value) is
// called for each keys[i] that holds a value, in no particular order;
// absent keys are skipped. keys must be distinct. Values are valid until
// the transaction ends. On a backend that reads many keys together
// (storage.StateBatchGetter: PostgreSQL) it costs one round trip per
// storage.StateGetBatchMax keys rather than one per key; elsewhere it is
// StateGet in a loop. It locks nothing on PostgreSQL: a caller that
// rewrites what it reads holds a lock every writer of those keys takes,
// such as a chain's head (Head), before the call.
func (tx *Tx) StateGetBatch(keys [][]byte, found func(i int, value []byte)) error {
	bg, ok := tx.stx.(storage.StateBatchGetter)
	if !ok {
		for i, k := range keys {
			v, err := tx.stx.StateGet(tx.ctx, k)
			if errors.Is(err, storage.ErrNotFound) {
				continue
			}
			if err != nil {
				return tx.failed(err)
			}
			found(i, v)
		}
		return nil
	}
	for first := 0; first < len(keys); first += storage.StateGetBatchMax {
		part := keys[first:min(first+storage.StateGetBatchMax, len(keys))]
		err := bg.StateGetBatch(tx.ctx, part, func(i int, value []byte) { found(first+i, value) })
		if err != nil {
			return tx.failed(err)
		}
	}
	return nil
}
