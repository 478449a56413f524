package chain

import (
	"runtime"
	"sync/atomic"

	"github.com/ledgerworks/ledger/merkle"
)

// A group of single Appends (group commit, P2's shape) costs the
// committer a few microseconds an append, of which its trees' upkeep, the
// leaf's and on average one node's SHA-256 (three blocks), is about a
// tenth; the second core meanwhile mostly waits for the group. So for a
// group of at least treeHelperAppendsMin Appends a helper goroutine
// extends the trees: the committer hands it each appended entry's tree and
// hash through one slot and an atomic store, and the helper hashes them in
// order while the committer runs the next requests. Before the commit the
// committer stops the helper and hashes what it left, so that a helper
// whose core was taken delays the group by its remaining hashes at most.
// The reads of the stored trees (a chain the cache does not hold) stay on
// the committer, which owns the transaction.

// treeHelperAppendsMin is the fewest Appends in a group for which a helper
// extends the trees: starting one costs about as much as ten appends' hashes.
// Tests lower it, and treeHelperItemsMax.
var treeHelperAppendsMin = 16

// treeHelperItemsMax bounds the appends one helper takes; the committer
// hashes those after it (a group with a large AppendBatch in an Update).
var treeHelperItemsMax = 4096

// treeItem is an append handed to the helper: the tree it extends and the
// entry's hash.
type treeItem struct {
	t    *chainTree
	hash Hash
}

// treeHelper is one group's helper. It is not recycled: a helper that
// never started may still look at its word after the group ended.
type treeHelper struct {
	items     []treeItem // the batch's, read by the helper below published
	published atomic.Int64
	// next is the helper's: the items it extended the trees with; the
	// committer reads it once the helper exited.
	next   int64
	helper atomic.Int32 // helperWaking, helperRunning or helperCancelled
	stop   atomic.Bool
	exited atomic.Bool
}

// run extends the trees with the published items, in order, until stopped.
func (h *treeHelper) run() {
	if !h.helper.CompareAndSwap(helperWaking, helperRunning) {
		return // the group ended before the helper woke
	}
	defer h.exited.Store(true)
	for spins := 0; !h.stop.Load(); spins++ {
		n := h.published.Load()
		if h.next == n {
			if spins > aheadSpinsMax {
				runtime.Gosched() // the next append is microseconds away
			}
			continue
		}
		for ; h.next < n; h.next++ {
			h.items[h.next].extend()
		}
		spins = 0
	}
}

// extend appends the item's leaf to its tree.
func (it *treeItem) extend() { it.t.r.Append(merkle.HashLeaf(it.hash[:]), it.t.keep) }

// startHelper starts a helper for the transaction about to run when its
// group holds enough Appends and a second core may run it.
func (b *treeBatch) startHelper(appends int) {
	if appends < treeHelperAppendsMin || runtime.GOMAXPROCS(0) < 2 {
		return
	}
	if len(b.items) != treeHelperItemsMax {
		b.items = make([]treeItem, treeHelperItemsMax)
	}
	b.helper = &treeHelper{items: b.items}
	go b.helper.run()
}

// handOff gives the append of hash to t to the helper, or reports false
// when there is none or it took all it may.
func (b *treeBatch) handOff(t *chainTree, hash *Hash) bool {
	h := b.helper
	if h == nil {
		return false
	}
	n := h.published.Load() // only the committer stores it
	if n == int64(len(h.items)) {
		b.stopHelper()
		return false
	}
	h.items[n] = treeItem{t: t, hash: *hash}
	h.published.Store(n + 1)
	return true
}

// stopHelper stops the helper, waits until it no longer touches the trees,
// and extends them with the items it left. It may be called more than once.
func (b *treeBatch) stopHelper() {
	h := b.helper
	if h == nil {
		return
	}
	b.helper = nil
	next := int64(0)
	if !h.helper.CompareAndSwap(helperWaking, helperCancelled) {
		h.stop.Store(true)
		for !h.exited.Load() {
			runtime.Gosched()
		}
		next = h.next
	}
	n := h.published.Load()
	for i := next; i < n; i++ {
		h.items[i].extend()
	}
	clear(h.items[:n]) // keep no tree alive past the transaction
}
