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

// chainTree is one chain's tree during a transaction.
type chainTree struct {
	chain  string
	r      merkle.Range
	stored uint64     // the size of the range in the store
	first  uint64     // the size of the range when the transaction began with it
	nodes  []treeNode // made in this transaction, at TreeStoredLevel and above
}

// keep is the merkle.Visit of t's appends: it keeps the nodes to store.
func (t *chainTree) keep(level uint, index uint64, h *merkle.Hash) {
	if level >= TreeStoredLevel {
		t.nodes = append(t.nodes, treeNode{level: level, index: index, hash: *h})
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

// cachedRange is a committed range and the size of its stored copy.
type cachedRange struct {
	r      merkle.Range
	stored uint64
}

// treeBatch is the trees a storage transaction extends. The committer
// keeps one, emptied before each transaction it begins, and stores what
// changed before the commit: one range and the new nodes per chain.
//
// It also keeps the committed ranges of the chains it extended (cache),
// so that an append to a chain whose range it holds at the right size reads
// no state: the committer is its only user. A range of the wrong size (an
// append by another process, on a shared store) is read from the store.
type treeBatch struct {
	chains map[string]*chainTree
	order  []*chainTree
	free   []*chainTree
	cache  map[string]*cachedRange
}

// treeCacheChainsMax bounds the chains whose ranges a treeBatch keeps
// between transactions (a range is at most 64 hashes).
const treeCacheChainsMax = 1 << 16

func newTreeBatch() *treeBatch {
	return &treeBatch{chains: map[string]*chainTree{}, cache: map[string]*cachedRange{}}
}

// committed records the ranges of the transaction just committed in the
// cache.
func (b *treeBatch) committed() {
	for _, t := range b.order {
		c := b.cache[t.chain]
		if c == nil {
			if len(b.cache) >= treeCacheChainsMax {
				continue // read from the store next time, and extended from its entries
			}
			c = &cachedRange{}
			b.cache[t.chain] = c
		}
		c.r.Size, c.r.Hashes, c.stored = t.r.Size, append(c.r.Hashes[:0], t.r.Hashes...), t.stored
	}
}

// flushCache stores the cached ranges that lag behind their chains; the
// committer calls it at Close.
func (b *treeBatch) flushCache(ctx context.Context, stx storage.Tx) error {
	for chain, c := range b.cache {
		if c.stored == c.r.Size {
			continue
		}
		if err := stx.StatePut(ctx, treeRangeKey(chain), c.r.AppendBinary(nil)); err != nil {
			return err
		}
	}
	return nil
}

// reset empties b for the next transaction, keeping its memory.
func (b *treeBatch) reset() {
	for _, t := range b.order {
		t.chain, t.nodes = "", t.nodes[:0]
		t.r.Hashes = t.r.Hashes[:0]
		t.r.Size = 0
		b.free = append(b.free, t)
	}
	clear(b.chains)
	b.order = b.order[:0]
}

// add extends the chain's tree with the entry at seq, just appended in stx.
func (b *treeBatch) add(ctx context.Context, stx storage.Tx, chain string, seq uint64, hash *Hash) error {
	t := b.chains[chain]
	if t == nil {
		var err error
		if t, err = b.load(ctx, stx, chain, seq-1); err != nil {
			return err
		}
	}
	if t.r.Size != seq-1 {
		panic(fmt.Sprintf("chain: tree of %q at size %d extended by seq %d", chain, t.r.Size, seq))
	}
	t.r.Append(merkle.HashLeaf(hash[:]), t.keep)
	return nil
}

// load reads the chain's stored tree into b and extends it to size from
// the chain's entries, when it is behind (a file written before trees, or
// by a DB with NoTrees).
func (b *treeBatch) load(ctx context.Context, stx storage.Tx, chain string, size uint64) (*chainTree, error) {
	var t *chainTree
	if n := len(b.free); n > 0 {
		t, b.free = b.free[n-1], b.free[:n-1]
	} else {
		t = &chainTree{}
	}
	t.chain = chain
	if c := b.cache[chain]; c != nil && c.r.Size == size {
		t.r.Size, t.r.Hashes, t.stored = c.r.Size, append(t.r.Hashes[:0], c.r.Hashes...), c.stored
	} else if err := readRange(ctx, stx, chain, &t.r); err != nil {
		return nil, err
	} else {
		t.stored = t.r.Size
	}
	if t.r.Size > size {
		return nil, fmt.Errorf("%w: tree of chain %q has %d leaves, the chain %d entries", ErrCorrupt, chain, t.r.Size, size)
	}
	t.first = size
	if t.r.Size < size {
		if err := b.extend(ctx, stx, t, size); err != nil {
			return nil, err
		}
	}
	b.chains[chain] = t
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
	}
	if t.r.Size != size {
		return fmt.Errorf("%w: chain %q holds %d entries below its head seq %d", ErrCorrupt, t.chain, t.r.Size, size)
	}
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

// flush stores what the transaction changed in the trees. A store may
// keep the values it is given until the commit, so each is its own.
func (b *treeBatch) flush(ctx context.Context, stx storage.Tx) error {
	for _, t := range b.order {
		for i := range t.nodes {
			n := &t.nodes[i]
			if err := stx.StatePut(ctx, treeNodeKey(t.chain, n.level, n.index), append([]byte(nil), n.hash[:]...)); err != nil {
				return err
			}
		}
		// One state write per single append is what group commit cannot
		// afford; one amortized over several appends of the chain is cheap,
		// and keeps the readers of many short chains (a checkpoint) from
		// reading entries.
		if t.r.Size-t.stored < treeRangeLagMax && t.r.Size-t.first < 2 {
			continue
		}
		if err := stx.StatePut(ctx, treeRangeKey(t.chain), t.r.AppendBinary(make([]byte, 0, 8+len(t.r.Hashes)*merkle.HashSize))); err != nil {
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
	t.stored = 0 // always stored: the range is what catching up is for
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
