package bolt

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt/internal/mapscan"
	"github.com/ledgerworks/ledger/storage/bolt/internal/segment"
)

// entryBytesMax bounds one stored entry: a segment's offsets are 32-bit,
// and bbolt refuses larger values.
const entryBytesMax = min(bbolt.MaxValueSize-segment.CountSize-segment.OffsetSize, math.MaxUint32)

// segmentArenaBytes is the memory a write transaction takes at a time for
// the segments it seals: bbolt reads a value at commit, so each sealed
// segment keeps its own bytes until then.
const segmentArenaBytes = 1 << 20

// entryKey is the key a lookup of (chain id, seq) seeks: the segment that
// holds seq is the first whose last seq is at or after it.
func entryKey(chainID, seq uint64) []byte {
	var k [segment.KeySize]byte
	binary.BigEndian.PutUint64(k[:8], chainID)
	binary.BigEndian.PutUint64(k[8:], seq)
	return k[:]
}

// segmentCursor returns a cursor on the segments: a read transaction's
// own, kept between lookups, or a new one in a write transaction, whose
// writes may move what a kept cursor stands on.
func (t *tx) segmentCursor(segments *bbolt.Bucket) *bbolt.Cursor {
	if t.tx.Writable() {
		return segments.Cursor()
	}
	if t.segmentsCursor == nil {
		t.segmentsCursor = segments.Cursor()
	}
	return t.segmentsCursor
}

// appendEntry adds the chain's next entry to its segment builder, sealing
// the builder's segment first when the entry does not fit.
func (t *tx) appendEntry(chainID, seq uint64, data []byte) error {
	if len(data) > entryBytesMax {
		return fmt.Errorf("append to chain id %d: seq %d: %w: entry of %d bytes, at most %d", chainID, seq, storage.ErrIO, len(data), entryBytesMax)
	}
	b, err := t.builder(chainID, seq, len(data))
	if err != nil {
		return err
	}
	if !b.Fits(len(data)) {
		if err := t.putSegment(b); err != nil {
			return err
		}
		b.Reset()
	}
	b.Add(seq, data)
	return nil
}

// builder returns the chain's segment builder, starting it from the
// chain's last stored segment when the entry fits there, so that segments
// fill up across transactions.
func (t *tx) builder(chainID, seq uint64, size int) (*segment.Builder, error) {
	if b := t.builders[chainID]; b != nil {
		return b, nil
	}
	if t.segments() == nil {
		return nil, fmt.Errorf("write %s: %w: the file's entries are in the format before segments", t.path, storage.ErrReadOnly)
	}
	if t.builders == nil {
		t.builders = make(map[uint64]*segment.Builder)
	}
	b := &segment.Builder{ChainID: chainID}
	t.builders[chainID] = b
	if seq <= 1 {
		return b, nil
	}
	key := entryKey(chainID, seq-1)
	v := t.segments().Get(key)
	if v == nil {
		return b, nil // the chain's head has no segment: verify reports it
	}
	s, err := segment.Decode(key, v)
	if err != nil {
		return nil, fmt.Errorf("append to chain id %d: %s: %w", chainID, t.path, err)
	}
	if len(v)+segment.OffsetSize+size > SegmentBytesMax || s.Count >= segment.EntriesMax {
		return b, nil
	}
	return b, b.Load(s)
}

// putSegment writes the builder's entries as a segment and deletes the
// stored segment it extends, which its entries begin with.
func (t *tx) putSegment(b *segment.Builder) error {
	size := b.SizeWith(0) - segment.OffsetSize
	if cap(t.arena)-len(t.arena) < size {
		t.arena = make([]byte, 0, max(segmentArenaBytes, size))
	}
	v := b.Encode(t.arena[len(t.arena):len(t.arena)])
	t.arena = t.arena[:len(t.arena)+len(v)]
	last := b.Last()
	if err := t.segments().Put(segment.Key(b.ChainID, last), v); err != nil {
		return t.writeError(err)
	}
	if b.Stored != 0 && b.Stored != last {
		if err := t.segments().Delete(entryKey(b.ChainID, b.Stored)); err != nil {
			return t.writeError(err)
		}
	}
	b.Stored = last
	return nil
}

// flushSegments writes every builder's entries, so that the file (and a
// cursor over it) holds all the transaction's entries; a builder keeps its
// entries and goes on filling the same segment.
func (t *tx) flushSegments() error {
	if len(t.builders) == 0 {
		return nil
	}
	ids := make([]uint64, 0, len(t.builders))
	for id, b := range t.builders {
		if !b.Empty() && b.Stored != b.Last() {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		if err := t.putSegment(t.builders[id]); err != nil {
			return err
		}
	}
	return nil
}

// legacyEntry reads an entry of a file in the format before segments.
func legacyEntry(btx *bbolt.Tx, id, seq uint64) ([]byte, error) {
	v := btx.Bucket(BucketEntries).Get(entryKey(id, seq))
	if v == nil {
		return nil, storage.ErrNotFound
	}
	return v, nil
}

// legacyEntries scans the entries of a file in the format before
// segments, one value per entry.
func legacyEntries(btx *bbolt.Tx, chain string, id, fromSeq uint64, yield func(storage.Record, error) bool) {
	cur := btx.Bucket(BucketEntries).Cursor()
	var memory mapscan.Scan
	for k, v := cur.Seek(entryKey(id, fromSeq)); len(k) >= 8 && binary.BigEndian.Uint64(k) == id; k, v = cur.Next() {
		memory.Observe(v)
		if len(k) != segment.KeySize {
			yield(storage.Record{}, fmt.Errorf("chain %q: %w: entry key of %d bytes", chain, storage.ErrCorrupt, len(k)))
			return
		}
		if !yield(storage.Record{Seq: binary.BigEndian.Uint64(k[8:]), Data: v}, nil) {
			return
		}
	}
}

// indexedEntry reads the entry (chain id, seq) through the transaction's
// map of the chain's segments (internal/segment's Index), building the map
// once the chain has been read often enough; its error is
// storage.ErrNotFound for a seq the chain does not hold. ok is false when
// the caller must descend instead: a write transaction, a chain read too
// seldom, or one too long to map.
func (t *tx) indexedEntry(id, seq uint64) (data []byte, ok bool, err error) {
	if t.tx.Writable() {
		return nil, false, nil
	}
	x := &t.segmentIndex
	ready, build := x.Ready(id)
	if build {
		ready = x.Build(t.segments().Cursor(), id)
	}
	if !ready {
		return nil, false, nil
	}
	i := x.Search(seq)
	if i == x.Count() {
		return nil, true, storage.ErrNotFound
	}
	if i > 0 {
		if data, ok := x.MappedEntry(i, seq); ok {
			return data, true, nil
		}
	}
	last, value := x.Segment(i)
	var key [segment.KeySize]byte
	binary.BigEndian.PutUint64(key[:8], id)
	binary.BigEndian.PutUint64(key[8:], last)
	data, err = t.segmentEntry(id, seq, key[:], value)
	return data, true, err
}
