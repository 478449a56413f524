package bolt

import (
	"encoding/binary"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt/internal/segment"
)

// A file of an earlier format is upgraded when it is opened for writing,
// before anything else reads or writes it: FormatV1 gets the key runs
// (upgradeKeyRuns), and FormatV2 has its entries moved into segments
// (upgradeEntries).

// upgradeBatchBytes bounds the entries one transaction of the segment
// upgrade moves: bbolt holds a transaction's new pages in memory.
var upgradeBatchBytes = 64 << 20

// bucketUpgrade holds the segments of an upgrade in progress, out of the
// way of readers, which read the entries bucket until the upgrade's last
// transaction moves the segments to the top and deletes it.
var bucketUpgrade = []byte("upgrade")

// upgradeKeyRuns turns a FormatV1 file into a FormatV2 one: its keys stay
// in the recent B-tree, and runs are added beside it.
func upgradeKeyRuns(tx *bbolt.Tx) error {
	meta := tx.Bucket(BucketMeta)
	if string(meta.Get(metaFormat)) != FormatV1 {
		return nil
	}
	if _, err := tx.CreateBucketIfNotExists(BucketKeyRuns); err != nil {
		return err
	}
	var recent uint64
	_ = tx.Bucket(BucketKeys).ForEach(func(k, v []byte) error { recent++; return nil })
	if err := meta.Put(metaRecentKeys, binary.BigEndian.AppendUint64(nil, recent)); err != nil {
		return err
	}
	return meta.Put(metaFormat, []byte(FormatV2))
}

// upgradeEntries turns a FormatV2 file into a Format file: it copies the
// entries into segments, in transactions of upgradeBatchBytes, under the
// upgrade bucket, and then one more transaction moves the segments to the
// top, deletes the entries bucket and writes the new format. A process killed
// in between leaves a FormatV2 file whose readers see the entries bucket;
// the next writable Open goes on from the last segment written.
func upgradeEntries(db *bbolt.DB) error {
	for copied, finished := false, false; !finished; {
		err := db.Update(func(tx *bbolt.Tx) error {
			var err error
			switch {
			case string(tx.Bucket(BucketMeta).Get(metaFormat)) != FormatV2:
				finished = true
			case copied:
				finished = true
				err = finishUpgrade(tx)
			default:
				copied, err = upgradeEntriesBatch(tx)
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("upgrade %s to %s: %w: %v", db.Path(), Format, storage.ErrIO, err)
		}
	}
	return nil
}

// upgradeEntriesBatch copies the next entries into segments; done reports
// that every entry is copied.
func upgradeEntriesBatch(tx *bbolt.Tx) (done bool, err error) {
	parent, err := tx.CreateBucketIfNotExists(bucketUpgrade)
	if err != nil {
		return false, err
	}
	segments, err := parent.CreateBucketIfNotExists(BucketSegments)
	if err != nil {
		return false, err
	}
	segments.FillPercent = 1.0
	var from []byte
	if k, _ := segments.Cursor().Last(); k != nil {
		from = entryKey(binary.BigEndian.Uint64(k), binary.BigEndian.Uint64(k[8:])+1)
	}
	cur := tx.Bucket(BucketEntries).Cursor()
	b := &segment.Builder{}
	put := func() error {
		v := b.Encode(nil)
		if err := segments.Put(segment.Key(b.ChainID, b.Last()), v); err != nil {
			return err
		}
		b.Reset()
		return nil
	}
	moved := 0
	k, v := cur.First()
	if from != nil {
		k, v = cur.Seek(from)
	}
	for ; k != nil; k, v = cur.Next() {
		if len(k) != segment.KeySize {
			return false, fmt.Errorf("%w: entry key of %d bytes", storage.ErrCorrupt, len(k))
		}
		id, seq := binary.BigEndian.Uint64(k), binary.BigEndian.Uint64(k[8:])
		if !b.Empty() && (id != b.ChainID || seq != b.Last()+1 || !b.Fits(len(v))) {
			if err := put(); err != nil {
				return false, err
			}
			if moved >= upgradeBatchBytes {
				return false, nil
			}
		}
		b.ChainID = id
		b.Add(seq, v)
		moved += len(v)
	}
	if !b.Empty() {
		if err := put(); err != nil {
			return false, err
		}
	}
	return true, nil
}

// finishUpgrade moves the segments to the top, deletes the entries bucket
// and writes the new format. It runs in a transaction of its own, after
// the last segments were committed: a bucket moved by the transaction that
// wrote into it lost those writes (bbolt 1.5).
func finishUpgrade(tx *bbolt.Tx) error {
	parent := tx.Bucket(bucketUpgrade)
	if err := tx.MoveBucket(BucketSegments, parent, nil); err != nil {
		return err
	}
	if err := tx.DeleteBucket(bucketUpgrade); err != nil {
		return err
	}
	if err := tx.DeleteBucket(BucketEntries); err != nil {
		return err
	}
	return tx.Bucket(BucketMeta).Put(metaFormat, []byte(Format))
}
