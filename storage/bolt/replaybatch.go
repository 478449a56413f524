package bolt

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt/internal/keyindex"
)

var _ storage.KeyBatchReader = (*Backend)(nil)

// keyReads is the memory of one ReadKeys call, kept in a pool between
// calls: the keys' digests, their chains' ids, and which keys are looked
// up in the read view.
type keyReads struct {
	digester storage.KeyDigester
	keys     []string
	digests  [][KeyDigestSize]byte
	ids      []uint64
	idKnown  []bool
	inView   []int
	stored   [][]byte
	// likely holds each key's seq map candidate (see seqMap).
	likely []candidate
}

var keyReadsPool = sync.Pool{New: func() any { return new(keyReads) }}

// ReadKeys implements storage.KeyBatchReader: ReadKey for every key, with
// the keys digested together in lanes, the seq map's lines asked for all
// the keys before the first lookup waits for one, one read view for the
// keys the file may hold, and one allocation for the entries' copies.
func (b *Backend) ReadKeys(ctx context.Context, keys []storage.ChainKey, reads []storage.KeyRead) error {
	if err := storage.BeginReadKeys(ctx, keys, reads); err != nil {
		return err
	}
	if b.closed.Load() {
		return storage.ErrClosed
	}
	s := keyReadsPool.Get().(*keyReads)
	defer func() {
		clear(s.keys) // the pool outlives the call: keep none of its strings
		clear(s.stored)
		keyReadsPool.Put(s)
	}()
	s.prepare(b, keys)
	for i, k := range keys {
		var absent bool
		if s.likely[i], absent = b.likelySeq(s.ids[i], s.idKnown[i], &s.digests[i]); s.likely[i].ok ||
			(!absent && b.fileMayHoldID(s.ids[i], s.idKnown[i], &s.digests[i])) {
			s.inView = append(s.inView, i)
			continue
		}
		if !b.overlay {
			continue
		}
		// As ReadKey: a durable commit's key is in the published tables, or
		// a checkpoint has moved it to the file since the filter was asked.
		seq, data, found, err := b.readPublishedTables(k.Chain, k.Key)
		if err != nil {
			return err
		}
		if found {
			reads[i] = storage.KeyRead{Seq: seq, Data: data, Found: true}
			continue
		}
		if s.ids[i], s.idKnown[i] = b.cache.chains.get(k.Chain); b.fileMayHoldID(s.ids[i], s.idKnown[i], &s.digests[i]) {
			s.inView = append(s.inView, i)
		}
	}
	if len(s.inView) == 0 {
		return nil
	}
	return b.readViewKeys(keys, reads, s)
}

// prepare digests the keys, resolves their chains' ids and asks for the
// seq map's lines their searches begin at.
func (s *keyReads) prepare(b *Backend, keys []storage.ChainKey) {
	n := len(keys)
	s.likely = slices.Grow(s.likely[:0], n)[:n]
	s.keys = slices.Grow(s.keys[:0], n)[:n]
	s.digests = slices.Grow(s.digests[:0], n)[:n]
	s.ids = slices.Grow(s.ids[:0], n)[:n]
	s.idKnown = slices.Grow(s.idKnown[:0], n)[:n]
	s.stored = slices.Grow(s.stored[:0], n)[:n]
	s.inView = s.inView[:0]
	for i, k := range keys {
		s.keys[i] = k.Key
		if i > 0 && k.Chain == keys[i-1].Chain {
			s.ids[i], s.idKnown[i] = s.ids[i-1], s.idKnown[i-1]
			continue
		}
		s.ids[i], s.idKnown[i] = b.cache.chains.get(k.Chain)
	}
	s.digester.Digest(s.digests, s.keys)
	var m *keyindex.SeqMap
	if f := b.cache.filter.Load(); f != nil {
		m = f.Seqs
	}
	if m == nil {
		return
	}
	for i := range keys {
		if s.idKnown[i] {
			m.Prefetch(s.ids[i], s.digests[i][:])
		}
	}
}

// readViewKeys looks the keys of s.inView up in one read view: the file,
// then (with the log) the view's memory tables for those the file lacks.
func (b *Backend) readViewKeys(keys []storage.ChainKey, reads []storage.KeyRead, s *keyReads) error {
	var v *memView
	var t *tx
	if b.overlay {
		var err error
		if v, t, err = b.beginView(false); err != nil {
			return err
		}
	} else {
		btx, err := b.beginBolt(false)
		if err != nil {
			return err
		}
		t = &tx{tx: btx, path: b.path, cache: b.cache}
	}
	broken, err := b.readFileKeys(t, keys, reads, s)
	b.endRead(t, broken)
	if err != nil || v == nil {
		return err
	}
	for _, i := range s.inView {
		if reads[i].Found {
			continue
		}
		seq, data, found, err := b.readTables(v.tables, v.asOf, keys[i].Chain, keys[i].Key)
		if err != nil {
			return err
		}
		reads[i] = storage.KeyRead{Seq: seq, Data: data, Found: found}
	}
	return nil
}

// readFileKeys is readFile for the keys of s.inView, under one recover,
// in passes whose misses overlap: the seq map's candidates first (their
// entries' lines asked for, then each entry read and kept when it holds
// its key); for the other keys, the lines of their run records asked for,
// the keys looked up, the lines of their entries asked for, then the
// entries read; all of them copied into one allocation.
func (b *Backend) readFileKeys(t *tx, keys []storage.ChainKey, reads []storage.KeyRead, s *keyReads) (broken bool, err error) {
	defer func(fault bool) {
		debug.SetPanicOnFault(fault)
		if p := recover(); p != nil {
			broken, err = true, damagedError(b.path, p)
		}
	}(debug.SetPanicOnFault(true))
	size := b.readLikelyKeys(t, keys, reads, s)
	if err := t.loadRuns(); err != nil {
		return false, err
	}
	for _, i := range s.inView {
		if s.idKnown[i] && s.stored[i] == nil {
			t.index.runs.Prefetch(s.ids[i], &s.digests[i])
		}
	}
	for _, i := range s.inView {
		k := keys[i]
		if s.stored[i] != nil {
			continue
		}
		if !s.idKnown[i] {
			s.ids[i], err = t.chainID(k.Chain)
			if errors.Is(err, storage.ErrNotFound) {
				continue // the file has no such chain
			}
			if err != nil {
				return false, err
			}
		}
		seq, found, err := t.lookupDigest(s.ids[i], k.Key, &s.digests[i])
		if err != nil {
			return false, err
		}
		reads[i].Seq, reads[i].Found = seq, found
	}
	for _, i := range s.inView {
		if reads[i].Found && s.stored[i] == nil {
			t.segmentIndex.Prefetch(s.ids[i], reads[i].Seq)
		}
	}
	for _, i := range s.inView {
		if !reads[i].Found || s.stored[i] != nil {
			continue
		}
		stored, err := t.entryAt(s.ids[i], reads[i].Seq)
		if errors.Is(err, storage.ErrNotFound) {
			return false, fmt.Errorf("%s: %w: chain %q key %q: the index maps it to seq %d, which the file does not hold",
				b.path, storage.ErrCorrupt, keys[i].Chain, keys[i].Key, reads[i].Seq)
		}
		if err != nil {
			return false, err
		}
		s.stored[i] = stored
		size += len(stored)
	}
	data := make([]byte, size)
	for _, i := range s.inView {
		if reads[i].Found {
			n := copy(data, s.stored[i])
			reads[i].Data = data[:n:n]
			data = data[n:]
		}
	}
	return false, nil
}

// readLikelyKeys reads the entries of the keys of s.inView that have a seq
// map candidate, their lines asked for first, and keeps (in s.stored, and
// as found in reads) those that hold their keys; it returns their size.
func (b *Backend) readLikelyKeys(t *tx, keys []storage.ChainKey, reads []storage.KeyRead, s *keyReads) (size int) {
	for _, i := range s.inView {
		if s.likely[i].ok {
			t.segmentIndex.Prefetch(s.ids[i], s.likely[i].seq)
		}
	}
	for _, i := range s.inView {
		if !s.likely[i].ok {
			continue
		}
		if stored, err := t.entryAt(s.ids[i], s.likely[i].seq); err == nil && b.holdsKey(stored, keys[i].Key) {
			reads[i].Seq, reads[i].Found = s.likely[i].seq, true
			s.stored[i] = stored
			size += len(stored)
		}
	}
	return size
}
