package bolt

import (
	"sync"
	"sync/atomic"

	bbolt "go.etcd.io/bbolt"
)

// readPoolSizeMax bounds the idle bbolt read transactions a handle keeps.
// One per goroutine that reads at once is enough; each pins the pages of
// the file's last commit, which only the next checkpoint frees anyway.
const readPoolSizeMax = 8

// cacheLineSize is the size the pool's slots are padded to.
const cacheLineSize = 64

// readPool keeps the bbolt read transactions of a handle that runs the log
// for its next transactions. With the log, the file changes only when a
// checkpoint commits, so between two checkpoints every transaction reads
// the same snapshot of the file: a replay, which would otherwise begin and
// end a bbolt transaction and open its buckets again (a fifth of its CPU),
// reuses one, with the buckets and runs it has opened.
//
// Two rules keep it exact. A transaction is kept only when it reads the
// file's last commit (its id is txid). And a bbolt write transaction empties
// the pool when it begins and keeps it empty until it ends, because its
// commit may grow the file's map, which waits for every read transaction
// to end: an idle one would wait forever.
//
// Idle transactions sit in slots of one each, each slot on a cache line of
// its own, and a goroutine takes from and gives back to the slot its
// processor last used first (a hint kept in a sync.Pool, which keeps one
// per processor): two callers replaying at once on two cores each keep a
// transaction of their own, with its maps of runs and segments, and
// neither writes a line the other reads. One mutex over one slice, taken
// twice per replay by both callers, parked them on each other's Unlock and
// moved its line between the cores on every replay.
type readPool struct {
	// mu orders the changes of txid, known, writing and closed, and of
	// usable, which sums them up.
	mu sync.Mutex
	// txid is the id of the file's last commit, which every idle
	// transaction reads; known is false until Open has read it and after a
	// commit whose outcome is unknown.
	txid  uint64
	known bool
	// writing counts the bbolt write transactions running.
	writing int
	closed  bool
	// usable is txid<<1|1 while transactions may be kept (known, no write
	// running, not closed) and zero otherwise; take and give read it
	// without the mutex.
	usable atomic.Uint64

	_     [cacheLineSize]byte // keeps the slots off the lines above
	slots [readPoolSizeMax]readSlot
	// hints holds a *readHint per processor; nextSlot hands out the slot
	// of a hint that sync.Pool never had or has dropped.
	hints    sync.Pool
	nextSlot atomic.Uint32
}

// readSlot holds at most one idle transaction.
type readSlot struct {
	mu   sync.Mutex
	idle *tx
	_    [cacheLineSize - 16]byte
}

// readHint names the slot a processor's goroutines try first.
type readHint struct{ slot uint32 }

// publish sets usable from the fields it sums up; p.mu is held.
func (p *readPool) publish() {
	if p.known && p.writing == 0 && !p.closed {
		p.usable.Store(p.txid<<1 | 1)
		return
	}
	p.usable.Store(0)
}

// keeps reports whether t may be kept: it reads the file's last commit and
// no write runs.
func (p *readPool) keeps(t *tx) bool {
	return p.usable.Load() == uint64(t.tx.ID())<<1|1
}

// hint returns this processor's hint; the caller puts it back.
func (p *readPool) hint() *readHint {
	if h, ok := p.hints.Get().(*readHint); ok {
		return h
	}
	return &readHint{slot: p.nextSlot.Add(1) % readPoolSizeMax}
}

// start records the file's last commit once Open has written what it
// writes.
func (p *readPool) start(db *bbolt.DB) {
	var txid uint64
	if err := db.View(func(btx *bbolt.Tx) error {
		txid = uint64(btx.ID())
		return nil
	}); err != nil {
		return // the pool stays unused
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.writing == 0 && !p.closed {
		p.txid, p.known = txid, true
		p.publish()
	}
}

// take returns an idle transaction, or nil: the one in the processor's
// slot, else one in another slot.
func (p *readPool) take() *tx {
	if p.usable.Load() == 0 {
		return nil
	}
	h := p.hint()
	defer p.hints.Put(h)
	for i := range uint32(readPoolSizeMax) {
		if t := p.slots[(h.slot+i)%readPoolSizeMax].take(); t != nil {
			t.done = false
			return t
		}
	}
	return nil
}

func (s *readSlot) take() *tx {
	s.mu.Lock()
	t := s.idle
	s.idle = nil
	s.mu.Unlock()
	return t
}

// give keeps a read transaction that has ended for the next one, when it
// reads the file's last commit and no write runs; it reports false when the
// caller must roll it back.
func (p *readPool) give(t *tx) bool {
	if !p.keeps(t) {
		return false
	}
	h := p.hint()
	defer p.hints.Put(h)
	for i := range uint32(readPoolSizeMax) {
		if p.slots[(h.slot+i)%readPoolSizeMax].give(p, t) {
			return true
		}
	}
	return false
}

// give keeps t when the slot is empty and the pool still keeps t. The check
// is made under the slot's mutex, which drain takes to empty the slot after
// usable was cleared: either this check sees usable cleared, or drain finds
// t in the slot.
func (s *readSlot) give(p *readPool, t *tx) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.idle != nil || !p.keeps(t) {
		return false
	}
	t.done = true
	s.idle = t
	return true
}

// drain empties every slot and rolls back what they held; usable is zero.
func (p *readPool) drain() {
	for i := range p.slots {
		if t := p.slots[i].take(); t != nil {
			t.tx.Rollback()
		}
	}
}

// beginWrite empties the pool and keeps it empty until endWrite.
func (p *readPool) beginWrite() {
	p.mu.Lock()
	p.writing++
	p.publish()
	p.mu.Unlock()
	p.drain()
}

// writeOutcome is how a bbolt write transaction ended.
type writeOutcome uint8

const (
	writeRolledBack writeOutcome = iota + 1 // the file is as it was
	writeCommitted                          // the file's last commit is the transaction's
	writeFailed                             // a failed commit: the file's state is not known
)

// endWrite ends what beginWrite began; txid is the write transaction's.
func (p *readPool) endWrite(outcome writeOutcome, txid uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.writing <= 0 {
		panic("bolt: readPool.endWrite without beginWrite")
	}
	p.writing--
	switch outcome {
	case writeCommitted:
		p.txid, p.known = txid, true
	case writeFailed:
		p.known = false
	}
	p.publish()
}

// close empties the pool for good, before the file is closed (bbolt's
// Close waits for every read transaction to end).
func (p *readPool) close() {
	p.mu.Lock()
	p.closed = true
	p.publish()
	p.mu.Unlock()
	p.drain()
}

// idleCount returns how many transactions the pool holds.
func (p *readPool) idleCount() int {
	n := 0
	for i := range p.slots {
		s := &p.slots[i]
		s.mu.Lock()
		if s.idle != nil {
			n++
		}
		s.mu.Unlock()
	}
	return n
}
