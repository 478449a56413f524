package readpool

import (
	"sync"
	"sync/atomic"

	bbolt "go.etcd.io/bbolt"
)

// SizeMax bounds the idle bbolt read transactions a pool keeps.
// One per goroutine that reads at once is enough; each pins the pages of
// the file's last commit, which only the next checkpoint frees anyway.
const SizeMax = 8

// cacheLineSize is the size the pool's slots are padded to.
const cacheLineSize = 64

// Tx is what a pool keeps: a bbolt read transaction with what its holder
// keeps beside it (the buckets and runs it opened). T is a pointer type;
// its zero value is none.
type Tx interface {
	comparable
	// BoltTx is the transaction's bbolt read transaction.
	BoltTx() *bbolt.Tx
	// Pooled is called with true when the pool keeps the transaction
	// (it has ended for its holder) and with false when it hands it out
	// again.
	Pooled(kept bool)
}

// Pool keeps the bbolt read transactions of a handle that runs the log
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
type Pool[T Tx] struct {
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
	slots [SizeMax]slot[T]
	// hints holds a *readHint per processor; nextSlot hands out the slot
	// of a hint that sync.Pool never had or has dropped.
	hints    sync.Pool
	nextSlot atomic.Uint32
}

// slot holds at most one idle transaction.
type slot[T Tx] struct {
	mu   sync.Mutex
	idle T
	_    [cacheLineSize - 16]byte
}

// hint names the slot a processor's goroutines try first.
type hint struct{ slot uint32 }

// publish sets usable from the fields it sums up; p.mu is held.
func (p *Pool[T]) publish() {
	if p.known && p.writing == 0 && !p.closed {
		p.usable.Store(p.txid<<1 | 1)
		return
	}
	p.usable.Store(0)
}

// keeps reports whether t may be kept: it reads the file's last commit and
// no write runs.
func (p *Pool[T]) keeps(t T) bool {
	return p.usable.Load() == uint64(t.BoltTx().ID())<<1|1
}

// hint returns this processor's hint; the caller puts it back.
func (p *Pool[T]) hint() *hint {
	if h, ok := p.hints.Get().(*hint); ok {
		return h
	}
	return &hint{slot: p.nextSlot.Add(1) % SizeMax}
}

// Start records the file's last commit once Open has written what it
// writes.
func (p *Pool[T]) Start(db *bbolt.DB) {
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

// Take returns an idle transaction, or the zero T: the one in the processor's
// slot, else one in another slot.
func (p *Pool[T]) Take() T {
	var none T
	if p.usable.Load() == 0 {
		return none
	}
	h := p.hint()
	defer p.hints.Put(h)
	for i := range uint32(SizeMax) {
		if t := p.slots[(h.slot+i)%SizeMax].take(); t != none {
			t.Pooled(false)
			return t
		}
	}
	return none
}

func (s *slot[T]) take() T {
	var none T
	s.mu.Lock()
	t := s.idle
	s.idle = none
	s.mu.Unlock()
	return t
}

// Give keeps a read transaction that has ended for the next one, when it
// reads the file's last commit and no write runs; it reports false when the
// caller must roll it back.
func (p *Pool[T]) Give(t T) bool {
	if !p.keeps(t) {
		return false
	}
	h := p.hint()
	defer p.hints.Put(h)
	for i := range uint32(SizeMax) {
		if p.slots[(h.slot+i)%SizeMax].give(p, t) {
			return true
		}
	}
	return false
}

// give keeps t when the slot is empty and the pool still keeps t. The check
// is made under the slot's mutex, which drain takes to empty the slot after
// usable was cleared: either this check sees usable cleared, or drain finds
// t in the slot.
func (s *slot[T]) give(p *Pool[T], t T) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	var none T
	if s.idle != none || !p.keeps(t) {
		return false
	}
	t.Pooled(true)
	s.idle = t
	return true
}

// drain empties every slot and rolls back what they held; usable is zero.
func (p *Pool[T]) drain() {
	var none T
	for i := range p.slots {
		if t := p.slots[i].take(); t != none {
			t.BoltTx().Rollback()
		}
	}
}

// BeginWrite empties the pool and keeps it empty until EndWrite.
func (p *Pool[T]) BeginWrite() {
	p.mu.Lock()
	p.writing++
	p.publish()
	p.mu.Unlock()
	p.drain()
}

// WriteOutcome is how a bbolt write transaction ended.
type WriteOutcome uint8

const (
	WriteRolledBack WriteOutcome = iota + 1 // the file is as it was
	WriteCommitted                          // the file's last commit is the transaction's
	WriteFailed                             // a failed commit: the file's state is not known
)

// EndWrite ends what BeginWrite began; txid is the write transaction's.
func (p *Pool[T]) EndWrite(outcome WriteOutcome, txid uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.writing <= 0 {
		panic("readpool: EndWrite without BeginWrite")
	}
	p.writing--
	switch outcome {
	case WriteCommitted:
		p.txid, p.known = txid, true
	case WriteFailed:
		p.known = false
	}
	p.publish()
}

// Close empties the pool for good, before the file is closed (bbolt's
// Close waits for every read transaction to end).
func (p *Pool[T]) Close() {
	p.mu.Lock()
	p.closed = true
	p.publish()
	p.mu.Unlock()
	p.drain()
}

// IdleCount returns how many transactions the pool holds.
func (p *Pool[T]) IdleCount() int {
	var none T
	n := 0
	for i := range p.slots {
		s := &p.slots[i]
		s.mu.Lock()
		if s.idle != none {
			n++
		}
		s.mu.Unlock()
	}
	return n
}
