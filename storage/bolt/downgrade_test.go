package bolt

import (
	"bytes"

	"github.com/ledgerworks/ledger/storage/bolt/internal/segment"
	bbolt "go.etcd.io/bbolt"
)

// DowngradeToFormatV2 rewrites a file's entries in the layout of FormatV2,
// one value per entry, so that tests can open a file of that format.
func DowngradeToFormatV2(btx *bbolt.Tx) error {
	entries, err := btx.CreateBucket(BucketEntries)
	if err != nil {
		return err
	}
	entries.FillPercent = 1.0
	err = btx.Bucket(BucketSegments).ForEach(func(k, v []byte) error {
		s, err := segment.Decode(k, v)
		if err != nil {
			return err
		}
		id := k[:8]
		for i := range s.Count {
			e, err := s.Entry(i)
			if err != nil {
				return err
			}
			key := append(bytes.Clone(id), entryKey(0, s.First+uint64(i))[8:]...)
			if err := entries.Put(key, bytes.Clone(e)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := btx.DeleteBucket(BucketSegments); err != nil {
		return err
	}
	return btx.Bucket(BucketMeta).Put(metaFormat, []byte(FormatV2))
}
