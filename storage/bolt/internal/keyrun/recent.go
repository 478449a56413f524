package keyrun

import (
	"encoding/binary"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt/internal/keyindex"
)

// The recent keys are exact keys in a B-tree of their own, which small
// transactions write cheaply, u64be chain id | key -> u64be seq, with
// their count in the meta bucket; when it holds RecentMax keys they are
// written out as one run.
const (
	// RecentMax is how many keys the recent B-tree holds before they are
	// written out as a run.
	RecentMax = 4096
	// DirectMin is how many new keys a transaction needs to write them as a
	// run directly instead of through the recent B-tree. A run of sixteen
	// keys is one leaf written in order; the same keys scattered over the
	// recent B-tree dirty about a leaf each, a quarter of the CPU of a
	// group commit of 64 appends (8, 16 and 32 measured in
	// docs/PERFORMANCE.md).
	DirectMin = 16
)

// RecentCountKey is the key of the recent keys' count (u64be) in the meta
// bucket.
var RecentCountKey = []byte("recent_keys")

// RecentHost is a Host that gives the recent keys' buckets too.
type RecentHost interface {
	Host
	// KeysBucket is the bucket of the recent keys.
	KeysBucket() *bbolt.Bucket
	// MetaBucket is the bucket that holds RecentCountKey.
	MetaBucket() *bbolt.Bucket
	// RenewKeysBucket replaces the bucket of the recent keys by an empty
	// one, which KeysBucket returns from then on.
	RenewKeysBucket() error
}

// RecentKey is the key of (chain id, key) in the recent B-tree.
func RecentKey(chainID uint64, key string) []byte {
	k := make([]byte, 8, 8+len(key))
	binary.BigEndian.PutUint64(k, chainID)
	return append(k, key...)
}

// RecentSeq finds the seq of (chain id, key) in the recent B-tree.
func RecentSeq(h RecentHost, chainID uint64, key string) (uint64, bool, error) {
	if v := h.KeysBucket().Get(RecentKey(chainID, key)); v != nil {
		if len(v) != 8 {
			return 0, false, fmt.Errorf("%s: %w: key index value of %d bytes", h.FilePath(), storage.ErrCorrupt, len(v))
		}
		return binary.BigEndian.Uint64(v), true, nil
	}
	return 0, false, nil
}

// RecentCount is how many keys the recent B-tree holds.
func RecentCount(h RecentHost) (uint64, error) {
	v := h.MetaBucket().Get(RecentCountKey)
	if v == nil {
		return 0, nil
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%s: %w: recent_keys of %d bytes", h.FilePath(), storage.ErrCorrupt, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

func setRecentCount(h RecentHost, n uint64) error {
	if err := h.MetaBucket().Put(RecentCountKey, binary.BigEndian.AppendUint64(nil, n)); err != nil {
		return h.WriteError(err)
	}
	return nil
}

// Flush writes a transaction's n new keys before it commits: records holds
// their run records, in any order (Flush sorts them in place), and each
// hands every key to put. A batch of DirectMin keys or more becomes a run
// of its own; a smaller one goes into the recent B-tree, which is written
// out as a run when it holds RecentMax keys. Then runs are merged while a
// level holds Fanout of them.
func (v *View) Flush(h RecentHost, n int, records []byte, each func(put func(chainID uint64, key string, seq uint64) error) error) error {
	if n == 0 {
		return nil
	}
	if n >= DirectMin {
		keyindex.SortRecords(records) // in place: the filter takes them in any order
		return v.Add(h, records)
	}
	keys := h.KeysBucket()
	err := each(func(chainID uint64, key string, seq uint64) error {
		if err := keys.Put(RecentKey(chainID, key), binary.BigEndian.AppendUint64(nil, seq)); err != nil {
			return h.WriteError(err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	recent, err := RecentCount(h)
	if err != nil {
		return err
	}
	recent += uint64(n)
	if recent < RecentMax {
		return setRecentCount(h, recent)
	}
	records = make([]byte, 0, recent*keyindex.RecordSize)
	cur := keys.Cursor()
	for k, val := cur.First(); k != nil; k, val = cur.Next() {
		if len(k) < 8 || len(val) != 8 {
			return fmt.Errorf("%s: %w: key index entry %x", h.FilePath(), storage.ErrCorrupt, k)
		}
		records = keyindex.AppendRecord(records, binary.BigEndian.Uint64(k), string(k[8:]), binary.BigEndian.Uint64(val))
	}
	keyindex.SortRecords(records)
	if err := h.RenewKeysBucket(); err != nil {
		return err
	}
	if err := setRecentCount(h, 0); err != nil {
		return err
	}
	return v.Add(h, records)
}
