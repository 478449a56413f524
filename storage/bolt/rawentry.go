package bolt

import (
	"bytes"
	"encoding/binary"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt/internal/segment"
)

// The functions below reach one entry's stored bytes in a bbolt
// transaction of the file, whatever segment holds it: tests and tools that
// damage a ledger on purpose (to see verify find it) use them, with
// ChainID, instead of knowing the layout. They work on files of every
// format; the writes need a writable bbolt transaction.

// RawEntry returns the stored bytes of the chain's entry seq, or nil when
// no entry is stored there. They are bbolt's: valid while btx lasts, and
// not to be changed (in a read transaction they lie in the file's map).
func RawEntry(btx *bbolt.Tx, chainID, seq uint64) []byte {
	if btx.Bucket(BucketSegments) == nil {
		return btx.Bucket(BucketEntries).Get(entryKey(chainID, seq))
	}
	s, ok := heldBy(btx, chainID, seq)
	if !ok {
		return nil
	}
	data, err := s.SeqEntry(seq)
	if err != nil {
		return nil
	}
	return data
}

// PutRawEntry replaces the stored bytes of the chain's entry seq; when no
// segment holds seq, the entry is stored as a segment of its own.
func PutRawEntry(btx *bbolt.Tx, chainID, seq uint64, data []byte) error {
	if btx.Bucket(BucketSegments) == nil {
		return btx.Bucket(BucketEntries).Put(segment.Key(chainID, seq), bytes.Clone(data))
	}
	s, ok := heldBy(btx, chainID, seq)
	if !ok {
		b := &segment.Builder{ChainID: chainID}
		b.Add(seq, data)
		return btx.Bucket(BucketSegments).Put(segment.Key(chainID, seq), b.Encode(nil))
	}
	return rewriteSegment(btx, chainID, s, func(b *segment.Builder, at uint64, e []byte) error {
		if at == seq {
			e = data
		}
		b.Add(at, e)
		return nil
	})
}

// DeleteRawEntry removes the chain's entry seq, splitting its segment in
// two around it; removing a missing entry is not an error.
func DeleteRawEntry(btx *bbolt.Tx, chainID, seq uint64) error {
	if btx.Bucket(BucketSegments) == nil {
		return btx.Bucket(BucketEntries).Delete(entryKey(chainID, seq))
	}
	s, ok := heldBy(btx, chainID, seq)
	if !ok {
		return nil
	}
	segments := btx.Bucket(BucketSegments)
	return rewriteSegment(btx, chainID, s, func(b *segment.Builder, at uint64, e []byte) error {
		if at != seq {
			b.Add(at, e)
			return nil
		}
		if b.Empty() {
			return nil
		}
		err := segments.Put(segment.Key(chainID, b.Last()), b.Encode(nil))
		b.Reset()
		return err
	})
}

// heldBy returns the decoded segment that holds the chain's entry seq.
func heldBy(btx *bbolt.Tx, chainID, seq uint64) (segment.Segment, bool) {
	k, v := btx.Bucket(BucketSegments).Cursor().Seek(entryKey(chainID, seq))
	if len(k) < 8 || binary.BigEndian.Uint64(k) != chainID {
		return segment.Segment{}, false
	}
	s, err := segment.Decode(k, v)
	if err != nil || seq < s.First {
		return segment.Segment{}, false
	}
	return s, true
}

// rewriteSegment deletes segment s and writes what add builds from its
// entries, the last part under the key of s's last entry.
func rewriteSegment(btx *bbolt.Tx, chainID uint64, s segment.Segment, add func(b *segment.Builder, seq uint64, e []byte) error) error {
	segments := btx.Bucket(BucketSegments)
	s.Value = bytes.Clone(s.Value) // the stored bytes may go with the delete
	if err := segments.Delete(segment.Key(chainID, s.Last)); err != nil {
		return err
	}
	b := &segment.Builder{ChainID: chainID}
	for i := range s.Count {
		e, err := s.Entry(i)
		if err != nil {
			return storage.ErrCorrupt
		}
		if err := add(b, s.First+uint64(i), bytes.Clone(e)); err != nil {
			return err
		}
	}
	if b.Empty() {
		return nil
	}
	return segments.Put(segment.Key(chainID, b.Last()), b.Encode(nil))
}
