package chain

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
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

// request is one Update, or one Append, waiting for the committer. An
// Append carries its request and gets its result here instead of through a
// function, so that it allocates nothing: requests are pooled.
type request struct {
	ctx        context.Context
	fn         func(tx *Tx) error // nil for an Append
	appendReq  Request
	appendRes  Result
	notes      []string // channels the function's transaction notified
	state      atomic.Int32
	trace      *requestTrace // set by submitTraced only
	err        error
	panicValue any
	// done receives one value when the request is finished; it is
	// buffered, so finishing never blocks, and reused by the pool.
	done chan struct{}
}

// requests pools requests between calls: a request goes back only after
// its caller received its answer, since a canceled one may still sit in
// the queue.
var requests = sync.Pool{New: func() any { return &request{done: make(chan struct{}, 1)} }}

func newRequest(ctx context.Context, fn func(tx *Tx) error) *request {
	r := requests.Get().(*request)
	r.ctx, r.fn = ctx, fn
	return r
}

// release returns an answered request to the pool.
func (r *request) release() {
	done, notes := r.done, r.notes
	clear(notes)
	*r = request{done: done, notes: notes[:0]} // the atomic state is zero again, and nothing is kept alive
	requests.Put(r)
}

// call runs the request's function, or its append, in tx; an append takes
// its hash from slot i of ahead when that slot holds it (see
// hashGroupInLanes).
//
//lint:ignore ST1008 the panic value rides beside the error recover turned it into
func (r *request) call(tx *Tx, ahead *hashAhead, i int) (err error, panicValue any) {
	if r.fn != nil {
		return run(r.fn, tx)
	}
	defer func() {
		if p := recover(); p != nil {
			panicValue = p
			err = fmt.Errorf("chain: append panicked: %v", p)
		}
	}()
	r.appendRes, err = tx.appendAhead(r.appendReq, ahead, i)
	return err, nil
}

// durableGroup is a group whose transaction the store committed without
// waiting for durability (storage.AsyncCommitter): its callers are answered
// once wait returns.
type durableGroup struct {
	pending []*request
	wait    func() error
	start   time.Time
}

// pipeline is what the committer and the acknowledger share.
type pipeline struct {
	// acks hands committed groups to the acknowledger, unbuffered.
	acks chan durableGroup
	// running is set while the committer collects and runs a group.
	running atomic.Bool
	// idle wakes an acknowledger waiting for a running group when the
	// group ended without a hand-off (every request failed, or the store
	// committed it durably itself).
	idle chan struct{}
	// keys is the committer's scratch for prepareGroup and for
	// Tx.AppendBatch in the group's functions, one after the other.
	keys []storage.ChainKey
	// lanes is the committer's scratch for hashGroupInLanes.
	lanes laneScratch
	// trees gathers the chains' tree updates of the group's transaction;
	// nil when the DB keeps no trees (Options.NoTrees).
	trees *treeBatch
	// atCommit is the group's Tx.atCommit.
	atCommit []int
	// groups counts the groups run, numbering them for the traced
	// requests' spans.
	groups uint64
	// carry holds the requests takeJoiners took from the queue that did
	// not join: they open the next group. held is its scratch.
	carry []*request
	held  []string
}

// groupsMergedMax bounds the groups one wait makes durable together.
const groupsMergedMax = 4

// commitLoop is the group committer. It takes every request that queued while
// the previous commit was in flight (up to BatchSizeMax), runs them in one
// storage transaction and commits once: one fsync for the whole group. No
// timer delays a lone request. On a store whose heads other processes lock,
// requests that queue while the group waits for its heads may join it
// (joiners.go).
//
// When the store commits asynchronously, the committer hands the group to
// the acknowledger and runs the next group while the previous one is made
// durable: the functions of group N+1 overlap the fsync of group N. The
// hand-off is unbuffered, so at most groupsMergedMax+1 groups are in
// flight (the ones one wait makes durable, see acknowledge, and one
// committed and waiting its turn): a slow disk holds the committer back
// instead of queueing groups without bound.
func (db *DB) commitLoop() {
	p := &pipeline{acks: make(chan durableGroup), idle: make(chan struct{}, 1)}
	if !db.opts.NoTrees {
		p.trees = newTreeBatch()
	}
	acknowledged := make(chan struct{})
	go db.acknowledge(p, acknowledged)
	defer func() {
		close(p.acks)
		<-acknowledged
		close(db.stopped)
	}()
	batch := make([]*request, 0, db.opts.BatchSizeMax)
	busy := func() bool {
		if len(db.queue) > 0 || len(p.carry) > 0 {
			return true
		}
		select {
		case <-db.closing:
			return true
		default:
			return false
		}
	}
	for {
		if p.trees != nil {
			p.trees.hashIdle(busy) // the trees' deferred leaves, while no request waits
		}
		batch = append(batch[:0], p.carry...)
		clear(p.carry)
		p.carry = p.carry[:0]
		if len(batch) == 0 {
			select {
			case first := <-db.queue:
				batch = append(batch, first)
			case <-db.closing:
				db.drain(p)
				db.storeTreeRanges(p)
				return
			}
		}
		p.running.Store(true)
		batch = db.collect(batch)
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
		db.runGroup(batch, p)
	}
}

// acknowledge answers the groups the committer committed asynchronously, in
// commit order, each once its wait returns: nil answers the callers with
// their own results, an error (the store could not make the commit
// durable, and refuses every later one) answers them with it.
//
// Before it waits, it lets the callers it just answered queue again (a few
// yields) and, while the committer runs a group, waits for that group too
// (up to groupsMergedMax groups, BatchSizeMax requests): the last group's
// wait is one fdatasync for all of them. Without this, the callers split
// into two cohorts that take turns, each fdatasync covering about half of
// them: the callers answered by one sync come back while the next one
// already runs. A lone caller pays a few yields, not a timer.
func (db *DB) acknowledge(p *pipeline, acknowledged chan<- struct{}) {
	defer close(acknowledged)
	merged := make([]durableGroup, 0, groupsMergedMax)
	for g := range p.acks {
		merged = db.merge(p, append(merged[:0], g))
		// The last group's wait makes every earlier one durable too; each
		// earlier wait then returns at once (or with the failure that
		// stopped the store, which fails every later commit as well).
		last := storageError(merged[len(merged)-1].wait())
		for i, m := range merged {
			err := last
			if i < len(merged)-1 {
				err = storageError(m.wait())
			}
			db.answer(m.pending, err, m.start)
		}
		clear(merged)
	}
}

// merge adds to merged the groups the committer is running, as long as it
// runs one, within the bounds.
func (db *DB) merge(p *pipeline, merged []durableGroup) []durableGroup {
	requests := len(merged[0].pending)
	for range groupYieldsMax {
		if p.running.Load() {
			break
		}
		runtime.Gosched()
	}
	for len(merged) < groupsMergedMax && requests < db.opts.BatchSizeMax && p.running.Load() {
		select {
		case g, ok := <-p.acks:
			if !ok {
				return merged
			}
			merged = append(merged, g)
			requests += len(g.pending)
		case <-p.idle: // the running group ended without a hand-off
		}
	}
	return merged
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

// drain finishes the requests still queued (or carried, see takeJoiners)
// at Close. Update holds the DB's read lock while it queues, and Close
// takes the write lock first, so nothing is queued after drain starts.
func (db *DB) drain(p *pipeline) {
	for {
		var r *request
		if len(p.carry) > 0 {
			r, p.carry = p.carry[0], p.carry[1:]
		} else {
			select {
			case r = <-db.queue:
			default:
				return
			}
		}
		p.running.Store(true)
		db.runGroup([]*request{r}, p)
	}
}

// runGroup runs a batch in one storage transaction (runPending), then the
// requests it set aside after a lock-order conflict, each alone. Either
// way p.running is cleared, or the last group handed off.
func (db *DB) runGroup(batch []*request, p *pipeline) {
	pending := batch[:0:0]
	for _, r := range batch {
		if r.state.CompareAndSwap(requestQueued, requestRunning) {
			pending = append(pending, r)
		}
	}
	var learned []string
	aside := db.runPending(pending, p, &learned)
	for _, r := range aside {
		p.running.Store(true)
		alone := slices.Clone(learned)
		db.runPending([]*request{r}, p, &alone) // alone, it is never set aside
	}
}

// runPending runs pending in one storage transaction. A request whose
// function fails without writing simply gets its error. One that fails
// after writing, or whose function met an error of the store (which on a
// server backend aborts the whole transaction, see Tx.failed), poisons the
// transaction: it is rolled back and the group runs again without that
// request, so one caller's failure never reaches another. When the store
// rolls the transaction back itself with storage.ErrRetry (a
// serialization failure, a head locked out of order), the whole group
// runs again, up to commitRetriesMax times, with the heads the attempt
// locked (learned) locked first (lockorder.go); attempts that learned a
// chain are not counted. A request still meeting storage.ErrRetry after
// that is returned, set aside, when it has companions. A store that
// commits asynchronously gets the group's callers handed to the
// acknowledger with the commit's wait; any other is committed here and
// its callers answered. Unless it handed off, p.running is cleared.
func (db *DB) runPending(pending []*request, p *pipeline, learned *[]string) (aside []*request) {
	handedOff := false
	defer func() {
		if !handedOff {
			p.running.Store(false)
			select {
			case p.idle <- struct{}{}:
			default:
			}
		}
	}()
	p.groups++
	for _, r := range pending {
		if r.trace != nil {
			r.trace.claimedAt, r.trace.group = time.Now(), p.groups
		}
	}
	retries, relearned := 0, 0
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
			return aside
		}
		p.keys = prepareGroup(stx, pending, *learned, p.keys)
		ahead := db.hashGroupInLanes(stx, pending, &p.lanes)
		if p.trees != nil {
			p.trees.reset()
		}
		poisoned, conflict := -1, -1
		tx := &Tx{}
		p.atCommit = p.atCommit[:0]
		hashed := len(pending) // ahead's members; late joiners hash their own
	members:
		for from, rounds := 0, 0; ; rounds++ {
			for i := from; i < len(pending); i++ {
				r, a := pending[i], ahead
				if i >= hashed {
					a = nil
				}
				r.notes = r.notes[:0]
				*tx = Tx{db: db, ctx: r.ctx, stx: stx, keys: &p.keys, notes: &r.notes, trees: p.trees, atCommit: &p.atCommit, member: i} // one Tx per request, one allocation per group
				r.err, r.panicValue = r.call(tx, a, i)
				if r.panicValue == nil && (errors.Is(r.err, storage.ErrRetry) || errors.Is(tx.storageFailure, storage.ErrRetry)) {
					conflict = i // the store rolled the whole transaction back
					break members
				}
				if (r.err != nil || r.panicValue != nil) && tx.dirty || tx.storageFailure != nil {
					if r.err == nil { // the function went on after the store failed
						r.err = storageError(tx.storageFailure)
					}
					poisoned = i
					break members
				}
			}
			if rounds == joinRoundsMax {
				break
			}
			joiners := db.takeJoiners(stx, p, db.opts.BatchSizeMax-len(pending))
			if len(joiners) == 0 {
				break
			}
			for _, r := range joiners {
				if r.trace != nil {
					r.trace.claimedAt, r.trace.group = time.Now(), p.groups
				}
			}
			p.keys = prepareGroup(stx, joiners, nil, p.keys)
			from, pending = len(pending), append(pending, joiners...)
		}
		ahead.finish()
		if conflict >= 0 {
			grew := learnHeads(stx, learned)
			stx.Rollback()
			switch {
			case grew && relearned < lockOrderRetriesMax:
				relearned++
				continue
			case retries < commitRetriesMax:
				retries++
				continue
			case len(pending) > 1:
				// Spent: the others commit without it, and it runs alone.
				aside = append(aside, pending[conflict])
				pending = append(pending[:conflict:conflict], pending[conflict+1:]...)
				retries = 0
				continue
			}
			r := pending[conflict]
			if r.err == nil {
				r.err = storageError(tx.storageFailure)
			}
			finishOne(r)
			return aside
		}
		if poisoned >= 0 {
			stx.Rollback()
			finishOne(pending[poisoned])
			pending = append(pending[:poisoned:poisoned], pending[poisoned+1:]...)
			continue
		}
		if p.trees != nil {
			if err := p.trees.flush(context.Background(), stx); err != nil {
				stx.Rollback()
				if retry(err) {
					continue
				}
				finish(pending, storageError(err))
				return aside
			}
		}
		start := time.Now()
		wait, commitErr := commit(stx)
		if commitErr == nil && p.trees != nil {
			p.trees.committed()
		}
		if m, err := refusedAtCommit(commitErr, p.atCommit); m >= 0 {
			// One request's statement failed: the others run again
			// without it, as for a request whose function failed.
			stx.Rollback()
			pending[m].err = storageError(err)
			if errors.Is(pending[m].err, storage.ErrRetry) && len(pending) > 1 {
				aside = append(aside, pending[m])
			} else {
				finishOne(pending[m])
			}
			pending = append(pending[:m:m], pending[m+1:]...)
			continue
		}
		if commitErr != nil && retry(commitErr) {
			if db.metrics != nil {
				db.metrics.GroupCommitted(len(pending), time.Since(start))
			}
			continue
		}
		if commitErr == nil && wait != nil {
			handedOff = true
			// Requests already queued, or set aside, make the next group,
			// which the acknowledger may then wait for.
			p.running.Store(len(db.queue) > 0 || len(aside) > 0 || len(p.carry) > 0)
			p.acks <- durableGroup{pending: pending, wait: wait, start: start}
			return aside
		}
		db.answer(pending, commitErr, start)
		return aside
	}
	return aside
}

// refusedAtCommit returns the index in the group of the request whose
// statement held for the commit (Tx.ExecAtCommit) failed commitErr, and
// the statement's error; -1 when commitErr is not such a failure. owners
// maps the statements to the requests.
func refusedAtCommit(commitErr error, owners []int) (int, error) {
	var ce *storage.CommitExecError
	if !errors.As(commitErr, &ce) || ce.Index < 0 || ce.Index >= len(owners) || owners[ce.Index] < 0 {
		return -1, nil
	}
	return owners[ce.Index], ce.Err
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
		if r.trace != nil {
			r.trace.commitStart, r.trace.answeredAt, r.trace.groupSize = start, time.Now(), len(pending)
		}
		if r.err == nil && r.panicValue == nil {
			r.err = commitErr
		}
		if r.err == nil && len(r.notes) > 0 {
			db.fireNotes(r.notes)
		}
		finishOne(r)
	}
}

// run calls fn, turning a panic into a value handed back to the caller's
// goroutine, where it is raised again.
//
//lint:ignore ST1008 the panic value rides beside the error recover turned it into
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

func finishOne(r *request) { r.done <- struct{}{} }

// storeTreeRanges stores the compact ranges the committer's cache holds
// ahead of the store (see treeRangeLagMax), at Close, so that a file
// closed cleanly has every range at its chain's head. A failure is logged:
// the next Open for writing extends the ranges from the entries.
func (db *DB) storeTreeRanges(p *pipeline) {
	if p.trees == nil || db.readOnly {
		return
	}
	stx, err := db.backend.Begin(context.Background(), true)
	if err == nil {
		if err = p.trees.flushCache(context.Background(), stx); err == nil {
			err = stx.Commit()
		} else {
			stx.Rollback()
		}
	}
	if err != nil {
		db.log.Warn("chain trees' ranges not stored at close", "err", err)
	}
}
