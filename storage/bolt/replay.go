package bolt

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt/internal/memtable"
)

var _ storage.KeyReader = (*Backend)(nil)

// ReadKey implements storage.KeyReader: the probe, the lookup and the read
// of the entry of a retry in one pass, with one digest of the key and one
// resolution of the chain's id.
//
// A handle with a seq map (see seqMap) asks it first: a key it maps to a
// seq is read in a read view at that seq, and when the entry there holds
// the key (Options.EntryKey) it is the answer, without a search of the key
// runs; otherwise the same view goes on as below.
//
// The file's key filter is asked next, as MayHoldKey does. When it may
// hold the key (a retry, the common case), a read view is taken (with the
// log, a pooled bbolt read transaction and the durable memory tables: see
// beginView) and the file is searched before the tables, since the file
// holds nearly every key; the tables are walked only when the file does not
// have it. When the filter rules the key out, the published memory tables
// are walked without a transaction, as of the durable LSN, and an entry
// they hold is the answer (a view begun then would see it); a key they lack
// is asked of the filter again, since a checkpoint may have moved it to the
// file meanwhile, and otherwise is absent, with no transaction begun.
func (b *Backend) ReadKey(ctx context.Context, chain, key string) (seq uint64, data []byte, found bool, err error) {
	if key == "" {
		panic("bolt: ReadKey of an empty idempotency key")
	}
	if err := ctx.Err(); err != nil {
		return 0, nil, false, err
	}
	if b.closed.Load() {
		return 0, nil, false, storage.ErrClosed
	}
	digest := KeyDigest(key)
	id, idKnown := b.cache.chains.get(chain)
	likely, absent := b.likelySeq(id, idKnown, &digest)
	if likely.ok {
		return b.readView(chain, key, id, idKnown, &digest, likely)
	}
	if absent || !b.fileMayHoldID(id, idKnown, &digest) {
		if !b.overlay {
			return 0, nil, false, nil
		}
		// A key of a commit that is not durable yet is not the reader's
		// to see: the write path decides it, as it decides an absent key.
		seq, data, found, err := b.readPublishedTables(chain, key)
		if err != nil || found {
			return seq, data, found, err
		}
		if id, idKnown = b.cache.chains.get(chain); !b.fileMayHoldID(id, idKnown, &digest) {
			return 0, nil, false, nil
		}
	}
	return b.readView(chain, key, id, idKnown, &digest, candidate{})
}

// candidate is the seq a seq map gives for a key, when ok.
type candidate struct {
	seq uint64
	ok  bool
}

// likelySeq returns the seq the seq map gives for the key of a committed
// chain, if the handle has a map and the map has the key's fingerprint.
// absent reports that a map holding every key of its filter lacks the key:
// the file does not hold it, as far as the filter knows (fileMayHoldID
// would say the same, after searching the map again).
func (b *Backend) likelySeq(id uint64, idKnown bool, digest *[KeyDigestSize]byte) (likely candidate, absent bool) {
	f := b.cache.filter.Load()
	if f == nil || f.Seqs == nil || !idKnown {
		return candidate{}, false
	}
	seq, ok := f.Seqs.Find(id, digest[:])
	return candidate{seq: seq, ok: ok}, !ok && !f.Seqs.Partial.Load()
}

// holdsKey reports whether stored, an entry's bytes, holds the idempotency
// key (Options.EntryKey).
func (b *Backend) holdsKey(stored []byte, key string) bool {
	k, ok := b.entryKey(stored)
	return ok && string(k) == key
}

// ReadKeyBesideClose reports that ReadKey may run beside Close and after
// it, so that a caller need not hold Close off while it reads: a call
// that begins after Close answers storage.ErrClosed (the closed flag, or
// bbolt refusing a transaction), and one that began before reads only
// what Close leaves in place, the memory tables (heap memory) and its read
// transaction's pages (bbolt's Close waits for every read transaction to
// end before it unmaps the file; the pool keeps none once closed).
func (b *Backend) ReadKeyBesideClose() bool { return true }

var _ storage.KeyReaderBesideClose = (*Backend)(nil)

// fileMayHoldID is fileMayHold with the chain's id already looked up in the
// map of committed chains (idKnown false: the map has no such name). The
// seq map answers for the filter when it holds all of the filter's keys.
func (b *Backend) fileMayHoldID(id uint64, idKnown bool, digest *[KeyDigestSize]byte) bool {
	f := b.cache.filter.Load()
	if f == nil {
		return true
	}
	if !idKnown {
		return !b.cache.chains.complete.Load()
	}
	if m := f.Seqs; m != nil && !m.Partial.Load() {
		// A map that holds every key of the filter rules a key out as the
		// filter would, and ReadKey has just read its lines (likelySeq):
		// the filter's line is not read.
		_, ok := m.Find(id, digest[:])
		return ok
	}
	return f.MayContain(id, digest[:])
}

// readPublishedTables looks the key up in the memory tables of the last
// published commit, seeing only the commits that are durable: a view begun
// now would see those.
func (b *Backend) readPublishedTables(chain, key string) (seq uint64, data []byte, found bool, err error) {
	durable := b.durableLSN.Load() // before the tables: what it covers is durable
	return b.readTables(b.published.Load().tables, durable, chain, key)
}

// readTables looks the key up in memory tables as of a commit, newest
// table first, and copies its entry.
func (b *Backend) readTables(tables []*memtable.Table, asOf uint64, chain, key string) (seq uint64, data []byte, found bool, err error) {
	for _, m := range tables {
		seq, ok := m.LookupKey(chain, key, asOf)
		if !ok {
			continue
		}
		// A commit adds a key and its entry together, so the entry is here.
		stored, ok := m.Entry(chain, seq, asOf)
		if !ok {
			return 0, nil, false, fmt.Errorf("%s: %w: chain %q key %q: a memory table maps it to seq %d, which it does not hold",
				b.path, storage.ErrCorrupt, chain, key, seq)
		}
		return seq, append(make([]byte, 0, len(stored)), stored...), true, nil
	}
	return 0, nil, false, nil
}

// readView reads the key in a read view: the file, then (with the log) the
// view's memory tables.
func (b *Backend) readView(chain, key string, id uint64, idKnown bool, digest *[KeyDigestSize]byte, likely candidate) (seq uint64, data []byte, found bool, err error) {
	var v *memView
	var t *tx
	if b.overlay {
		if v, t, err = b.beginView(false); err != nil {
			return 0, nil, false, err
		}
	} else {
		btx, err := b.beginBolt(false)
		if err != nil {
			return 0, nil, false, err
		}
		t = &tx{tx: btx, path: b.path, cache: b.cache}
	}
	seq, data, found, broken, err := b.readFile(t, chain, key, id, idKnown, digest, likely)
	b.endRead(t, broken)
	if err != nil || found || v == nil {
		return seq, data, found, err
	}
	return b.readTables(v.tables, v.asOf, chain, key)
}

// readFile looks the key up in the file and copies its entry, under
// recover as every read of the file made for a caller (see guardedTx):
// broken reports a recovered panic, after which the transaction is not
// reused. A likely seq is read first, and is the answer when its entry
// holds the key; an entry the view lacks, one that holds another key, or
// one that does not read leaves the answer to the key runs.
func (b *Backend) readFile(t *tx, chain, key string, id uint64, idKnown bool, digest *[KeyDigestSize]byte, likely candidate) (seq uint64, data []byte, found, broken bool, err error) {
	defer func(fault bool) {
		debug.SetPanicOnFault(fault)
		if p := recover(); p != nil {
			seq, data, found, broken, err = 0, nil, false, true, damagedError(b.path, p)
		}
	}(debug.SetPanicOnFault(true))
	if !idKnown {
		id, err = t.chainID(chain)
		if errors.Is(err, storage.ErrNotFound) {
			return 0, nil, false, false, nil // the file has no such chain
		}
		if err != nil {
			return 0, nil, false, false, err
		}
	}
	if likely.ok {
		if stored, err := t.entryAt(id, likely.seq); err == nil && b.holdsKey(stored, key) {
			return likely.seq, copied(stored), true, false, nil
		}
	}
	seq, found, err = t.lookupDigest(id, key, digest)
	if err != nil || !found {
		return 0, nil, false, false, err
	}
	stored, err := t.entryAt(id, seq)
	if errors.Is(err, storage.ErrNotFound) {
		return 0, nil, false, false, fmt.Errorf("%s: %w: chain %q key %q: the index maps it to seq %d, which the file does not hold",
			b.path, storage.ErrCorrupt, chain, key, seq)
	}
	if err != nil {
		return 0, nil, false, false, err
	}
	return seq, copied(stored), true, false, nil
}

// copied returns a copy of stored: make and copy, which the compiler turns
// into one allocation that is not cleared first (an append to a new slice
// clears it, then copies).
func copied(stored []byte) []byte {
	data := make([]byte, len(stored))
	copy(data, stored)
	return data
}

// endRead ends a read view's file transaction: back to the pool when it is
// sound and reads the file's last commit (see logTx.endBase), rolled back
// otherwise.
func (b *Backend) endRead(t *tx, broken bool) {
	if !b.overlay {
		g := guardedTx{t: t}
		g.Rollback()
		return
	}
	if broken || t.done || !b.readers.Give(t) {
		g := guardedTx{t: t}
		if broken {
			g.rollback()
			return
		}
		g.Rollback()
	}
}
