package bolt

import (
	"bytes"
	"encoding/binary"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt/internal/keyindex"
)

// KeySeq returns the seq the idempotency index holds for a chain's key in
// an open bbolt transaction, wherever the key is (the recent keys or a run);
// tools and tamper tests use it with SetKeySeq.
func KeySeq(btx *bbolt.Tx, chain, key string) (uint64, error) {
	at, err := locateKey(btx, chain, key)
	return at.seq, err
}

// SetKeySeq rewrites the seq the index holds for an existing key, in place:
// it damages the index on purpose, for tests of what a damaged file does.
func SetKeySeq(btx *bbolt.Tx, chain, key string, seq uint64) error {
	at, err := locateKey(btx, chain, key)
	if err != nil {
		return err
	}
	if err := dropKeyMerge(btx); err != nil {
		return err
	}
	return at.set(seq)
}

// DeleteKeyRecord removes the record of a chain's key from the index in an
// open bbolt transaction, wherever it is (the recent keys or a run): it
// damages the index on purpose, for tests of what verify reports about an
// entry whose key the index has lost.
func DeleteKeyRecord(btx *bbolt.Tx, chain, key string) error {
	at, err := locateKey(btx, chain, key)
	if err != nil {
		return err
	}
	if err := dropKeyMerge(btx); err != nil {
		return err
	}
	return at.remove()
}

// dropKeyMerge drops the merge of key runs in progress, if any, before a
// tool changes a run: the merge's output holds the records as they were.
func dropKeyMerge(btx *bbolt.Tx) error {
	if btx.Bucket(BucketKeyMerge) == nil {
		return nil
	}
	return btx.DeleteBucket(BucketKeyMerge)
}

// keyLocation is where the index holds a key: its seq, and how to rewrite
// or remove its record there.
type keyLocation struct {
	seq    uint64
	set    func(seq uint64) error
	remove func() error
}

// locateKey finds a key in the index: in the recent keys, else in a run.
func locateKey(btx *bbolt.Tx, chain, key string) (keyLocation, error) {
	id, err := ChainID(btx, chain)
	if err != nil {
		return keyLocation{}, err
	}
	recent := btx.Bucket(BucketKeys)
	k := keyIndexKey(id, key)
	if v := recent.Get(k); len(v) == 8 {
		return keyLocation{
			seq:    binary.BigEndian.Uint64(v),
			set:    func(seq uint64) error { return recent.Put(k, binary.BigEndian.AppendUint64(nil, seq)) },
			remove: func() error { return recent.Delete(k) },
		}, nil
	}
	if runs := btx.Bucket(BucketKeyRuns); runs != nil {
		digest := KeyDigest(key)
		target := append(binary.BigEndian.AppendUint64(nil, id), digest[:]...)
		cur := runs.Cursor()
		for name, v := cur.First(); name != nil; name, v = cur.Next() {
			if v != nil {
				continue
			}
			if at, ok := locateInRun(runs.Bucket(name), target); ok {
				return at, nil
			}
		}
	}
	return keyLocation{}, fmt.Errorf("key %q of chain %q: %w", key, chain, storage.ErrNotFound)
}

// locateInRun finds the record of target (chain id | digest) in one run.
func locateInRun(run *bbolt.Bucket, target []byte) (keyLocation, bool) {
	chunkKey, chunk := run.Cursor().Seek(target)
	if len(chunkKey) != keyindex.RecordPrefixSize {
		return keyLocation{}, false
	}
	for o := 0; o+keyindex.RecordSize <= len(chunk); o += keyindex.RecordSize {
		if !bytes.Equal(chunk[o:o+keyindex.RecordPrefixSize], target) {
			continue
		}
		chunkKey, chunk := append([]byte(nil), chunkKey...), append([]byte(nil), chunk...)
		return keyLocation{
			seq: binary.BigEndian.Uint64(chunk[o+keyindex.RecordPrefixSize:]),
			set: func(seq uint64) error {
				binary.BigEndian.PutUint64(chunk[o+keyindex.RecordPrefixSize:], seq)
				return run.Put(chunkKey, chunk)
			},
			remove: func() error {
				updated := append(append([]byte(nil), chunk[:o]...), chunk[o+keyindex.RecordSize:]...)
				if len(updated) == 0 {
					return run.Delete(chunkKey)
				}
				key := chunkKey
				if o+keyindex.RecordSize == len(chunk) { // the chunk's key is its last record
					if err := run.Delete(chunkKey); err != nil {
						return err
					}
					key = updated[len(updated)-keyindex.RecordSize : len(updated)-keyindex.RecordSize+keyindex.RecordPrefixSize]
				}
				return run.Put(key, updated)
			},
		}, true
	}
	return keyLocation{}, false
}

// AddKeyRecord adds a record mapping the digest of key to seq to the
// chain's index in an open bbolt transaction, beside any record the key
// already has: in the recent keys bucket when the key is not there (the
// exact key is stored), else in the first run, whose count it leaves as it
// was. It damages the index on purpose, for tests of what verify reports
// about records that name no entry or repeat another.
func AddKeyRecord(btx *bbolt.Tx, chain, key string, seq uint64) error {
	id, err := ChainID(btx, chain)
	if err != nil {
		return err
	}
	recent := btx.Bucket(BucketKeys)
	k := keyIndexKey(id, key)
	if recent.Get(k) == nil {
		return recent.Put(k, binary.BigEndian.AppendUint64(nil, seq))
	}
	runs := btx.Bucket(BucketKeyRuns)
	if runs == nil {
		return fmt.Errorf("add key record: %w: no key runs", storage.ErrNotFound)
	}
	name, _ := runs.Cursor().First()
	if name == nil {
		return fmt.Errorf("add key record: %w: no key runs", storage.ErrNotFound)
	}
	if err := dropKeyMerge(btx); err != nil {
		return err
	}
	run := runs.Bucket(name)
	digest := KeyDigest(key)
	record := binary.BigEndian.AppendUint64(append(binary.BigEndian.AppendUint64(nil, id), digest[:]...), seq)
	chunkKey, chunk := run.Cursor().Seek(record[:keyindex.RecordPrefixSize])
	if len(chunkKey) != keyindex.RecordPrefixSize {
		// Beyond every chunk: a chunk of its own, keyed by its record.
		return run.Put(record[:keyindex.RecordPrefixSize], record)
	}
	o := 0
	for o < len(chunk) && bytes.Compare(chunk[o:o+keyindex.RecordPrefixSize], record[:keyindex.RecordPrefixSize]) < 0 {
		o += keyindex.RecordSize
	}
	updated := append(append(append([]byte(nil), chunk[:o]...), record...), chunk[o:]...)
	return run.Put(append([]byte(nil), chunkKey...), updated)
}
