package chain

import "bytes"

// stateDeletePageSize is how many keys StateDeleteRange collects before
// deleting them: a scan must end before the keys it yields change.
const stateDeletePageSize = 1024

// StateDeleteRange deletes every state key with start <= key < end (no
// upper bound when end is nil) and returns how many it deleted. It holds at
// most stateDeletePageSize keys in memory at a time.
func (tx *Tx) StateDeleteRange(start, end []byte) (int64, error) {
	if !tx.stx.Writable() {
		return 0, ErrReadOnly
	}
	var deleted int64
	for {
		keys := make([][]byte, 0, stateDeletePageSize)
		for kv, err := range tx.StateScan(start, end, false) {
			if err != nil {
				return deleted, err
			}
			keys = append(keys, bytes.Clone(kv.Key))
			if len(keys) == stateDeletePageSize {
				break
			}
		}
		for _, key := range keys {
			if err := tx.StateDelete(key); err != nil {
				return deleted, err
			}
			deleted++
		}
		if len(keys) < stateDeletePageSize {
			return deleted, nil
		}
	}
}
