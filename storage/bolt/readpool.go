package bolt

import (
	"sync"

	bbolt "go.etcd.io/bbolt"
)

// readPoolSizeMax bounds the idle bbolt read transactions a handle keeps.
// One per goroutine that reads at once is enough; each pins the pages of
// the file's last commit, which only the next checkpoint frees anyway.
const readPoolSizeMax = 8

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
type readPool struct {
	mu   sync.Mutex
	idle []*tx
	// txid is the id of the file's last commit, which every idle
	// transaction reads; known is false until Open has read it and after a
	// commit whose outcome is unknown.
	txid  uint64
	known bool
	// writing counts the bbolt write transactions running.
	writing int
	closed  bool
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
	}
}

// take returns an idle transaction, or nil.
func (p *readPool) take() *tx {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.idle)
	if n == 0 {
		return nil
	}
	t := p.idle[n-1]
	p.idle[n-1] = nil
	p.idle = p.idle[:n-1]
	t.done = false
	return t
}

// give keeps a read transaction that has ended for the next one, when it
// reads the file's last commit and no write runs; it reports false when the
// caller must roll it back.
func (p *readPool) give(t *tx) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.writing > 0 || !p.known || uint64(t.tx.ID()) != p.txid || len(p.idle) >= readPoolSizeMax {
		return false
	}
	t.done = true
	p.idle = append(p.idle, t)
	return true
}

// beginWrite empties the pool and keeps it empty until endWrite.
func (p *readPool) beginWrite() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.writing++
	p.mu.Unlock()
	for _, t := range idle {
		t.tx.Rollback()
	}
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
}

// close empties the pool for good, before the file is closed (bbolt's
// Close waits for every read transaction to end).
func (p *readPool) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, t := range idle {
		t.tx.Rollback()
	}
}
