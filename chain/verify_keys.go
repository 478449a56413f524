package chain

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/ledgerworks/ledger/storage"
)

// Verify checks the idempotency key index with one index read per keyed
// entry. Those reads are random, unlike the scan of the entries, and would
// double the time of a verify on the scanning goroutine; a chain with many
// keys has them checked by workers, one per two CPUs, each in a read transaction
// of its own, while the scan goes on. Those transactions start after the
// scan's, and keys are never removed or moved, so they map every key the scan
// sees as the scan's snapshot does.
const (
	// keyCheckBatchSize is how many keys one hand-off carries; a chain with
	// fewer keyed entries is checked on the scanning goroutine.
	keyCheckBatchSize = 512
	// keyCheckBatchesPerWorker bounds the batches in flight per worker.
	keyCheckBatchesPerWorker = 4
)

// keyCheck is one keyed entry to look up. The key aliases the stored bytes
// of the scan's read transaction, which stays open until the checker is done.
type keyCheck struct {
	seq uint64
	key string
}

// keyIndexChecker checks that the key index maps each keyed entry's key to
// the entry's seq.
type keyIndexChecker struct {
	db      *DB
	ctx     context.Context
	tx      *Tx // the scan's transaction, for a chain with few keys
	chain   string
	batch   []keyCheck
	work    chan []keyCheck // nil until the first full batch
	free    chan []keyCheck
	workers []*keyWorker
	wg      sync.WaitGroup
	failed  chan struct{} // closed when a worker met an operating failure
	once    sync.Once
}

// keyWorker is one goroutine of a checker; its fields are read once the
// checker's WaitGroup is done.
type keyWorker struct {
	failures []Failure
	err      error
}

func (db *DB) newKeyIndexChecker(ctx context.Context, tx *Tx, chain string) *keyIndexChecker {
	return &keyIndexChecker{db: db, ctx: ctx, tx: tx, chain: chain, batch: make([]keyCheck, 0, keyCheckBatchSize)}
}

// add queues the key of the entry at seq. The error is an operating failure
// of a worker, seen at a hand-off.
func (k *keyIndexChecker) add(seq uint64, key string) error {
	k.batch = append(k.batch, keyCheck{seq: seq, key: key})
	if len(k.batch) < keyCheckBatchSize {
		return nil
	}
	if k.work == nil {
		if err := k.start(); err != nil {
			return err
		}
	}
	select {
	case k.work <- k.batch:
	case <-k.failed:
		return k.err()
	}
	select {
	case k.batch = <-k.free:
		k.batch = k.batch[:0]
	default:
		k.batch = make([]keyCheck, 0, keyCheckBatchSize)
	}
	return nil
}

// start begins a read transaction per worker, one worker per two CPUs: the
// lookups are CPU-bound and independent, and the hashing pool of the scan
// already has a worker per CPU (on 2 CPUs, two key workers measured slower
// than one).
func (k *keyIndexChecker) start() error {
	workers := max(runtime.GOMAXPROCS(0)/2, 1)
	k.work = make(chan []keyCheck, workers*keyCheckBatchesPerWorker)
	k.free = make(chan []keyCheck, workers*keyCheckBatchesPerWorker+1)
	k.failed = make(chan struct{})
	for range workers {
		stx, err := k.db.backend.Begin(k.ctx, false)
		if err != nil {
			k.stop()
			return storageError(err)
		}
		w := &keyWorker{}
		k.workers = append(k.workers, w)
		k.wg.Add(1)
		go func() {
			defer k.wg.Done()
			defer stx.Rollback()
			add := func(f Failure) { w.failures = append(w.failures, f) }
			for batch := range k.work {
				if w.err != nil {
					continue // drained, so that the scan never waits
				}
				for _, c := range batch {
					if w.err = checkKey(k.ctx, stx, k.chain, c, add); w.err != nil {
						k.once.Do(func() { close(k.failed) })
						break
					}
				}
				select {
				case k.free <- batch:
				default:
				}
			}
		}()
	}
	return nil
}

// finish checks what is left, waits for the workers and hands the failures
// to add, in seq order.
func (k *keyIndexChecker) finish(add func(Failure)) error {
	if k.work == nil {
		for _, c := range k.batch {
			if err := checkKey(k.ctx, k.tx.stx, k.chain, c, add); err != nil {
				return err
			}
		}
		return nil
	}
	select {
	case k.work <- k.batch:
	case <-k.failed:
	}
	workers := k.workers
	k.stop()
	var failures []Failure
	for _, w := range workers {
		if w.err != nil {
			return w.err
		}
		failures = append(failures, w.failures...)
	}
	slices.SortFunc(failures, func(a, b Failure) int { return cmp.Compare(a.Seq, b.Seq) })
	for _, f := range failures {
		add(f)
	}
	return nil
}

// err returns the first worker's error; the workers must be done.
func (k *keyIndexChecker) err() error {
	k.stop()
	for _, w := range k.workers {
		if w.err != nil {
			return w.err
		}
	}
	return nil
}

// stop ends the workers, if any, and waits for them: they read keys that
// alias the scan's transaction. Calling it again does nothing.
func (k *keyIndexChecker) stop() {
	if k.work == nil {
		return
	}
	close(k.work)
	k.wg.Wait()
	k.work = nil
	k.batch = nil
}

// checkKey looks one key up. The key aliases stored bytes, so a failure's
// detail copies it.
func checkKey(ctx context.Context, stx storage.Tx, chain string, c keyCheck, add func(Failure)) error {
	seq, err := stx.LookupKey(ctx, chain, c.key)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		add(Failure{Chain: chain, Seq: c.seq, Reason: ReasonKeyIndexMismatch,
			Detail: fmt.Sprintf("key %q is not in the key index", c.key)})
	case err != nil:
		return storageError(err)
	case seq != c.seq:
		add(Failure{Chain: chain, Seq: c.seq, Reason: ReasonKeyIndexMismatch,
			Detail: fmt.Sprintf("the key index maps key %q to seq %d", c.key, seq)})
	}
	return nil
}
