package chain

import (
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// An entry's hash covers its prev_hash, so a chain's hashes are computed one
// after the other: on one core they are a third of what an AppendBatch of
// new keyed entries costs. The rest (looking the keys up, building and
// storing the records) does not depend on the hashes but orders them. So
// for a large part of a batch a second goroutine hashes ahead: it assumes
// that every request of the part becomes a new entry (the common case),
// computes each entry's seq, time and hash from the chain's head, and the
// committer, appending in order, takes each hash once its own seq,
// prev_hash and time match the assumed ones. At the first request that
// does not become a new entry (a replay, a conflict, an error) or does not
// match, the helper stops and the committer hashes the rest itself.
//
// The helper takes a moment to start (waking another core), and may be
// slower than the committer when that core has other work: so the right
// to hash the next entry passes between the two for every entry, and the
// committer hashes the entries it needs itself whenever the helper has
// not, through the same slots. A batch never waits for the helper for
// longer than one hash.

// hashAheadEntriesMin is the smallest part of an AppendBatch hashed ahead:
// starting the helper costs about as much as a hundred hashes, and it
// must finish well before the part does to pay off.
const hashAheadEntriesMin = 256

// hashAheadPartMin is hashAheadEntriesMin, lowered by tests so that small
// batches take the same path.
var hashAheadPartMin = hashAheadEntriesMin

// hashAheadChainsMax bounds the chains of a part hashed ahead: the
// committer reads each one's head before the helper starts.
const hashAheadChainsMax = 4

// Who hashes the next entry of a hashAhead: the right to hash (the
// chains' running state) passes between the committer and the helper
// through idle, one entry at a time.
const (
	aheadIdle      int32 = iota // no one hashes; whoever takes it may
	aheadCommitter              // the committer hashes one entry
	aheadHelper                 // the helper hashes one entry
)

// Whether the helper runs: the committer cancels a helper that has not
// started, and waits for one that has to leave.
const (
	helperWaking    int32 = iota // the goroutine has not run yet
	helperRunning                // it runs until stop, then sets exited
	helperCancelled              // it will touch nothing but this word
)

// hashAhead is one part's hashing ahead.
type hashAhead struct {
	reqs           []Request
	now            int64 // the time of the part's new entries (before the chains' floors)
	payloadSizeMax int
	chains         [hashAheadChainsMax]aheadChain
	chainCount     int
	// chainOf is the index in chains of each request's chain.
	chainOf []uint8
	// slots[i] is the entry reqs[i] becomes, once hashed > i.
	slots  []aheadSlot
	hashed atomic.Int64
	state  atomic.Int32
	helper atomic.Int32
	// stop tells a running helper to leave; it sets exited when it has.
	stop   atomic.Bool
	exited atomic.Bool
	// diverged is set by the committer when a slot assumed another entry.
	diverged bool
	buf      []byte // the hashing's scratch
	// scratch is where chainOf, slots and buf came from and go back to.
	scratch *aheadScratch
}

// aheadChain is a chain's head as the hashing so far left it.
type aheadChain struct {
	name string
	seq  uint64
	hash Hash
	time int64
}

// aheadSlot is the entry a request becomes when every request before it in
// the part became a new entry.
type aheadSlot struct {
	seq  uint64
	time int64
	prev Hash
	hash Hash
}

// aheadScratch holds the slices of a hashAhead between parts. The
// hashAhead itself is not recycled: a helper that never started may still
// look at its state after the part ended.
type aheadScratch struct {
	chainOf []uint8
	slots   []aheadSlot
	buf     []byte
}

var aheadScratches = sync.Pool{New: func() any { return new(aheadScratch) }}

// startHashAhead reads the heads of part's chains (in name order, the
// order in which a server backend's storage.KeyPreparer locks them) and
// the clock, once for the part's new entries, and starts the helper; or it
// returns nil when hashing ahead would not pay off: a small part, one
// core, too many chains, or a head that cannot be read (the appends then
// report the error).
func (tx *Tx) startHashAhead(part []Request) *hashAhead {
	if len(part) < hashAheadPartMin || runtime.GOMAXPROCS(0) < 2 {
		return nil
	}
	h := &hashAhead{reqs: part, payloadSizeMax: tx.db.opts.PayloadSizeMax, scratch: aheadScratches.Get().(*aheadScratch)}
	h.chainOf, h.buf = h.scratch.chainOf[:0], h.scratch.buf
	for _, r := range part {
		c := h.chainIndex(r.Chain)
		if c < 0 {
			h.release()
			return nil
		}
		h.chainOf = append(h.chainOf, uint8(c))
	}
	var byName [hashAheadChainsMax]*aheadChain
	for i := range h.chainCount {
		byName[i] = &h.chains[i]
	}
	slices.SortFunc(byName[:h.chainCount], func(a, b *aheadChain) int { return strings.Compare(a.name, b.name) })
	for _, c := range byName[:h.chainCount] {
		head, err := tx.head(c.name)
		if err != nil {
			h.release()
			return nil
		}
		c.seq, c.hash, c.time = head.Seq, head.Hash, head.TimeUnixNano
	}
	if cap(h.scratch.slots) < len(part) {
		h.scratch.slots = make([]aheadSlot, len(part))
	}
	h.slots = h.scratch.slots[:len(part)]
	h.now = tx.db.clock().UnixNano()
	go h.run()
	return h
}

// chainIndex returns the index of chain in h.chains, adding it, or -1 when
// the part has too many chains.
func (h *hashAhead) chainIndex(chain string) int {
	for i := range h.chainCount {
		if h.chains[i].name == chain {
			return i
		}
	}
	if h.chainCount == hashAheadChainsMax {
		return -1
	}
	h.chains[h.chainCount].name = chain
	h.chainCount++
	return h.chainCount - 1
}

// run is the helper: it hashes the part's entries in order, taking turns
// with the committer, until all are hashed or the committer stops it.
func (h *hashAhead) run() {
	if !h.helper.CompareAndSwap(helperWaking, helperRunning) {
		return // the part ended before the helper woke
	}
	defer h.exited.Store(true)
	n := int64(len(h.reqs))
	for spins := 0; !h.stop.Load(); spins++ {
		next := h.hashed.Load()
		if next == n || len(h.reqs[next].Payload) > h.payloadSizeMax {
			return // all hashed, or a request that fails validation: the committer stops there
		}
		if h.state.Load() == aheadIdle && h.state.CompareAndSwap(aheadIdle, aheadHelper) {
			h.hashNextBefore(int(n - 1))
			h.state.Store(aheadIdle)
			spins = 0
		} else if spins > aheadSpinsMax {
			runtime.Gosched() // the committer's hash is late: its core was taken
		}
	}
}

// hashNext computes slot i from the chain's running state, by whoever holds
// the right to hash.
func (h *hashAhead) hashNext(i int64) {
	r := &h.reqs[i]
	c := &h.chains[h.chainOf[i]]
	s := &h.slots[i]
	s.seq, s.prev, s.time = c.seq+1, c.hash, entryTime(h.now, c.seq, c.time)
	s.hash, h.buf = entryHash(h.buf, r.Chain, s.seq, &s.prev, s.time, r.IdempotencyKey, r.Type, r.Payload)
	c.seq, c.hash, c.time = s.seq, s.hash, s.time
	h.hashed.Store(i + 1)
}

// hashNextBefore hashes the next slot if it is not past slot i, by whoever
// holds the right to hash: the helper may have hashed up to i (or to the
// end) between the caller's look at hashed and its taking the right.
func (h *hashAhead) hashNextBefore(i int) {
	if next := h.hashed.Load(); next <= int64(i) {
		h.hashNext(next)
	}
}

// hashOf returns the hash of e, the entry request i becomes, from its slot
// when the slot assumed e's seq, prev_hash and time. When it did not, or h
// is nil, ok is false and the caller hashes; h is then marked diverged (an
// AppendBatch part stops its helper; a group's slots that were never
// hashed simply do not match). The committer hashes the slots the helper
// has not reached itself.
func (h *hashAhead) hashOf(i int, e *Entry) (hash Hash, ok bool) {
	if h == nil {
		return Hash{}, false
	}
	for spins := 0; h.hashed.Load() <= int64(i); spins++ {
		if h.state.Load() == aheadIdle && h.state.CompareAndSwap(aheadIdle, aheadCommitter) {
			h.hashNextBefore(i)
			h.state.Store(aheadIdle)
		} else if spins > aheadSpinsMax {
			runtime.Gosched() // the helper's hash, under a microsecond, is late: its core was taken
		}
	}
	s := &h.slots[i]
	if s.seq != e.Seq || s.prev != e.PrevHash || s.time != e.TimeUnixNano {
		h.diverged = true
		return Hash{}, false
	}
	return s.hash, true
}

// aheadSpinsMax bounds the busy loops of the committer or the helper
// waiting for the other's hash (under a microsecond) before it yields.
const aheadSpinsMax = 64

// finish stops the helper and waits until it no longer touches the part;
// h must not be used afterwards. It may be called more than once.
func (h *hashAhead) finish() {
	if h == nil || h.scratch == nil {
		return
	}
	if !h.helper.CompareAndSwap(helperWaking, helperCancelled) {
		h.stop.Store(true)
		for !h.exited.Load() {
			runtime.Gosched()
		}
	}
	h.release()
}

// release returns the slices to the pool.
func (h *hashAhead) release() {
	s := h.scratch
	s.chainOf, s.slots, s.buf = h.chainOf[:0], h.slots[:0], h.buf[:0]
	if cap(s.buf) > 64<<10 { // a huge payload's buffer is not kept
		s.buf = nil
	}
	// A helper that never woke may still load its word (cancelled), so
	// only the slices are cleared.
	h.reqs, h.chainOf, h.slots, h.buf, h.scratch = nil, nil, nil, nil, nil
	aheadScratches.Put(s)
}
