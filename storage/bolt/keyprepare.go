package bolt

import (
	"context"
	"errors"
	"runtime/debug"

	"github.com/ledgerworks/ledger/internal/blake3batch"
	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt/internal/memtable"
)

// A write of many keyed entries looks every key up before it appends it.
// One at a time, each lookup waits for its own cache misses (a memory
// table's filter word, the file's filter block) and hashes its own digest.
// PrepareKeys looks a whole batch up first, layer by layer: the loads of
// one layer for all the keys are independent, so the processor overlaps
// their misses, and the file's digests are hashed sixteen at a time.

// keyPreparation is what the last PrepareKeys call of a transaction
// prepared, the next key LookupKey may take from it, and the file pass's
// scratch.
type keyPreparation struct {
	keys []memtable.PreparedKey
	next int

	fileKeys []int32  // keys the file pass looks up
	ids      []uint64 // their chains' ids in the file
	messages [][]byte
	digests  [][blake3batch.Size]byte
	buffer   []byte
}

// Bounds of the preparation a writer hands to the next one, as
// scratchOperationsMax bounds its operations: the keys of one call, and
// the bytes of their digests' messages.
const (
	keyPreparationKeysMax        = storage.PrepareKeysMax
	keyPreparationBufferBytesMax = 1 << 20
)

var _ storage.KeyPreparer = (*logTx)(nil)

// PrepareKeys implements storage.KeyPreparer: it looks the keys up in the
// view's memory tables, then in the file, and keeps the answers for the
// LookupKey calls that follow.
func (t *logTx) PrepareKeys(ctx context.Context, keys []storage.ChainKey) {
	p := &t.prepared
	p.keys, p.next = p.keys[:0], 0
	if t.done || len(keys) == 0 {
		return
	}
	for _, k := range keys[:min(len(keys), storage.PrepareKeysMax)] {
		pk := memtable.PreparedKey{Chain: k.Chain, Key: k.Key}
		if k.Key != "" && len(k.Key) <= IdempotencyKeySizeMax && len(k.Chain) <= ChainNameSizeMax {
			pk.Hash, pk.Known = memtable.KeyHash(k.Key), true
		}
		p.keys = append(p.keys, pk)
	}
	for _, m := range t.view.tables {
		m.LookupPrepared(p.keys, t.view.asOf)
	}
	if err := t.base.lookupPrepared(p); err != nil {
		for i := range p.keys {
			if !p.keys[i].Found {
				p.keys[i].Known = false // the lookup itself reports the failure
			}
		}
	}
}

// takePrepared returns the prepared answer for the chain's key when it is
// the next one prepared, nil otherwise.
func (t *logTx) takePrepared(chain, key string) *memtable.PreparedKey {
	p := &t.prepared
	if p.next >= len(p.keys) {
		return nil
	}
	pk := &p.keys[p.next]
	if pk.Key != key || pk.Chain != chain {
		return nil
	}
	p.next++
	if !pk.Known {
		return nil
	}
	return pk
}

// lookupPreparedKey is LookupKey for a prepared key: the transaction's own
// appends, then the prepared answer.
func (t *logTx) lookupPreparedKey(pk *memtable.PreparedKey) (uint64, error) {
	if p := t.chains[pk.Chain]; p != nil {
		if i, ok := p.keys.Find(pk.Hash, pk.Key, p.entries); ok {
			return p.entries[i].Seq, nil
		}
	}
	if pk.Found {
		return pk.Seq, nil
	}
	if t.writable {
		t.lastMiss.chain, t.lastMiss.key, t.lastMiss.hash = pk.Chain, pk.Key, pk.Hash
	}
	return 0, storage.ErrNotFound
}

// releasePreparation keeps the preparation's memory for the next writer
// unless it grew past its bound, cleared of the keys it pointed to.
func (t *logTx) releasePreparation() {
	p := t.prepared
	t.prepared = keyPreparation{}
	if cap(p.keys) > keyPreparationKeysMax || cap(p.buffer) > keyPreparationBufferBytesMax {
		return
	}
	clear(p.keys[:cap(p.keys)])
	clear(p.messages[:cap(p.messages)])
	p.keys, p.next, p.messages = p.keys[:0], 0, p.messages[:0]
	t.b.logScratch.prepared = p
}

func (g *guardedTx) lookupPrepared(p *keyPreparation) (err error) {
	if g.broken != nil {
		return g.broken
	}
	defer g.guard(&err, debug.SetPanicOnFault(true))
	return g.t.lookupPrepared(p)
}

// lookupPrepared is the file's part of PrepareKeys, for the keys the memory
// tables did not hold: their chains' ids, their digests in lanes, the key
// filter, and the runs for the keys the filter does not rule out. A
// writable file transaction (no log) is left to LookupKey, which also
// consults its pending keys.
func (t *tx) lookupPrepared(p *keyPreparation) error {
	if t.tx.Writable() {
		return errors.ErrUnsupported
	}
	if err := t.usable(false); err != nil {
		return err
	}
	p.fileKeys, p.ids = p.fileKeys[:0], p.ids[:0]
	var id uint64
	var idErr error
	chain, looked := "", false // as in memtable.lookupPrepared
	for i := range p.keys {
		k := &p.keys[i]
		if !k.Known || k.Found {
			continue
		}
		if !looked || k.Chain != chain {
			id, idErr = t.chainID(k.Chain)
			chain, looked = k.Chain, true
		}
		switch {
		case errors.Is(idErr, storage.ErrNotFound):
			continue // a chain the file does not hold holds no key there
		case idErr != nil:
			return idErr
		}
		p.fileKeys, p.ids = append(p.fileKeys, int32(i)), append(p.ids, id)
	}
	if len(p.fileKeys) == 0 {
		return nil
	}
	t.digestPrepared(p)
	f, err := t.keyFilter()
	if err != nil {
		return err
	}
	for n, i := range p.fileKeys {
		k, id := &p.keys[i], p.ids[n]
		digest := (*[KeyDigestSize]byte)(p.digests[n][:KeyDigestSize])
		if f != nil && !f.MayContain(id, digest[:]) {
			continue
		}
		seq, found, err := t.lookupDigest(id, k.Key, digest)
		if err != nil {
			return err
		}
		k.Seq, k.Found = seq, found
	}
	return nil
}

// digestPrepared hashes the KeyDigest of every key of p.fileKeys, in lanes.
func (t *tx) digestPrepared(p *keyPreparation) {
	size := 0
	for _, i := range p.fileKeys {
		size += len(storage.KeyDigestDomain) + len(p.keys[i].Key)
	}
	if cap(p.buffer) < size {
		p.buffer = make([]byte, 0, size)
	}
	buffer := p.buffer[:0]
	p.messages = p.messages[:0]
	for _, i := range p.fileKeys {
		start := len(buffer)
		buffer = append(append(buffer, storage.KeyDigestDomain...), p.keys[i].Key...)
		p.messages = append(p.messages, buffer[start:len(buffer):len(buffer)])
	}
	if cap(p.digests) < len(p.fileKeys) {
		p.digests = make([][blake3batch.Size]byte, len(p.fileKeys))
	}
	p.digests = p.digests[:len(p.fileKeys)]
	blake3batch.Sum256(p.digests, p.messages)
}
