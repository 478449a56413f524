package chain

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ledgerworks/ledger/merkle"
	"github.com/ledgerworks/ledger/storage"
)

// Every chain has a Merkle tree (RFC 9162, see package merkle) over its
// entries' hashes in seq order: leaf i is SHA-256(0x00 || hash of entry
// i+1). The committer extends it with every append and keeps it in the
// state keyspace, in the transaction of the entries:
//
//	0x00 tree/v1/r/<chain>                             the compact range (merkle.Range encoding)
//	0x00 tree/v1/n/<chain> 0x00 <level> <index u64be>  a node at level >= TreeStoredLevel
//
// State keys that begin with 0x00 are the engine's: Tx.StatePut and
// Tx.StateDelete refuse them and Tx.StateScan skips them, so that a
// domain's rebuild, which wipes and rewrites its state, never touches a
// tree.
//
// The stored nodes make a proof read O(log n) values plus the entries of
// one or two tiles of 2^TreeStoredLevel leaves; the nodes below are
// hashed again from those entries.
const (
	treeRangePrefix = "\x00tree/v1/r/"
	treeNodePrefix  = "\x00tree/v1/n/"
)

// stateReservedEnd is the first state key after the engine's own.
var stateReservedEnd = []byte{0x01}

// checkStateKey refuses a caller's write of one of the engine's state keys.
func checkStateKey(key []byte) error {
	if len(key) > 0 && key[0] == 0x00 {
		return fmt.Errorf("%w: state keys that begin with 0x00 are the engine's", ErrInvalid)
	}
	return nil
}

// TreeStoredLevel is the lowest level of the tree nodes the ledger stores:
// one node per 256 entries, and the levels above (about 2 nodes per 256
// entries in all).
const TreeStoredLevel = 8

// treeTile is the number of leaves under one node of TreeStoredLevel.
const treeTile = 1 << TreeStoredLevel

// LeafHash returns the Merkle tree leaf hash of an entry hash:
// SHA-256(0x00 || hash).
func LeafHash(h Hash) merkle.Hash { return merkle.HashLeaf(h[:]) }

func treeRangeKey(chain string) []byte {
	return append([]byte(treeRangePrefix), chain...)
}

func treeNodeKey(chain string, level uint, index uint64) []byte {
	key := make([]byte, 0, len(treeNodePrefix)+len(chain)+10)
	key = append(append(append(key, treeNodePrefix...), chain...), 0, byte(level))
	return binary.BigEndian.AppendUint64(key, index)
}

// TreeHead is a chain's tree at one size: its root.
type TreeHead struct {
	Chain string
	Size  uint64
	Root  merkle.Hash
}

// treeNode is a node made by an append, to be stored at the commit.
type treeNode struct {
	level uint
	index uint64
	hash  merkle.Hash
}

// chainTree is one chain's tree as the committer holds it: during a
// transaction, and between transactions in its treeBatch's cache.
type chainTree struct {
	chain  string
	r      merkle.Range
	stored uint64     // the size of the range in the store
	first  uint64     // the size of the range when the transaction began with it
	nodes  []treeNode // made in this transaction, at TreeStoredLevel and above
	// epoch is the treeBatch's transaction that last extended the tree.
	epoch uint64
	// size is the chain's size: r's and the deferred leaves'.
	size uint64
	// deferred holds the hashes of the entries after r's size, not yet in
	// r (fewer than treeRangeLagMax): see treeBatch.
	deferred []Hash
	// listed is set while the tree is in its treeBatch's idle list.
	listed bool
	// storeRange makes flush store the range whatever its lag.
	storeRange bool
}

// settle extends r with the deferred leaves.
func (t *chainTree) settle() {
	for i := range t.deferred {
		t.r.Append(merkle.HashLeaf(t.deferred[i][:]), t.keep)
	}
	t.deferred = t.deferred[:0]
}

// keep is the merkle.Visit of t's appends: it keeps the nodes to store.
func (t *chainTree) keep(level uint, index uint64, h merkle.Hash) {
	if level >= TreeStoredLevel {
		t.nodes = append(t.nodes, treeNode{level: level, index: index, hash: h})
	}
}

// treeRangeLagMax bounds how far a chain's stored compact range may lag
// behind its entries: the committer stores the range of a chain that a
// transaction extended by one entry only when the lag would reach it (and
// at Close), so that an append at a time to many chains (group commit)
// does not pay a state write per append; a transaction that appended
// more to a chain stores its range. A reader extends a lagging range from the last entries, at most
// treeRangeLagMax-1 of them. The nodes at TreeStoredLevel and above are
// stored in the transaction that completes them, always.
const treeRangeLagMax = 16

// treeBatch is the trees a storage transaction extends. The committer
// keeps one, begun (reset) before each transaction, and stores what
// changed before the commit: one range and the new nodes per chain.
//
// It keeps the trees of the chains it extended between transactions
// (cache), in place: an append to a chain whose tree it holds at the
// right size reads no state and copies no range, and costs one map lookup
// besides its hashes; the committer is its only user. A tree of the wrong
// size (an append by another process, on a shared store) is read from the
// store again. A transaction that did not commit takes its chains' trees
// out of the cache: they hold appends that never happened.
//
// A transaction that stores neither a chain's range nor a node of its
// tree (an append at a time to many chains: group commit) need not hash
// the chain's leaves before its commit. They are deferred, and hashed
// while the committer waits for requests (hashIdle), or when a
// transaction stores them; what is stored, and when, is the same.
type treeBatch struct {
	epoch uint64 // the current transaction's, never 0
	order []*chainTree
	cache map[string]*chainTree
	// extra holds the transaction's trees that the full cache cannot
	// (rarely set: a transaction over more than treeCacheChainsMax chains).
	extra map[string]*chainTree
	// uncommitted is set from the transaction's first append until committed.
	uncommitted bool
	// idle lists the trees with deferred leaves (and some dropped since).
	idle []*chainTree
	// dropped names the chains whose trees a transaction that did not
	// commit took out of the cache, until they are loaded again: Close
	// stores their ranges from the store's and the last entries.
	dropped map[string]struct{}
}

// treeCacheChainsMax bounds the chains whose trees a treeBatch keeps
// between transactions (a range is at most 64 hashes).
const treeCacheChainsMax = 1 << 16

func newTreeBatch() *treeBatch {
	return &treeBatch{epoch: 1, cache: map[string]*chainTree{}}
}

// committed records that the transaction just flushed was committed: its
// trees in the cache are the chains' again.
func (b *treeBatch) committed() { b.uncommitted = false }

// hashIdle hashes the deferred leaves, a chain at a time, until busy
// reports work for the committer. It stores nothing: the leaves complete
// no stored node (flush hashes those that do).
func (b *treeBatch) hashIdle(busy func() bool) {
	if b.uncommitted {
		b.reset() // the last transaction's leaves never happened
	}
	for len(b.idle) > 0 && !busy() {
		n := len(b.idle) - 1
		t := b.idle[n]
		b.idle[n], b.idle = nil, b.idle[:n]
		t.listed = false
		nodes := len(t.nodes) // those of the last transaction, stored
		t.settle()
		if len(t.nodes) != nodes {
			panic(fmt.Sprintf("chain: deferred leaves of %q completed a stored node", t.chain))
		}
	}
}

// flushCache stores the cached ranges that lag behind their chains; the
// committer calls it at Close, after its last transaction (whose trees
// reset drops if it did not commit).
func (b *treeBatch) flushCache(ctx context.Context, stx storage.Tx) error {
	b.reset()
	for chain, t := range b.cache {
		if t.stored == t.size {
			continue
		}
		t.settle()
		if err := stx.StatePut(ctx, treeRangeKey(chain), t.r.AppendBinary(nil)); err != nil {
			return err
		}
	}
	for chain := range b.dropped {
		head, err := stx.Head(ctx, chain)
		if errors.Is(err, storage.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		t := &chainTree{chain: chain}
		if err := readRange(ctx, stx, chain, &t.r); err != nil {
			return err
		}
		if t.r.Size >= head.Seq {
			continue
		}
		// The nodes these entries complete were stored with them.
		if err := b.extend(ctx, stx, t, head.Seq); err != nil {
			return err
		}
		if err := stx.StatePut(ctx, treeRangeKey(chain), t.r.AppendBinary(nil)); err != nil {
			return err
		}
	}
	return nil
}

// reset begins the next transaction, dropping the trees of the last one
// when it did not commit.
func (b *treeBatch) reset() {
	for _, t := range b.order {
		t.nodes = t.nodes[:0]
		if b.uncommitted && b.cache[t.chain] == t {
			delete(b.cache, t.chain)
			t.deferred = t.deferred[:0] // an idle list may still hold t
			if b.dropped == nil {
				b.dropped = map[string]struct{}{}
			}
			b.dropped[t.chain] = struct{}{}
		}
	}
	clear(b.order)
	b.order = b.order[:0]
	clear(b.extra)
	b.uncommitted = false
	b.epoch++
}

// add extends the chain's tree with the entry at seq, just appended in stx.
func (b *treeBatch) add(ctx context.Context, stx storage.Tx, chain string, seq uint64, hash *Hash) error {
	t, cached := b.cache[chain]
	if !cached && len(b.extra) > 0 {
		t = b.extra[chain]
	}
	if t == nil || t.epoch != b.epoch {
		var err error
		if t, err = b.load(ctx, stx, t, cached, chain, seq-1); err != nil {
			return err
		}
	}
	if t.size != seq-1 {
		panic(fmt.Sprintf("chain: tree of %q at size %d extended by seq %d", chain, t.size, seq))
	}
	t.size++
	t.deferred = append(t.deferred, *hash)
	if len(t.deferred) == treeRangeLagMax {
		t.settle() // the range will be stored: its lag reached the bound
	}
	return nil
}

// load makes the chain's tree at size part of the transaction: the
// cached tree t (cached set) when it has that size, or extended to size
// from the chain's entries when it is behind (another process appended to
// the chain since: the entries are those its head lock caught up, on
// PostgreSQL, and no state is read); else the stored one, extended to size
// from the chain's entries when it is behind (a file written before trees,
// or by a DB with NoTrees).
func (b *treeBatch) load(ctx context.Context, stx storage.Tx, t *chainTree, cached bool, chain string, size uint64) (*chainTree, error) {
	switch {
	case cached && t.size < size:
		// The cached tree is the one this process committed at t.size,
		// and entries never change. What is stored is not known any more
		// (the other process may have stored its range), so t.stored
		// stays where it was: it can only be behind, which stores the
		// range sooner, never later.
		t.settle()
		if err := b.extend(ctx, stx, t, size); err != nil {
			return nil, err
		}
	case t == nil || t.size != size:
		if t == nil {
			t = &chainTree{chain: chain}
		}
		t.deferred = t.deferred[:0]
		if err := readRange(ctx, stx, chain, &t.r); err != nil {
			return nil, err
		}
		t.stored = t.r.Size
		if t.r.Size > size {
			return nil, fmt.Errorf("%w: tree of chain %q has %d leaves, the chain %d entries", ErrCorrupt, chain, t.r.Size, size)
		}
		if t.r.Size < size {
			if err := b.extend(ctx, stx, t, size); err != nil {
				return nil, err
			}
		}
	}
	t.first, t.epoch, t.size = size, b.epoch, size
	if !cached && len(b.dropped) > 0 {
		delete(b.dropped, chain)
	}
	switch {
	case cached:
	case len(b.cache) < treeCacheChainsMax:
		b.cache[chain] = t
	default:
		if b.extra == nil {
			b.extra = map[string]*chainTree{}
		}
		b.extra[chain] = t // this transaction's only; read from the store next time
	}
	b.uncommitted = true
	b.order = append(b.order, t)
	return t, nil
}

// extend appends the chain's entries after t's size up to size to t.
func (b *treeBatch) extend(ctx context.Context, stx storage.Tx, t *chainTree, size uint64) error {
	for rec, err := range stx.Entries(ctx, t.chain, t.r.Size+1) {
		if err != nil {
			return err
		}
		if rec.Seq > size {
			break
		}
		if rec.Seq != t.r.Size+1 || len(rec.Data) < recordFieldsOffset {
			return fmt.Errorf("%w: chain %q seq %d: entry not fit for its tree", ErrCorrupt, t.chain, rec.Seq)
		}
		t.r.Append(merkle.HashLeaf(rec.Data[recordHashOffset:recordFieldsOffset]), t.keep)
		if rec.Seq == size {
			break // the next page, past size, is not the tree's
		}
	}
	if t.r.Size != size {
		return fmt.Errorf("%w: chain %q holds %d entries below its head seq %d", ErrCorrupt, t.chain, t.r.Size, size)
	}
	t.size = size
	return nil
}

// readRange reads the chain's stored compact range into r; an absent one
// is the empty tree.
func readRange(ctx context.Context, stx storage.Tx, chain string, r *merkle.Range) error {
	v, err := stx.StateGet(ctx, treeRangeKey(chain))
	if errors.Is(err, storage.ErrNotFound) {
		r.Size, r.Hashes = 0, r.Hashes[:0]
		return nil
	}
	if err != nil {
		return err
	}
	decoded, err := merkle.DecodeRange(v)
	if err != nil {
		return fmt.Errorf("%w: tree of chain %q: %w", ErrCorrupt, chain, err)
	}
	r.Size, r.Hashes = decoded.Size, append(r.Hashes[:0], decoded.Hashes...)
	return nil
}

// storesRange reports whether flush stores t's range: when the
// transaction appended more than one entry to the chain, or the stored
// range would lag by treeRangeLagMax (one state write per single append is
// what group commit cannot afford; one amortized over several appends of
// the chain is cheap, and keeps the readers of many short chains, a
// checkpoint, from reading entries).
func (t *chainTree) storesRange() bool {
	return t.storeRange || t.size-t.stored >= treeRangeLagMax || t.size-t.first >= 2
}

// completesNode reports whether t's deferred leaves complete a node at
// TreeStoredLevel or above: their last tile of 2^TreeStoredLevel leaves.
func (t *chainTree) completesNode() bool {
	return t.size>>TreeStoredLevel != t.r.Size>>TreeStoredLevel
}

// flush stores what the transaction changed in the trees. A store may
// keep the keys and values it is given until the commit, so they are cut
// from one buffer of their own, one allocation per transaction.
func (b *treeBatch) flush(ctx context.Context, stx storage.Tx) error {
	size := 0
	for _, t := range b.order {
		switch {
		case len(t.deferred) == 0:
		case t.storesRange() || t.completesNode():
			t.settle()
		case !t.listed:
			t.listed = true
			b.idle = append(b.idle, t)
		}
		size += len(t.nodes) * (len(treeNodePrefix) + len(t.chain) + 10 + merkle.HashSize)
		if t.storesRange() {
			size += len(treeRangePrefix) + len(t.chain) + 8 + len(t.r.Hashes)*merkle.HashSize
		}
	}
	if size == 0 {
		return nil
	}
	buf := make([]byte, 0, size)
	cut := func(from int) []byte { return buf[from:len(buf):len(buf)] }
	for _, t := range b.order {
		for i := range t.nodes {
			n := &t.nodes[i]
			at := len(buf)
			buf = append(append(append(buf, treeNodePrefix...), t.chain...), 0, byte(n.level))
			buf = binary.BigEndian.AppendUint64(buf, n.index)
			key := cut(at)
			at = len(buf)
			buf = append(buf, n.hash[:]...)
			if err := stx.StatePut(ctx, key, cut(at)); err != nil {
				return err
			}
		}
		if !t.storesRange() {
			continue
		}
		at := len(buf)
		buf = append(append(buf, treeRangePrefix...), t.chain...)
		key := cut(at)
		at = len(buf)
		buf = t.r.AppendBinary(buf)
		if err := stx.StatePut(ctx, key, cut(at)); err != nil {
			return err
		}
		t.stored = t.r.Size
	}
	return nil
}

// catchUpTrees brings every chain's tree up to its head, a bounded number
// of entries per transaction: a file written before trees existed, or
// while NoTrees was set, is up to date once it is open for writing.
func (db *DB) catchUpTrees(ctx context.Context) error {
	var behind []string
	err := db.View(ctx, func(tx *Tx) error {
		var r merkle.Range
		for h, err := range tx.Chains("") {
			if err != nil {
				return err
			}
			if err := readRange(ctx, tx.stx, h.Chain, &r); err != nil {
				return err
			}
			if r.Size < h.Seq {
				behind = append(behind, h.Chain)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, chain := range behind {
		for done := false; !done; {
			err := db.Update(ctx, func(tx *Tx) error {
				return tx.catchUpTree(chain, treeCatchUpEntriesMax, &done)
			})
			if err != nil {
				return err
			}
		}
		db.log.Info("chain tree brought up to date", "chain", chain)
	}
	return nil
}

// treeCatchUpEntriesMax bounds the entries one transaction of
// catchUpTrees adds to a tree.
const treeCatchUpEntriesMax = 1 << 16

// catchUpTree extends the chain's tree by at most entriesMax entries
// towards its head; done is set when it reached the head.
func (tx *Tx) catchUpTree(chain string, entriesMax uint64, done *bool) error {
	head, err := tx.head(chain)
	if err != nil {
		return err
	}
	b := newTreeBatch()
	t := &chainTree{chain: chain}
	if err := readRange(tx.ctx, tx.stx, chain, &t.r); err != nil {
		return err
	}
	target := min(head.Seq, t.r.Size+entriesMax)
	if t.r.Size >= target {
		*done = true
		return nil
	}
	if err := b.extend(tx.ctx, tx.stx, t, target); err != nil {
		return tx.failed(err)
	}
	b.order = append(b.order, t)
	tx.dirty = true
	*done = target == head.Seq
	t.storeRange = true // the range is what catching up is for
	if err := b.flush(tx.ctx, tx.stx); err != nil {
		return tx.failed(err)
	}
	return nil
}

// currentRange returns the chain's compact range at its head, headSeq:
// the stored one, extended from the last entries when it lags (by less
// than treeRangeLagMax); ErrTreeBehind when it lags by more.
func currentRange(ctx context.Context, stx storage.Tx, chain string, headSeq uint64) (merkle.Range, error) {
	var r merkle.Range
	if err := readRange(ctx, stx, chain, &r); err != nil {
		return r, err
	}
	switch {
	case r.Size == headSeq:
		return r, nil
	case r.Size > headSeq:
		return r, fmt.Errorf("%w: tree of chain %q has %d leaves, the chain %d entries", ErrCorrupt, chain, r.Size, headSeq)
	case headSeq-r.Size >= treeRangeLagMax:
		return r, fmt.Errorf("%w: chain %q: tree of %d entries, chain of %d", ErrTreeBehind, chain, r.Size, headSeq)
	}
	t := chainTree{chain: chain, r: r}
	var b treeBatch
	err := b.extend(ctx, stx, &t, headSeq)
	return t.r, err
}
