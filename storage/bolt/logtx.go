package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"unsafe"

	bbolt "go.etcd.io/bbolt"
	bbolterrors "go.etcd.io/bbolt/errors"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt/internal/commitrec"
	"github.com/ledgerworks/ledger/storage/bolt/internal/memtable"
)

// logTx is a transaction of a backend whose commits go to the log. It reads
// through three layers, newest first: its own writes, the memory tables of
// its view, and a bbolt read transaction (base). A writable one holds the
// backend's writer slot from Begin to Commit or Rollback and collects its
// writes as operations; Commit turns them into one log record.
type logTx struct {
	b        *Backend
	view     *memView
	base     *guardedTx
	writable bool
	done     bool
	// forked is set on a fork, whose bbolt transaction ends on its own
	// goroutine (see forkBeginWaitMax).
	forked bool

	operations []commitrec.Operation
	recordSize int
	chains     map[string]*pendingChain
	state      map[string]memtable.StateVersion
	// lastMiss is the chain and key of the newest LookupKey that found
	// nothing, with no append since, and the key's keyHash: the engine
	// looks a key up before it appends it, and the append needs no second
	// lookup nor hash.
	lastMiss struct {
		chain, key string
		hash       uint64
	}
	// prepared is what PrepareKeys looked up last (keyprepare.go).
	prepared keyPreparation
	// viewHeads holds the heads a writable transaction read below its own
	// writes (in its view's memory tables, then the file), found or not.
	// Neither layer changes while the transaction lives, and the engine
	// reads a chain's head up to three times before the chain's first
	// append (chain's hashGroupInLanes, the append, and Append's check).
	viewHeads map[string]viewHead
}

// viewHead is a head that logTx.viewHeads holds.
type viewHead struct {
	head  storage.Head
	found bool
}

// pendingChain is what a writable logTx appended to one chain.
type pendingChain struct {
	entries []memtable.Entry
	keys    memtable.KeyTable
}

// logScratch is the memory of the last writable logTx, which the next one
// reuses: its operations, its chain map, the chains' entries and key maps,
// and its state map. A group commit of single appends otherwise allocates a
// map and a chain record per append. The holder of the writer slot owns it.
type logScratch struct {
	operations []commitrec.Operation
	chains     map[string]*pendingChain
	spare      []*pendingChain
	prepared   keyPreparation
	viewHeads  map[string]viewHead
	state      map[string]memtable.StateVersion
}

// Bounds of what logScratch keeps: a huge transaction's memory is left to
// the collector instead of being held by the handle.
const (
	scratchOperationsMax = 1 << 16
	scratchChainsMax     = 1 << 10
	scratchChainKeysMax  = 1 << 12
	scratchStateKeysMax  = 1 << 12
)

// takeScratch gives a writable transaction the memory of the last one.
// The caller holds the writer slot.
func (t *logTx) takeScratch() {
	s := &t.b.logScratch
	t.operations, t.chains, t.prepared, t.viewHeads, t.state = s.operations[:0], s.chains, s.prepared, s.viewHeads, s.state
	s.operations, s.chains, s.prepared, s.viewHeads, s.state = nil, nil, keyPreparation{}, nil, nil
}

// returnScratch hands the transaction's memory back for the next writer,
// cleared of everything it pointed to. The caller still holds the writer
// slot and nothing reads the transaction's writes any more.
func (t *logTx) returnScratch() {
	s := &t.b.logScratch
	if cap(t.operations) <= scratchOperationsMax {
		clear(t.operations)
		s.operations = t.operations[:0]
	}
	for name, p := range t.chains {
		delete(t.chains, name)
		if len(s.spare) >= scratchChainsMax || p.keys.SlotCount() > 2*scratchChainKeysMax || cap(p.entries) > scratchChainKeysMax {
			continue
		}
		clear(p.entries)
		p.entries = p.entries[:0]
		p.keys.Reset()
		s.spare = append(s.spare, p)
	}
	if len(t.chains) == 0 && t.chains != nil {
		s.chains = t.chains
	}
	if len(t.viewHeads) <= scratchChainsMax {
		clear(t.viewHeads) // keep no chain id past the transaction
		s.viewHeads = t.viewHeads
	}
	if len(t.state) <= scratchStateKeysMax {
		clear(t.state) // keep no key nor value past the transaction
		s.state = t.state
	}
	t.operations, t.chains, t.viewHeads, t.state = nil, nil, nil, nil
	t.releasePreparation()
}

// newPendingChain returns an empty pendingChain, a spare one when there is.
func (t *logTx) newPendingChain() *pendingChain {
	s := &t.b.logScratch
	if n := len(s.spare); n > 0 {
		p := s.spare[n-1]
		s.spare[n-1] = nil
		s.spare = s.spare[:n-1]
		return p
	}
	return &pendingChain{}
}

// scanChunkSize is how many items a scan copies out of a memory table at a
// time, under the table's lock.
const scanChunkSize = 256

var _ storage.Tx = (*logTx)(nil)

func (t *logTx) Writable() bool { return t.writable }

func (t *logTx) usable(write bool) error {
	if t.done {
		return storage.ErrTxDone
	}
	if write && !t.writable {
		return storage.ErrReadOnly
	}
	return nil
}

// tables lists the view's memory tables oldest first.
func (t *logTx) tablesOldestFirst() iter.Seq[*memtable.Table] {
	return func(yield func(*memtable.Table) bool) {
		for i := len(t.view.tables) - 1; i >= 0; i-- {
			if !yield(t.view.tables[i]) {
				return
			}
		}
	}
}

func (t *logTx) Head(ctx context.Context, chain string) (storage.Head, error) {
	if err := t.usable(false); err != nil {
		return storage.Head{}, err
	}
	return t.head(ctx, chain)
}

func (t *logTx) head(ctx context.Context, chain string) (storage.Head, error) {
	if p := t.chains[chain]; p != nil {
		return p.entries[len(p.entries)-1].Head, nil
	}
	if !t.writable {
		return t.headBelow(ctx, chain)
	}
	if h, ok := t.viewHeads[chain]; ok {
		if !h.found {
			return storage.Head{}, storage.ErrNotFound
		}
		return h.head, nil
	}
	h, err := t.headBelow(ctx, chain)
	if notFound := errors.Is(err, storage.ErrNotFound); err == nil || notFound {
		if t.viewHeads == nil {
			t.viewHeads = make(map[string]viewHead)
		}
		t.viewHeads[chain] = viewHead{head: h, found: !notFound}
	}
	return h, err
}

// headBelow is the chain's head below the transaction's own writes: in the
// view's memory tables, newest first, then in the file.
func (t *logTx) headBelow(ctx context.Context, chain string) (storage.Head, error) {
	for _, m := range t.view.tables {
		if h, ok := m.Head(chain, t.view.asOf); ok {
			return h, nil
		}
	}
	return t.base.Head(ctx, chain)
}

// baseHeadSeq is the seq of the chain's last entry in the bbolt file of the
// view (0 for none). Memory tables may still hold entries the file has
// already taken (a checkpoint commits the file, then drops the table): the
// scans take from memory only what comes after it.
func (t *logTx) baseHeadSeq(ctx context.Context, chain string) (uint64, error) {
	h, err := t.base.Head(ctx, chain)
	if errors.Is(err, storage.ErrNotFound) {
		return 0, nil
	}
	return h.Seq, err
}

func (t *logTx) writeError(err error) error {
	return fmt.Errorf("write %s: %w: %v", t.b.path, storage.ErrIO, err)
}

func (t *logTx) Append(ctx context.Context, chain string, rec storage.Record, head storage.Head) error {
	if err := t.usable(true); err != nil {
		return err
	}
	switch {
	case len(chain) == 0:
		return t.writeError(bbolterrors.ErrKeyRequired)
	case len(chain) > ChainNameSizeMax, len(rec.IdempotencyKey) > IdempotencyKeySizeMax:
		return t.writeError(bbolterrors.ErrKeyTooLarge)
	case len(rec.Data) > CommitRecordSizeMax:
		return t.writeError(bbolterrors.ErrValueTooLarge)
	}
	if rec.Seq != head.Seq || rec.Seq == 0 {
		return fmt.Errorf("append %q: record seq %d, head seq %d: %w", chain, rec.Seq, head.Seq, storage.ErrDuplicate)
	}
	current, err := t.head(ctx, chain)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		if rec.Seq != 1 {
			return fmt.Errorf("append %q: first seq %d: %w", chain, rec.Seq, storage.ErrDuplicate)
		}
	case err != nil:
		return err
	case rec.Seq != current.Seq+1:
		return fmt.Errorf("append %q: seq %d after head %d: %w", chain, rec.Seq, current.Seq, storage.ErrDuplicate)
	}
	var hash uint64
	if rec.IdempotencyKey != "" {
		if t.lastMiss.chain == chain && t.lastMiss.key == rec.IdempotencyKey {
			hash = t.lastMiss.hash
		} else {
			hash = memtable.KeyHash(rec.IdempotencyKey)
			_, err := t.lookupKeyHash(ctx, chain, rec.IdempotencyKey, hash)
			switch {
			case err == nil:
				return fmt.Errorf("append %q: key %q: %w", chain, rec.IdempotencyKey, storage.ErrDuplicate)
			case !errors.Is(err, storage.ErrNotFound):
				return err
			}
		}
	}
	o := commitrec.Operation{Kind: commitrec.KindAppend, Chain: chain, Seq: rec.Seq, Key: rec.IdempotencyKey, KeyHash: hash, Head: head, Data: rec.Data}
	if err := t.add(o); err != nil {
		return err
	}
	t.lastMiss.chain, t.lastMiss.key = "", ""
	p := t.chains[chain]
	if p == nil {
		if t.chains == nil {
			t.chains = map[string]*pendingChain{}
		}
		p = t.newPendingChain()
		t.chains[chain] = p
	}
	p.entries = append(p.entries, memtable.Entry{Seq: rec.Seq, Key: rec.IdempotencyKey, Data: rec.Data, Head: head})
	if rec.IdempotencyKey != "" {
		p.keys.Put(hash, rec.IdempotencyKey, len(p.entries)-1, p.entries)
	}
	return nil
}

// add records an operation when the commit record stays within
// CommitRecordSizeMax.
func (t *logTx) add(o commitrec.Operation) error {
	size := o.EncodedSize()
	if t.recordSize == 0 {
		t.recordSize = commitrec.HeaderSize
	}
	if t.recordSize+size > CommitRecordSizeMax {
		return fmt.Errorf("%s: %w: the transaction's writes exceed %d bytes", t.b.path, ErrCommitTooLarge, CommitRecordSizeMax)
	}
	t.recordSize += size
	t.operations = append(t.operations, o)
	return nil
}

func (t *logTx) Entry(ctx context.Context, chain string, seq uint64) ([]byte, error) {
	if err := t.usable(false); err != nil {
		return nil, err
	}
	if p := t.chains[chain]; p != nil && seq >= p.entries[0].Seq {
		if i := seq - p.entries[0].Seq; i < uint64(len(p.entries)) {
			return p.entries[i].Data, nil
		}
		return nil, storage.ErrNotFound
	}
	for _, m := range t.view.tables {
		if data, ok := m.Entry(chain, seq, t.view.asOf); ok {
			return data, nil
		}
	}
	return t.base.Entry(ctx, chain, seq)
}

func (t *logTx) LookupKey(ctx context.Context, chain, key string) (uint64, error) {
	if err := t.usable(false); err != nil {
		return 0, err
	}
	if pk := t.takePrepared(chain, key); pk != nil {
		return t.lookupPreparedKey(pk)
	}
	hash := memtable.KeyHash(key)
	seq, err := t.lookupKeyHash(ctx, chain, key, hash)
	if t.writable && errors.Is(err, storage.ErrNotFound) {
		t.lastMiss.chain, t.lastMiss.key, t.lastMiss.hash = chain, key, hash
	}
	return seq, err
}

// lookupKeyHash consults the transaction's keys and the memory tables
// before the file (the file's key filter only knows checkpointed keys),
// for a key whose keyHash the caller has.
func (t *logTx) lookupKeyHash(ctx context.Context, chain, key string, hash uint64) (uint64, error) {
	if p := t.chains[chain]; p != nil {
		if i, ok := p.keys.Find(hash, key, p.entries); ok {
			return p.entries[i].Seq, nil
		}
	}
	for _, m := range t.view.tables {
		if seq, ok := m.LookupKeyHash(chain, key, hash, t.view.asOf); ok {
			return seq, nil
		}
	}
	return t.base.LookupKey(ctx, chain, key)
}

// memoryEntries yields the chain's entries with seq >= from held in memory
// (the view's tables, oldest first, then the transaction's own), copying a
// bounded chunk at a time.
func (t *logTx) memoryEntries(chain string, from uint64, yield func(memtable.Entry) bool) bool {
	var chunk []memtable.Entry
	for m := range t.tablesOldestFirst() {
		for {
			chunk = m.EntriesChunk(chain, from, t.view.asOf, scanChunkSize, chunk[:0])
			if len(chunk) == 0 {
				break
			}
			for _, e := range chunk {
				if e.Seq < from {
					continue
				}
				if !yield(e) {
					return false
				}
				from = e.Seq + 1
			}
		}
	}
	if p := t.chains[chain]; p != nil {
		for _, e := range p.entries {
			if e.Seq < from {
				continue
			}
			if !yield(e) {
				return false
			}
		}
	}
	return true
}

func (t *logTx) Entries(ctx context.Context, chain string, fromSeq uint64) iter.Seq2[storage.Record, error] {
	return func(yield func(storage.Record, error) bool) {
		if err := t.usable(false); err != nil {
			yield(storage.Record{}, err)
			return
		}
		next := max(fromSeq, 1)
		baseHead, err := t.baseHeadSeq(ctx, chain)
		if err != nil {
			yield(storage.Record{}, err)
			return
		}
		if next <= baseHead {
			for rec, err := range t.base.Entries(ctx, chain, next) {
				if err != nil {
					yield(rec, err)
					return
				}
				if !yield(rec, nil) {
					return
				}
			}
		}
		next = max(next, baseHead+1)
		t.memoryEntries(chain, next, func(e memtable.Entry) bool {
			return yield(storage.Record{Seq: e.Seq, Data: e.Data}, nil)
		})
	}
}

func (t *logTx) ScanKeys(ctx context.Context, chain string) iter.Seq2[storage.KeyRef, error] {
	return func(yield func(storage.KeyRef, error) bool) {
		if err := t.usable(false); err != nil {
			yield(storage.KeyRef{}, err)
			return
		}
		baseHead, err := t.baseHeadSeq(ctx, chain)
		if err != nil {
			yield(storage.KeyRef{}, err)
			return
		}
		for ref, err := range t.base.ScanKeys(ctx, chain) {
			if !yield(ref, err) || err != nil {
				return
			}
		}
		t.memoryEntries(chain, baseHead+1, func(e memtable.Entry) bool {
			if e.Key == "" {
				return true
			}
			return yield(storage.KeyRef{Digest: storage.KeyDigest(e.Key), Seq: e.Seq}, nil)
		})
	}
}

func (t *logTx) Chains(ctx context.Context, from string) iter.Seq2[storage.ChainHead, error] {
	return func(yield func(storage.ChainHead, error) bool) {
		if err := t.usable(false); err != nil {
			yield(storage.ChainHead{}, err)
			return
		}
		memory := map[string]storage.Head{}
		for _, m := range t.view.tables {
			m.ChainHeads(from, t.view.asOf, memory)
		}
		for name, p := range t.chains {
			if name >= from {
				memory[name] = p.entries[len(p.entries)-1].Head
			}
		}
		names := make([]string, 0, len(memory))
		for name := range memory {
			names = append(names, name)
		}
		slices.Sort(names)
		next, stop := iter.Pull2(t.base.Chains(ctx, from))
		defer stop()
		base, err, more := next()
		for more || len(names) > 0 {
			if more && err != nil {
				yield(storage.ChainHead{}, err)
				return
			}
			var item storage.ChainHead
			switch {
			case !more || (len(names) > 0 && names[0] < base.Chain):
				item, names = storage.ChainHead{Chain: names[0], Head: memory[names[0]]}, names[1:]
			case len(names) > 0 && names[0] == base.Chain:
				item, names = storage.ChainHead{Chain: names[0], Head: memory[names[0]]}, names[1:]
				base, err, more = next()
			default:
				item = base
				base, err, more = next()
			}
			if !yield(item, nil) {
				return
			}
		}
	}
}

func (t *logTx) StateGet(ctx context.Context, key []byte) ([]byte, error) {
	if err := t.usable(false); err != nil {
		return nil, err
	}
	if v, ok := t.state[string(key)]; ok {
		if v.Deleted {
			return nil, storage.ErrNotFound
		}
		return v.Value, nil
	}
	for _, m := range t.view.tables {
		if v, ok := m.StateGet(key, t.view.asOf); ok {
			if v.Deleted {
				return nil, storage.ErrNotFound
			}
			return v.Value, nil
		}
	}
	return t.base.StateGet(ctx, key)
}

func (t *logTx) checkStateKey(key []byte) error {
	switch {
	case len(key) == 0:
		return t.writeError(bbolterrors.ErrKeyRequired)
	case len(key) > StateKeySizeMax:
		return t.writeError(bbolterrors.ErrKeyTooLarge)
	}
	return nil
}

func (t *logTx) StatePut(ctx context.Context, key, value []byte) error {
	if err := t.usable(true); err != nil {
		return err
	}
	if err := t.checkStateKey(key); err != nil {
		return err
	}
	if int64(len(value)) > bbolt.MaxValueSize {
		return t.writeError(bbolterrors.ErrValueTooLarge)
	}
	// The caller may reuse its slices: the key and the value are copied,
	// into one allocation.
	kv := make([]byte, len(key)+len(value))
	copy(kv, key)
	copy(kv[len(key):], value)
	key, value = kv[:len(key):len(key)], kv[len(key):]
	if err := t.add(commitrec.Operation{Kind: commitrec.KindStatePut, State: key, Data: value}); err != nil {
		return err
	}
	t.setState(key, memtable.StateVersion{Value: value})
	return nil
}

func (t *logTx) StateDelete(ctx context.Context, key []byte) error {
	if err := t.usable(true); err != nil {
		return err
	}
	if err := t.checkStateKey(key); err != nil {
		return err
	}
	key = bytes.Clone(key)
	if err := t.add(commitrec.Operation{Kind: commitrec.KindStateDelete, State: key}); err != nil {
		return err
	}
	t.setState(key, memtable.StateVersion{Deleted: true})
	return nil
}

// setState records the transaction's newest version of key, a copy the
// transaction owns and never writes again (the map's key reads it in
// place).
func (t *logTx) setState(key []byte, v memtable.StateVersion) {
	if t.state == nil {
		t.state = map[string]memtable.StateVersion{}
	}
	t.state[unsafe.String(unsafe.SliceData(key), len(key))] = v
}

func (t *logTx) StateScan(ctx context.Context, start, end []byte, reverse bool) iter.Seq2[storage.KeyValue, error] {
	return func(yield func(storage.KeyValue, error) bool) {
		if err := t.usable(false); err != nil {
			yield(storage.KeyValue{}, err)
			return
		}
		inRange := func(k []byte) bool {
			return bytes.Compare(k, start) >= 0 && (end == nil || bytes.Compare(k, end) < 0)
		}
		// Layers newest first: a key's newest layer decides it.
		var layers []*stateLayer
		if len(t.state) > 0 {
			var own []memtable.StateItem
			for k, v := range t.state {
				if inRange([]byte(k)) {
					own = append(own, memtable.StateItem{Key: []byte(k), Value: v.Value, Deleted: v.Deleted})
				}
			}
			slices.SortFunc(own, func(a, b memtable.StateItem) int { return bytes.Compare(a.Key, b.Key) })
			if reverse {
				slices.Reverse(own)
			}
			layers = append(layers, &stateLayer{items: own, exhausted: true})
		}
		for _, m := range t.view.tables {
			layers = append(layers, &stateLayer{fetch: func(from, to []byte) []memtable.StateItem {
				return m.StateChunk(from, to, reverse, t.view.asOf, scanChunkSize, nil)
			}, start: start, end: end, reverse: reverse})
		}
		if len(layers) == 0 {
			for kv, err := range t.base.StateScan(ctx, start, end, reverse) {
				if !yield(kv, err) || err != nil {
					return
				}
			}
			return
		}
		next, stop := iter.Pull2(t.base.StateScan(ctx, start, end, reverse))
		defer stop()
		layers = append(layers, &stateLayer{pull: next})
		mergeState(layers, reverse, yield)
	}
}

// stateLayer is one layer of a merged state scan.
type stateLayer struct {
	items     []memtable.StateItem
	exhausted bool
	// fetch copies the next chunk of a memory table in [from, to).
	fetch      func(from, to []byte) []memtable.StateItem
	start, end []byte
	reverse    bool
	pull       func() (storage.KeyValue, error, bool)
	err        error
}

// peek returns the layer's next item, fetching a chunk when it has none.
func (l *stateLayer) peek() (memtable.StateItem, bool) {
	if len(l.items) > 0 {
		return l.items[0], true
	}
	if l.exhausted || l.err != nil {
		return memtable.StateItem{}, false
	}
	switch {
	case l.pull != nil:
		kv, err, ok := l.pull()
		if !ok {
			l.exhausted = true
			return memtable.StateItem{}, false
		}
		if err != nil {
			l.err = err
			return memtable.StateItem{}, false
		}
		l.items = append(l.items[:0], memtable.StateItem{Key: kv.Key, Value: kv.Value})
	case l.fetch != nil:
		l.items = l.fetch(l.start, l.end)
		if len(l.items) < scanChunkSize {
			l.exhausted = true
		}
		if len(l.items) > 0 {
			last := l.items[len(l.items)-1].Key
			if l.reverse {
				l.end = last // the next chunk ends before it
			} else {
				l.start = append(bytes.Clone(last), 0) // and starts after it
			}
		}
		if len(l.items) == 0 {
			return memtable.StateItem{}, false
		}
	default:
		l.exhausted = true
		return memtable.StateItem{}, false
	}
	return l.items[0], true
}

func (l *stateLayer) advance() { l.items = l.items[1:] }

// mergeState yields the merged scan of layers (newest first): for each key
// the newest layer's version, and nothing for a deleted key.
func mergeState(layers []*stateLayer, reverse bool, yield func(storage.KeyValue, error) bool) {
	for {
		best := -1
		var bestItem memtable.StateItem
		for i, l := range layers {
			item, ok := l.peek()
			if l.err != nil {
				yield(storage.KeyValue{}, l.err)
				return
			}
			if !ok {
				continue
			}
			c := 0
			if best >= 0 {
				c = bytes.Compare(item.Key, bestItem.Key)
				if reverse {
					c = -c
				}
			}
			if best < 0 || c < 0 {
				best, bestItem = i, item
			}
		}
		if best < 0 {
			return
		}
		for _, l := range layers {
			if item, ok := l.peek(); ok && bytes.Equal(item.Key, bestItem.Key) {
				l.advance()
			}
		}
		if bestItem.Deleted {
			continue
		}
		if !yield(storage.KeyValue{Key: bestItem.Key, Value: bestItem.Value}, nil) {
			return
		}
	}
}

// end releases the bbolt read transaction and, for a writable transaction,
// the writer slot.
func (t *logTx) end() {
	t.done = true
	if t.forked {
		t.base.t.done = true
		go t.base.t.tx.Rollback()
		return
	}
	t.endBase()
	if t.writable {
		t.returnScratch()
		t.b.releaseWriter()
	}
}

// endBase ends the file transaction of the view: it goes back to the pool
// for the next transaction when it is sound and reads the file's last
// commit (internal/readpool), and is rolled back otherwise.
func (t *logTx) endBase() {
	if t.base.broken != nil || t.base.t.done || !t.b.readers.Give(t.base.t) {
		t.base.Rollback()
	}
}

func (t *logTx) Commit() error {
	wait, err := t.CommitAsync()
	if err != nil {
		return err
	}
	return wait()
}

var _ storage.AsyncCommitter = (*logTx)(nil)

// CommitAsync queues the transaction's record in the log (the group sync
// of wait writes it with the records queued beside it, then fdatasyncs
// them), applies it to the memory table for the next writer
// and releases the writer slot; readers see it once wait has made it
// durable (see storage.AsyncCommitter). A transaction that wrote nothing
// waits, in wait, for the commits its view saw.
func (t *logTx) CommitAsync() (wait func() error, err error) {
	if t.done {
		return nil, storage.ErrTxDone
	}
	if !t.writable || len(t.operations) == 0 {
		seen := t.view.asOf
		t.end()
		if t.b.log == nil || t.b.durableLSN.Load() >= seen {
			return func() error { return nil }, nil
		}
		return func() error { return t.b.syncThrough(seen) }, nil
	}
	// The view's bbolt read transaction ends before the commit: the writer
	// must not hold one while it may wait for a checkpoint.
	t.done = true
	t.endBase()
	defer t.b.releaseWriter()
	if v := t.view.tables; len(v) > 1 && v[0] == t.b.active {
		v[0].PresizeLike(v[1]) // the first commit after a freeze
	}
	lsn, err := t.b.commitNoSync(t.operations, t.recordSize)
	t.returnScratch()
	if err != nil {
		return nil, err
	}
	b := t.b
	return func() error { return b.syncThrough(lsn) }, nil
}

func (t *logTx) Rollback() error {
	if t.done {
		return nil
	}
	t.end()
	return nil
}

var _ storage.Forker = (*logTx)(nil)

// Fork begins a read transaction on the receiver's snapshot: the same
// memory view and a bbolt read transaction holding no commit past it. The
// fork's file may hold a checkpoint the receiver's did not, of a table the
// view still holds: the same data either way, since a view reads each item
// once. When a checkpoint past the view has committed since, the snapshot
// cannot be had and the error wraps storage.ErrRetry.
func (t *logTx) Fork(ctx context.Context) (storage.Tx, error) {
	if err := t.usable(false); err != nil {
		return nil, err
	}
	if t.writable {
		return nil, fmt.Errorf("fork %s: a write transaction's own writes: %w", t.b.path, errors.ErrUnsupported)
	}
	if t.base.broken != nil {
		return nil, t.base.broken
	}
	btx, err := beginForkWithin(ctx, t.b.db, forkBeginWaitMax)
	if err != nil {
		return nil, fmt.Errorf("fork %s: %w", t.b.path, err)
	}
	if btx.ID() != t.base.t.tx.ID() {
		checkpoint, err := t.b.guardedCheckpointLSN(btx)
		if err == nil && checkpoint > t.view.asOf {
			err = fmt.Errorf("fork %s: a checkpoint through LSN %d committed since the receiver's LSN %d: %w",
				t.b.path, checkpoint, t.view.asOf, storage.ErrRetry)
		}
		if err != nil {
			go btx.Rollback()
			return nil, err
		}
	}
	base := &guardedTx{t: &tx{tx: btx, path: t.b.path, cache: t.b.cache}}
	return &logTx{b: t.b, view: t.view, base: base, forked: true}, nil
}
