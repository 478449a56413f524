package chain

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/ledgerworks/ledger/storage"
)

// Request states: a queued request is claimed by the committer or canceled
// by its caller, whichever comes first.
const (
	requestQueued int32 = iota
	requestRunning
	requestCanceled
)

// request is one Update waiting for the committer.
type request struct {
	ctx        context.Context
	fn         func(tx *Tx) error
	state      atomic.Int32
	err        error
	panicValue any
	done       chan struct{}
}

// durableGroup is a group whose transaction the store committed without
// waiting for durability (storage.AsyncCommitter): its callers are answered
// once wait returns.
type durableGroup struct {
	pending []*request
	wait    func() error
	start   time.Time
}

// commitLoop is the group committer. It takes every request that queued while
// the previous commit was in flight (up to BatchSizeMax), runs them in one
// storage transaction and commits once: one fsync for the whole group. No
// timer delays a lone request.
//
// When the store commits asynchronously, the committer hands the group to
// the acknowledger and runs the next group while the previous one is made
// durable: the functions of group N+1 overlap the fsync of group N. The
// hand-off is unbuffered, so at most two groups are in flight (one being
// made durable, one committed and waiting its turn): a slow disk holds the
// committer back instead of queueing groups without bound.
func (db *DB) commitLoop() {
	acks := make(chan durableGroup)
	acknowledged := make(chan struct{})
	go db.acknowledge(acks, acknowledged)
	defer func() {
		close(acks)
		<-acknowledged
		close(db.stopped)
	}()
	batch := make([]*request, 0, db.opts.BatchSizeMax)
	for {
		var first *request
		select {
		case first = <-db.queue:
		case <-db.closing:
			db.drain(acks)
			return
		}
		batch = db.collect(append(batch[:0], first))
		// Callers woken by the previous commit are still on their way to the
		// queue; yielding lets them join this group instead of waiting a
		// whole commit for the next. Yields cost microseconds, not a timer.
		for range groupYieldsMax {
			n := len(batch)
			runtime.Gosched()
			if batch = db.collect(batch); len(batch) == n || len(batch) == db.opts.BatchSizeMax {
				break
			}
		}
		db.runGroup(batch, acks)
	}
}

// acknowledge answers the groups the committer committed asynchronously, in
// commit order, each once its wait returns: nil answers the callers with
// their own results, an error (the store could not make the commit
// durable, and refuses every later one) answers them with it.
func (db *DB) acknowledge(acks <-chan durableGroup, acknowledged chan<- struct{}) {
	defer close(acknowledged)
	for g := range acks {
		db.answer(g.pending, storageError(g.wait()), g.start)
	}
}

// commitRetriesMax bounds how often a group runs again after the store
// rolled its transaction back with an error matching storage.ErrRetry.
const commitRetriesMax = 3

// groupYieldsMax bounds the yields of the committer while its group grows.
const groupYieldsMax = 8

// collect adds the queued requests to batch, up to BatchSizeMax, without
// waiting.
func (db *DB) collect(batch []*request) []*request {
	for len(batch) < db.opts.BatchSizeMax {
		select {
		case r := <-db.queue:
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}

// drain finishes the requests still queued at Close. Update holds the DB's
// read lock while it queues, and Close takes the write lock first, so nothing
// is queued after drain starts.
func (db *DB) drain(acks chan<- durableGroup) {
	for {
		select {
		case r := <-db.queue:
			db.runGroup([]*request{r}, acks)
		default:
			return
		}
	}
}

// runGroup runs a batch in one storage transaction. A request whose function
// fails without writing simply gets its error. One that fails after writing,
// or whose function met an error of the store (which on a server backend
// aborts the whole transaction, see Tx.failed), poisons the transaction: it is rolled back and the group runs again without
// that request, so one caller's failure never reaches another. When the store
// rolls the transaction back itself with storage.ErrRetry (a serialization
// failure), the whole group runs again, up to commitRetriesMax times. A
// store that commits asynchronously gets the group's callers handed to acks
// with the commit's wait; any other is committed here and its callers
// answered.
func (db *DB) runGroup(batch []*request, acks chan<- durableGroup) {
	pending := batch[:0:0]
	for _, r := range batch {
		if r.state.CompareAndSwap(requestQueued, requestRunning) {
			pending = append(pending, r)
		}
	}
	retries := 0
	retry := func(err error) bool {
		if errors.Is(err, storage.ErrRetry) && retries < commitRetriesMax {
			retries++
			return true
		}
		return false
	}
	for len(pending) > 0 {
		stx, err := db.backend.Begin(context.Background(), true)
		if err != nil {
			if retry(err) {
				continue
			}
			finish(pending, storageError(err))
			return
		}
		poisoned, again := -1, false
		for i, r := range pending {
			tx := &Tx{db: db, ctx: r.ctx, stx: stx}
			r.err, r.panicValue = run(r.fn, tx)
			if r.err != nil && r.panicValue == nil && retry(r.err) {
				again = true // the store rolled the whole transaction back
				break
			}
			if (r.err != nil || r.panicValue != nil) && tx.dirty || tx.storageFailure != nil {
				if r.err == nil { // the function went on after the store failed
					r.err = storageError(tx.storageFailure)
				}
				poisoned = i
				break
			}
		}
		if again {
			stx.Rollback()
			continue
		}
		if poisoned >= 0 {
			stx.Rollback()
			finishOne(pending[poisoned])
			pending = append(pending[:poisoned:poisoned], pending[poisoned+1:]...)
			continue
		}
		start := time.Now()
		wait, commitErr := commit(stx)
		if commitErr != nil && retry(commitErr) {
			if db.metrics != nil {
				db.metrics.GroupCommitted(len(pending), time.Since(start))
			}
			continue
		}
		if commitErr == nil && wait != nil {
			acks <- durableGroup{pending: pending, wait: wait, start: start}
			return
		}
		db.answer(pending, commitErr, start)
		return
	}
}

// commit commits stx: asynchronously when the store can (wait is then
// non-nil), else durably before it returns.
func commit(stx storage.Tx) (wait func() error, err error) {
	if async, ok := stx.(storage.AsyncCommitter); ok {
		wait, err := async.CommitAsync()
		return wait, storageError(err)
	}
	return nil, storageError(stx.Commit())
}

// answer reports a committed group and answers its callers: each with its
// own error, or with the commit's when its function succeeded.
func (db *DB) answer(pending []*request, commitErr error, start time.Time) {
	if db.metrics != nil {
		db.metrics.GroupCommitted(len(pending), time.Since(start))
	}
	if commitErr != nil {
		db.log.Error("group commit failed", "requests", len(pending), "err", commitErr)
	}
	for _, r := range pending {
		if r.err == nil && r.panicValue == nil {
			r.err = commitErr
		}
		finishOne(r)
	}
}

// run calls fn, turning a panic into a value handed back to the caller's
// goroutine, where it is raised again.
func run(fn func(tx *Tx) error, tx *Tx) (err error, panicValue any) {
	defer func() {
		if p := recover(); p != nil {
			panicValue = p
			err = fmt.Errorf("chain: update function panicked: %v", p)
		}
	}()
	return fn(tx), nil
}

func finish(rs []*request, err error) {
	for _, r := range rs {
		r.err = err
		finishOne(r)
	}
}

func finishOne(r *request) { close(r.done) }
