package bolt

import (
	"bytes"
	"encoding/binary"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage"
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
	data, err := s.seqEntry(seq)
	if err != nil {
		return nil
	}
	return data
}

// PutRawEntry replaces the stored bytes of the chain's entry seq; when no
// segment holds seq, the entry is stored as a segment of its own.
func PutRawEntry(btx *bbolt.Tx, chainID, seq uint64, data []byte) error {
	if btx.Bucket(BucketSegments) == nil {
		return btx.Bucket(BucketEntries).Put(segmentKey(chainID, seq), bytes.Clone(data))
	}
	s, ok := heldBy(btx, chainID, seq)
	if !ok {
		b := &segmentBuilder{chainID: chainID}
		b.add(seq, data)
		return btx.Bucket(BucketSegments).Put(segmentKey(chainID, seq), b.encode(nil))
	}
	return rewriteSegment(btx, chainID, s, func(b *segmentBuilder, at uint64, e []byte) error {
		if at == seq {
			e = data
		}
		b.add(at, e)
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
	return rewriteSegment(btx, chainID, s, func(b *segmentBuilder, at uint64, e []byte) error {
		if at != seq {
			b.add(at, e)
			return nil
		}
		if b.empty() {
			return nil
		}
		err := segments.Put(segmentKey(chainID, b.last()), b.encode(nil))
		b.reset()
		return err
	})
}

// heldBy returns the decoded segment that holds the chain's entry seq.
func heldBy(btx *bbolt.Tx, chainID, seq uint64) (segment, bool) {
	k, v := btx.Bucket(BucketSegments).Cursor().Seek(entryKey(chainID, seq))
	if len(k) < 8 || binary.BigEndian.Uint64(k) != chainID {
		return segment{}, false
	}
	s, err := decodeSegment(k, v)
	if err != nil || seq < s.first {
		return segment{}, false
	}
	return s, true
}

// rewriteSegment deletes segment s and writes what add builds from its
// entries, the last part under the key of s's last entry.
func rewriteSegment(btx *bbolt.Tx, chainID uint64, s segment, add func(b *segmentBuilder, seq uint64, e []byte) error) error {
	segments := btx.Bucket(BucketSegments)
	s.value = bytes.Clone(s.value) // the stored bytes may go with the delete
	if err := segments.Delete(segmentKey(chainID, s.last)); err != nil {
		return err
	}
	b := &segmentBuilder{chainID: chainID}
	for i := range s.count {
		e, err := s.entry(i)
		if err != nil {
			return storage.ErrCorrupt
		}
		if err := add(b, s.first+uint64(i), bytes.Clone(e)); err != nil {
			return err
		}
	}
	if b.empty() {
		return nil
	}
	return segments.Put(segmentKey(chainID, b.last()), b.encode(nil))
}
