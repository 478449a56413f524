package bolt

import (
	"bytes"
	"encoding/binary"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage"
)

// KeySeq returns the seq the idempotency index holds for a chain's key in
// an open bbolt transaction, wherever the key is (the recent keys or a run);
// tools and tamper tests use it with SetKeySeq.
func KeySeq(btx *bbolt.Tx, chain, key string) (uint64, error) {
	seq, _, err := locateKey(btx, chain, key)
	return seq, err
}

// SetKeySeq rewrites the seq the index holds for an existing key, in place:
// it damages the index on purpose, for tests of what a damaged file does.
func SetKeySeq(btx *bbolt.Tx, chain, key string, seq uint64) error {
	_, put, err := locateKey(btx, chain, key)
	if err != nil {
		return err
	}
	return put(seq)
}

// locateKey finds a key in the index and returns its seq and a function
// that rewrites it.
func locateKey(btx *bbolt.Tx, chain, key string) (uint64, func(uint64) error, error) {
	id, err := ChainID(btx, chain)
	if err != nil {
		return 0, nil, err
	}
	recent := btx.Bucket(BucketKeys)
	k := keyIndexKey(id, key)
	if v := recent.Get(k); len(v) == 8 {
		return binary.BigEndian.Uint64(v), func(seq uint64) error {
			return recent.Put(k, binary.BigEndian.AppendUint64(nil, seq))
		}, nil
	}
	runs := btx.Bucket(BucketKeyRuns)
	if runs == nil {
		return 0, nil, storage.ErrNotFound
	}
	digest := KeyDigest(key)
	target := append(binary.BigEndian.AppendUint64(nil, id), digest[:]...)
	cur := runs.Cursor()
	for name, v := cur.First(); name != nil; name, v = cur.Next() {
		if v != nil {
			continue
		}
		run := runs.Bucket(name)
		chunkKey, chunk := run.Cursor().Seek(target)
		if len(chunkKey) != keyRecordPrefix {
			continue
		}
		for o := 0; o+keyRecordSize <= len(chunk); o += keyRecordSize {
			if bytes.Equal(chunk[o:o+keyRecordPrefix], target) {
				offset, chunkKey := o, append([]byte(nil), chunkKey...)
				updated := append([]byte(nil), chunk...)
				return binary.BigEndian.Uint64(chunk[o+keyRecordPrefix:]), func(seq uint64) error {
					binary.BigEndian.PutUint64(updated[offset+keyRecordPrefix:], seq)
					return run.Put(chunkKey, updated)
				}, nil
			}
		}
	}
	return 0, nil, fmt.Errorf("key %q of chain %q: %w", key, chain, storage.ErrNotFound)
}
