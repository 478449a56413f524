package chain

import (
	"context"

	"fmt"
	"iter"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// Options configure a DB. The zero value is ready to use.
type Options struct {
	// Clock returns the time recorded on new entries; time.Now when nil.
	// Entry times never decrease within a chain (see Tx.Append).
	Clock func() time.Time
	// PayloadSizeMax bounds payloads; PayloadSizeMaxDefault when zero.
	// It may not exceed PayloadSizeLimit.
	PayloadSizeMax int
	// BatchSizeMax bounds how many requests one group commit takes;
	// BatchSizeMaxDefault when zero.
	BatchSizeMax int
	// LockTimeout is how long Open waits for another process's lock on the
	// file (bbolt only); bolt.LockTimeoutDefault when zero.
	LockTimeout time.Duration
	// ReadOnly opens the file for reading under a shared lock (bbolt only).
	ReadOnly bool
	// Logger receives structured logs; slog.Default() when nil.
	Logger *slog.Logger
	// Metrics receives counters and timings; none when nil.
	Metrics Metrics
	// TracerProvider, when set, makes every Update, Append and
	// AppendBatch that queues for the committer, from a context that
	// holds a recording span, a span under it that records the group
	// commit it joined (see the package documentation, Tracing). None
	// when nil: the committer then reads no clock for tracing.
	TracerProvider trace.TracerProvider
	// NoTrees stops the upkeep of the chains' Merkle trees on append (see
	// tree.go), to measure what it costs. Proofs and checkpoints then
	// refuse the chains whose trees fell behind (ErrTreeBehind); the next
	// Open for writing without NoTrees brings them up to date.
	NoTrees bool
}

// Metrics is the engine's view of a metrics system; adapt it to yours.
type Metrics interface {
	// GroupCommitted reports one storage transaction: how many requests it
	// carried and how long the commit (with its fsync) took.
	GroupCommitted(requests int, commitDuration time.Duration)
	// Replayed counts an append answered from an existing entry.
	Replayed()
}

// DB is a ledger: a set of hash chains in one store.
type DB struct {
	backend  storage.Backend
	opts     Options
	clock    func() time.Time
	log      *slog.Logger
	metrics  Metrics
	tracer   trace.Tracer // nil without Options.TracerProvider
	readOnly bool
	// prober, when the backend has one, rules new keys out without a read
	// transaction (see Append).
	prober storage.KeyProber
	// keyReader, when the backend has one, answers a retry in one call
	// (see Append); it is asked instead of prober.
	keyReader storage.KeyReader
	// replayUnlocked is set when keyReader may run beside the backend's
	// Close (storage.KeyReaderBesideClose): a replay then takes no lock.
	replayUnlocked bool

	queue   chan *request
	closing chan struct{}
	stopped chan struct{}

	mu sync.RWMutex // held for reading by every call, for writing by Close
	// closed is set by Close under mu. It is an atomic for the replays
	// that take no lock (replayUnlocked): a word that replaying goroutines
	// only read, where RLock and RUnlock write the mutex's reader count, a
	// cache line that moved between the cores on every replay.
	closed atomic.Bool

	// notes holds the subscriptions to commit notifications (notify.go).
	notes notifier
}

// Open opens or creates the ledger file at path with the embedded bbolt
// backend.
func Open(path string, opts Options) (*DB, error) {
	backend, err := bolt.Open(path, bolt.Options{LockTimeout: opts.LockTimeout, ReadOnly: opts.ReadOnly, EntryKey: RecordKey, Logger: opts.Logger})
	if err != nil {
		return nil, storageError(err)
	}
	db, err := OpenBackend(backend, opts)
	if err != nil {
		backend.Close()
		return nil, err
	}
	return db, nil
}

// OpenBackend opens a ledger on any storage backend. The DB owns the backend
// from then on: Close closes it.
func OpenBackend(backend storage.Backend, opts Options) (*DB, error) {
	if opts.PayloadSizeMax < 0 || opts.PayloadSizeMax > PayloadSizeLimit {
		return nil, fmt.Errorf("chain: PayloadSizeMax %d outside 0..%d", opts.PayloadSizeMax, PayloadSizeLimit)
	}
	if opts.PayloadSizeMax == 0 {
		opts.PayloadSizeMax = PayloadSizeMaxDefault
	}
	if opts.BatchSizeMax <= 0 {
		opts.BatchSizeMax = BatchSizeMaxDefault
	}
	db := &DB{
		backend:  backend,
		opts:     opts,
		clock:    opts.Clock,
		log:      opts.Logger,
		metrics:  opts.Metrics,
		tracer:   tracerOf(opts.TracerProvider),
		readOnly: opts.ReadOnly,
		queue:    make(chan *request, opts.BatchSizeMax),
		closing:  make(chan struct{}),
		stopped:  make(chan struct{}),
	}
	if db.clock == nil {
		db.clock = time.Now
	}
	if u, ok := backend.(storage.EntryKeyUser); ok {
		u.UseEntryKey(RecordKey)
	}
	db.prober, _ = backend.(storage.KeyProber)
	db.keyReader, _ = backend.(storage.KeyReader)
	if r, ok := backend.(storage.KeyReaderBesideClose); ok {
		db.replayUnlocked = r.ReadKeyBesideClose()
	}
	if db.log == nil {
		db.log = slog.Default()
	}
	go db.commitLoop()
	if !db.readOnly && !opts.NoTrees {
		if err := db.catchUpTrees(context.Background()); err != nil {
			db.stopCommitter() // the caller still owns the backend and closes it
			return nil, fmt.Errorf("chain: bringing the Merkle trees up to date: %w", err)
		}
	}
	return db, nil
}

// Backend returns the store the DB writes to.
func (db *DB) Backend() storage.Backend { return db.backend }

// Close waits for queued appends, stops the committer and closes the store.
func (db *DB) Close() error {
	db.mu.Lock()
	if db.closed.Load() {
		db.mu.Unlock()
		return nil
	}
	db.closed.Store(true)
	db.mu.Unlock()
	close(db.closing)
	<-db.stopped
	db.closeNotes()
	return storageError(db.backend.Close())
}

// stopCommitter stops the committer of a DB that OpenBackend fails to
// return, leaving the backend open.
func (db *DB) stopCommitter() {
	db.closed.Store(true)
	close(db.closing)
	<-db.stopped
}

// enter guards every call against a closed DB; when it returns nil, the
// caller calls db.mu.RUnlock when it is done (a returned func would cost
// every call an allocation).
func (db *DB) enter() error {
	db.mu.RLock()
	if db.closed.Load() {
		db.mu.RUnlock()
		return ErrClosed
	}
	return nil
}

// Append appends one entry, or returns the entry an earlier request with the
// same idempotency key recorded. A replay reads only: it takes no write lock
// and waits for no fsync. Concurrent appends share group commits. When a
// group holds appends on at least four chains, its appends take one time
// from the clock, and each chain's first one has its hash computed side by
// side with the others' (hashGroupInLanes).
//
// A key the backend's KeyProber rules out goes straight to the committer:
// most appends carry a new key, and the read transaction that would look it
// up costs as much as the rest of the append's work. The committer's
// transaction looks every key up again, and that lookup decides, so a key
// the prober wrongly ruled out (a commit racing this call) is still
// answered with its entry, as Replayed.
//
// A backend that is a storage.KeyReader does the probe, the lookup and the
// read of a retry's entry in one call, without a Tx; its "absent" is a hint
// like the probe's, and goes to the committer the same way.
func (db *DB) Append(ctx context.Context, req Request) (Result, error) {
	if err := ValidateRequest(req, db.opts.PayloadSizeMax); err != nil {
		return Result{}, err
	}
	// A context that has ended ends the call here, whichever way it would
	// go: Update's queueing would race it against the committer.
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	if req.IdempotencyKey != "" && (db.keyReader != nil || db.prober == nil || db.prober.MayHoldKey(req.Chain, req.IdempotencyKey)) {
		res, found, err := db.replayed(ctx, req)
		if err != nil || found {
			if found && db.metrics != nil {
				db.metrics.Replayed()
			}
			return res, err
		}
	}
	r := newRequest(ctx, nil)
	r.appendReq = req
	if err := db.submit(r); err != nil {
		return Result{}, err
	}
	res, err := r.appendRes, r.err
	r.release()
	if err == nil && res.Replayed && db.metrics != nil {
		db.metrics.Replayed()
	}
	return res, err
}

// AppendBatch appends reqs in one transaction, as Update with
// Tx.AppendBatch would, and appends their results to results: every new
// entry is committed, durably, or none is.
//
// A retried batch is answered without the writer: when every request
// carries an idempotency key that the ledger already maps to the same
// request, their entries are read as Append reads one retry (on a backend
// that is a storage.KeyBatchReader, all of them in one call), and returned
// as Replayed. When a request before the first new key conflicts with its
// key's entry, the batch fails with its *ConflictError, as it would in a
// transaction. Otherwise the batch runs in a transaction, which decides.
//
// On an error nothing is written and results comes back as it was given.
// An invalid request fails the batch before anything is read.
func (db *DB) AppendBatch(ctx context.Context, reqs []Request, results []Result) ([]Result, error) {
	for _, req := range reqs {
		if err := ValidateRequest(req, db.opts.PayloadSizeMax); err != nil {
			return results, err
		}
	}
	if err := ctx.Err(); err != nil {
		return results, err
	}
	out, found, err := db.replayedBatch(ctx, reqs, results)
	if err != nil || found {
		return out, err
	}
	err = db.Update(ctx, func(tx *Tx) error {
		var err error
		out, err = tx.AppendBatch(reqs, results) // from results' length again if fn runs again
		return err
	})
	if err != nil {
		return results, err
	}
	replays := 0
	for _, res := range out[len(results):] {
		if res.Replayed {
			replays++
		}
	}
	db.countReplays(replays)
	return out, nil
}

// replayed looks req's key up, with the backend's KeyReader or in a read
// transaction as View would, and returns its entry; found is false when the
// key is new (or, from a KeyReader, ruled out).
func (db *DB) replayed(ctx context.Context, req Request) (res Result, found bool, err error) {
	if db.replayUnlocked {
		if db.closed.Load() {
			return Result{}, false, ErrClosed
		}
		return db.readKey(ctx, req)
	}
	if err := db.enter(); err != nil {
		return Result{}, false, err
	}
	defer db.mu.RUnlock()
	if db.keyReader != nil {
		return db.readKey(ctx, req)
	}
	stx, err := db.backend.Begin(ctx, false)
	if err != nil {
		return Result{}, false, storageError(err)
	}
	defer stx.Rollback()
	tx := Tx{db: db, ctx: ctx, stx: stx}
	return tx.replay(req)
}

// readKey answers req from the backend's KeyReader in one call.
func (db *DB) readKey(ctx context.Context, req Request) (res Result, found bool, err error) {
	seq, data, found, err := db.keyReader.ReadKey(ctx, req.Chain, req.IdempotencyKey)
	if err != nil || !found {
		return Result{}, false, storageError(err)
	}
	return replayRecord(req, seq, data, true)
}

// Update runs fn in a write transaction: every append fn makes is committed
// together, or none is. fn may run more than once when another request in the
// same group commit fails after writing, so it must not have effects outside
// tx; the results it captures from its last run are the ones committed. fn
// runs on the committer's goroutine: it must not call the DB's Append or
// Update (that would wait for itself).
func (db *DB) Update(ctx context.Context, fn func(tx *Tx) error) error {
	r := newRequest(ctx, fn)
	if err := db.submit(r); err != nil {
		return err
	}
	err := r.err
	r.release()
	return err
}

// submit queues r for the committer and waits for its answer, which it
// leaves in r; a panic of the request's function is raised again here. It
// returns an error, with r not answered and not to be reused, when the
// DB is closed or read-only or ctx ends before the committer took r.
func (db *DB) submit(r *request) error {
	if db.tracer != nil {
		return db.submitTraced(r, r.spanName())
	}
	return db.submitQueued(r)
}

// submitQueued is submit without tracing.
func (db *DB) submitQueued(r *request) error {
	if err := db.enter(); err != nil {
		return err
	}
	defer db.mu.RUnlock()
	if db.readOnly {
		return ErrReadOnly
	}
	select {
	case db.queue <- r:
	case <-r.ctx.Done():
		return r.ctx.Err()
	}
	select {
	case <-r.done:
	case <-r.ctx.Done():
		if r.state.CompareAndSwap(requestQueued, requestCanceled) {
			return r.ctx.Err() // the committer skips r when it meets it in the queue
		}
		<-r.done // already running: its outcome is decided by the commit
	}
	if r.panicValue != nil {
		panic(r.panicValue)
	}
	return nil
}

// View runs fn in a read-only transaction that sees one consistent snapshot.
func (db *DB) View(ctx context.Context, fn func(tx *Tx) error) error {
	if err := db.enter(); err != nil {
		return err
	}
	defer db.mu.RUnlock()
	stx, err := db.backend.Begin(ctx, false)
	if err != nil {
		return storageError(err)
	}
	defer stx.Rollback()
	return fn(&Tx{db: db, ctx: ctx, stx: stx})
}

// Get returns the entry at (chain, seq).
func (db *DB) Get(ctx context.Context, chain string, seq uint64) (Entry, error) {
	var e Entry
	err := db.View(ctx, func(tx *Tx) error {
		var err error
		e, err = tx.Get(chain, seq)
		return err
	})
	return e, err
}

// Lookup returns the entry of the chain that holds the idempotency key.
func (db *DB) Lookup(ctx context.Context, chain, key string) (Entry, error) {
	var e Entry
	err := db.View(ctx, func(tx *Tx) error {
		var err error
		e, err = tx.Lookup(chain, key)
		return err
	})
	return e, err
}

// Head returns the chain's head; ErrNotFound for a chain with no entries.
func (db *DB) Head(ctx context.Context, chain string) (Head, error) {
	var h Head
	err := db.View(ctx, func(tx *Tx) error {
		var err error
		h, err = tx.Head(chain)
		return err
	})
	return h, err
}

// Chains yields every chain's head in byte order of the chain ids, starting
// at the first id >= from. It reads in pages, so it holds no transaction
// open between pages and bounded memory throughout.
func (db *DB) Chains(ctx context.Context, from string) iter.Seq2[Head, error] {
	return pages(ctx, db, from, func(tx *Tx, cursor string) iter.Seq2[Head, error] {
		return tx.Chains(cursor)
	}, func(h Head) string { return h.Chain + "\x00" })
}

// Entries yields the chain's entries with seq >= fromSeq in order. It reads
// in pages of bounded size, holding no transaction open between pages.
func (db *DB) Entries(ctx context.Context, chain string, fromSeq uint64) iter.Seq2[Entry, error] {
	return pages(ctx, db, fromSeq, func(tx *Tx, cursor uint64) iter.Seq2[Entry, error] {
		return tx.Entries(chain, cursor)
	}, func(e Entry) uint64 { return e.Seq + 1 })
}

// pageSize is how many items one read transaction of a paged iterator yields.
const pageSize = 1024

// pages turns a transaction's iterator into one that reopens a read
// transaction every pageSize items, resuming at next(last item).
func pages[T any, C any](ctx context.Context, db *DB, start C,
	open func(tx *Tx, cursor C) iter.Seq2[T, error], next func(T) C) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		cursor := start
		for {
			var page []T
			err := db.View(ctx, func(tx *Tx) error {
				for item, err := range open(tx, cursor) {
					if err != nil {
						return err
					}
					page = append(page, item)
					if len(page) == pageSize {
						break
					}
				}
				return nil
			})
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, item := range page {
				if !yield(item, nil) {
					return
				}
			}
			if len(page) < pageSize {
				return
			}
			cursor = next(page[len(page)-1])
		}
	}
}

// Stats describes the ledger.
type Stats struct {
	Chains    int64
	Entries   int64
	SizeBytes int64
}

// Stats counts chains and entries (from the heads) and asks the store for
// its size.
func (db *DB) Stats(ctx context.Context) (Stats, error) {
	var s Stats
	for h, err := range db.Chains(ctx, "") {
		if err != nil {
			return Stats{}, err
		}
		s.Chains++
		s.Entries += int64(h.Seq)
	}
	st, err := db.backend.Stats(ctx)
	if err != nil {
		return Stats{}, storageError(err)
	}
	s.SizeBytes = st.SizeBytes
	return s, nil
}
