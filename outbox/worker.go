package outbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/ledgerworks/ledger/chain"
)

// Delivery is one attempt handed to a handler.
type Delivery struct {
	Lease
	// Detail, when the handler sets it, is recorded with the outcome (the
	// gateway's answer, a receipt number); otherwise an error's text is.
	Detail string
}

// Handler delivers one message. It returns nil when the message was
// delivered, an error wrapping ErrPermanent (see Permanent) when it never
// can be (the message is dead-lettered), and any other error to have it
// retried after a backoff. ctx ends when the lease is lost or the worker
// is stopped. The receiver should dedupe on d.Message.Key, which is the
// same on every attempt.
type Handler func(ctx context.Context, d *Delivery) error

// Topic is a worker's configuration of one topic.
type Topic struct {
	// Handler is required.
	Handler Handler
	// Policy bounds attempts and age and shapes the backoff.
	Policy Policy
	// Timeout bounds one handler call; when zero, the longest the lease
	// allows (two thirds of it). NewWorker refuses a timeout whose
	// LeaseFor is longer than the worker's lease.
	Timeout time.Duration
}

// LeaseFor is the shortest lease NewWorker accepts for a handler timeout:
// the timeout and half of it again, so that a lease outlives the handler
// call and the recording of its outcome even when no heartbeat lands.
// Otherwise another worker could claim the message while the receiver
// still processes it, and a slow receiver would be attempted again for a
// request it answers.
func LeaseFor(timeout time.Duration) time.Duration { return timeout + timeout/2 }

// WorkerOptions configure a Worker. Tenant and at least one topic are
// required; every other zero value picks the documented default.
type WorkerOptions struct {
	Tenant string
	// Topics maps each topic this worker delivers to its configuration.
	Topics map[string]Topic
	// ID names the worker on its leases and outcomes; host:pid:random
	// when empty.
	ID string
	// Concurrency is how many handler calls of a topic run at once;
	// ConcurrencyDefault when zero.
	Concurrency int
	// ClaimBatch is the most messages one claim leases, 1..ClaimBatchMax;
	// 2·Concurrency (at most ClaimBatchMax) when zero. A worker holds at
	// most Concurrency+ClaimBatch leases of a topic waiting for or in a
	// handler, and at most Concurrency+2·ClaimBatch in all: the next batch
	// is claimed while the outcomes of the one before are recorded.
	ClaimBatch int
	// LeaseDuration is how long a claim leases a message; heartbeats
	// extend it while the handler runs. When zero, LeaseDurationDefault,
	// or LeaseFor of the longest topic Timeout when that is longer.
	LeaseDuration time.Duration
	// PollInterval is how often the worker looks for due messages when no
	// notification wakes it; PollIntervalDefault when zero.
	PollInterval time.Duration
	// BacklogInterval is how often Metrics.Backlog is reported; 10 s when
	// zero; never when Metrics is nil.
	BacklogInterval time.Duration
	// Clock is the time leases and backoffs are computed from; time.Now
	// when nil.
	Clock func() time.Time
	// Logger receives errors and refused outcomes; slog.Default() when nil.
	Logger *slog.Logger
	// Metrics receives counters and timings; none when nil.
	Metrics Metrics
	// TracerProvider, when set, makes each delivery attempt a span (see
	// the package documentation, Tracing); none when nil.
	TracerProvider trace.TracerProvider
}

// Worker delivers a tenant's messages: per topic, a loop claims due
// messages in batches, Concurrency goroutines call the handler, and the
// outcomes are recorded in batches. It wakes on the commits that enqueue
// (chain.DB.Subscribe; LISTEN/NOTIFY on PostgreSQL) and polls as a
// fallback. Several workers, in one process or many, may deliver the same
// topics: a message is leased to one of them at a time.
type Worker struct {
	db      *chain.DB
	opts    WorkerOptions
	metrics Metrics
	log     *slog.Logger
	clock   func() time.Time
	tracer  trace.Tracer // nil without Options.TracerProvider

	mu      sync.Mutex
	started bool
	stop    context.CancelFunc // ends the claim loops
	abort   context.CancelFunc // ends the handlers' contexts
	done    sync.WaitGroup
}

// NewWorker checks the options and returns a worker; Start runs it.
func NewWorker(db *chain.DB, o WorkerOptions) (*Worker, error) {
	if _, err := chain.ScopedName(o.Tenant, Domain); err != nil {
		return nil, invalid("tenant", ErrInvalidName, "tenant %q: %v", o.Tenant, err)
	}
	if len(o.Topics) == 0 {
		return nil, invalid("topics", ErrInvalidOptions, "a worker needs at least one topic")
	}
	for name, t := range o.Topics {
		if err := validateNames(o.Tenant, name); err != nil {
			return nil, err
		}
		if t.Handler == nil {
			return nil, invalid("topics", ErrInvalidOptions, "topic %q has no handler", name)
		}
	}
	if o.ID == "" {
		o.ID = defaultWorkerID()
	}
	if err := validWorker(o.ID); err != nil {
		return nil, err
	}
	if o.Concurrency <= 0 {
		o.Concurrency = ConcurrencyDefault
	}
	if o.ClaimBatch == 0 {
		o.ClaimBatch = min(2*o.Concurrency, ClaimBatchMax)
	}
	if o.ClaimBatch < 1 || o.ClaimBatch > ClaimBatchMax {
		return nil, invalid("claim_batch", ErrInvalidOptions, "claim batch %d, want 1..%d", o.ClaimBatch, ClaimBatchMax)
	}
	for name, t := range o.Topics {
		if t.Timeout < 0 || t.Timeout > LeaseDurationMax {
			return nil, invalid("timeout", ErrInvalidOptions, "topic %q: timeout %v, want 0..%v", name, t.Timeout, LeaseDurationMax)
		}
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = LeaseDurationDefault
		for _, t := range o.Topics {
			o.LeaseDuration = max(o.LeaseDuration, LeaseFor(t.Timeout))
		}
	}
	var err error
	if o.LeaseDuration, err = leaseDuration(o.LeaseDuration); err != nil {
		return nil, err
	}
	for name, t := range o.Topics {
		if LeaseFor(t.Timeout) > o.LeaseDuration {
			return nil, invalid("timeout", ErrTimeoutBeyondLease, "topic %q: a handler timeout of %v needs a lease of at least %v (LeaseFor), the lease is %v",
				name, t.Timeout, LeaseFor(t.Timeout), o.LeaseDuration)
		}
	}
	if o.PollInterval <= 0 {
		o.PollInterval = PollIntervalDefault
	}
	if o.BacklogInterval <= 0 {
		o.BacklogInterval = 10 * time.Second
	}
	w := &Worker{db: db, opts: o, metrics: o.Metrics, log: o.Logger, clock: o.Clock}
	if w.metrics == nil {
		w.metrics = nopMetrics{}
	}
	if w.log == nil {
		w.log = slog.Default()
	}
	if w.clock == nil {
		w.clock = time.Now
	}
	if o.TracerProvider != nil {
		w.tracer = o.TracerProvider.Tracer(TracerName)
	}
	return w, nil
}

func defaultWorkerID() string {
	host, _ := os.Hostname()
	var r [4]byte
	_, _ = rand.Read(r[:])
	return cut(fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(r[:])), WorkerIDLengthMax)
}

// ID returns the worker's id, as recorded on its leases.
func (w *Worker) ID() string { return w.opts.ID }

// Start starts the worker's goroutines and returns. It fails when the
// worker runs already or cannot subscribe to its topics' notifications.
// ctx bounds the subscription set-up only; Stop ends the worker.
func (w *Worker) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return errors.New("outbox: worker started twice")
	}
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	handlerCtx, abort := context.WithCancel(context.WithoutCancel(ctx))
	var runners []*topicRunner
	for name, t := range w.opts.Topics {
		sub, err := w.db.Subscribe(ctx, Channel(w.opts.Tenant, name))
		if err != nil {
			stop()
			abort()
			for _, r := range runners {
				r.sub.Close()
			}
			return err
		}
		runners = append(runners, newTopicRunner(w, name, t, sub))
	}
	w.started, w.stop, w.abort = true, stop, abort
	for _, r := range runners {
		w.done.Add(1)
		go func() {
			defer w.done.Done()
			defer r.sub.Close()
			r.run(runCtx, handlerCtx)
		}()
	}
	return nil
}

// Stop stops claiming, lets the handlers that run finish and records their
// outcomes, and returns when all is done. When ctx ends first, the
// handlers' contexts are canceled (their outcomes, transient errors, are
// still recorded) and Stop returns ctx's error once they have.
func (w *Worker) Stop(ctx context.Context) error {
	w.mu.Lock()
	if !w.started {
		w.mu.Unlock()
		return nil
	}
	w.started = false
	stop, abort := w.stop, w.abort
	w.mu.Unlock()
	stop()
	finished := make(chan struct{})
	go func() { w.done.Wait(); close(finished) }()
	select {
	case <-finished:
		abort()
		return nil
	case <-ctx.Done():
		abort()
		<-finished
		return ctx.Err()
	}
}

// topicRunner delivers one topic.
type topicRunner struct {
	w     *Worker
	topic string
	t     Topic
	sub   *chain.Subscription

	jobs     chan *inflight
	outcomes chan finished
	freed    chan struct{} // a value after outcomes were recorded, or a handler returned while roomWanted

	mu       sync.Mutex
	inflight map[inflightKey]*inflight
	handled  int // leases of inflight whose handler returned, outcome not yet recorded
	// roomWanted is set while the claim loop waits for handlers to free
	// room: only then does a returning handler wake it (otherwise every
	// delivery would wake it twice, and each wake may run a claim).
	roomWanted bool
}

type inflightKey struct {
	id    ID
	token uint64
}

type inflight struct {
	d Delivery // the handler's
	// lease and deadline are the heartbeat's copy, under the runner's mu.
	lease    Lease
	deadline time.Time
	cancel   context.CancelFunc // ends the handler's context
}

type finished struct {
	outcome Outcome
}

func newTopicRunner(w *Worker, name string, t Topic, sub *chain.Subscription) *topicRunner {
	if t.Timeout <= 0 {
		t.Timeout = w.opts.LeaseDuration * 2 / 3
	}
	return &topicRunner{w: w, topic: name, t: t, sub: sub,
		jobs:     make(chan *inflight, capacity(&w.opts)),
		outcomes: make(chan finished, capacity(&w.opts)),
		freed:    make(chan struct{}, 1),
		inflight: map[inflightKey]*inflight{}}
}

// capacity is the most leases a runner holds at once: Concurrency +
// ClaimBatch waiting for or in a handler, and a batch more whose handlers
// returned and whose outcomes are being recorded. So the next claim
// commits (and its messages are read) while the outcomes of the batch
// before commit, instead of after them; and no more messages wait for a
// slow handler than without that room.
func capacity(o *WorkerOptions) int { return o.Concurrency + 2*o.ClaimBatch }

func (r *topicRunner) run(runCtx, handlerCtx context.Context) {
	var handlers, recorder, beats sync.WaitGroup
	for range r.w.opts.Concurrency {
		handlers.Add(1)
		go func() {
			defer handlers.Done()
			r.handle(handlerCtx)
		}()
	}
	recorder.Add(1)
	go func() {
		defer recorder.Done()
		r.record()
	}()
	beatCtx, stopBeats := context.WithCancel(context.Background())
	beats.Add(1)
	go func() {
		defer beats.Done()
		r.heartbeat(beatCtx)
	}()
	r.claimLoop(runCtx)
	close(r.jobs)
	handlers.Wait()
	close(r.outcomes)
	recorder.Wait()
	stopBeats()
	beats.Wait()
}

// held returns how many leases the runner holds, and how many of them
// wait for their outcome's record only.
func (r *topicRunner) held() (held, handled int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.roomWanted = false
	return len(r.inflight), r.handled
}

// waitRoom asks the handlers to wake the claim loop when one returns. It
// reports false when one returned since held (handled changed): the loop
// counts again instead of waiting.
func (r *topicRunner) waitRoom(handled int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.handled != handled {
		return false
	}
	r.roomWanted = true
	return true
}

func (r *topicRunner) claimLoop(ctx context.Context) {
	o := &r.w.opts
	backlog := time.NewTicker(o.BacklogInterval)
	defer backlog.Stop()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		held, handled := r.held()
		free := min(o.Concurrency+o.ClaimBatch-(held-handled), capacity(o)-held)
		asked, got := min(free, o.ClaimBatch), 0
		// While handlers are busy, claim only once half a batch is free:
		// every claim reads the ready index from its floor and the lease
		// index from its start, so many small claims cost more than a few
		// large ones.
		if held > 0 && asked < o.ClaimBatch/2 {
			asked = 0
		}
		var next time.Time
		if asked > 0 {
			c, err := r.claim(ctx, asked)
			if err != nil && ctx.Err() == nil {
				r.w.log.Error("outbox: claim failed", "tenant", o.Tenant, "topic", r.topic, "err", err)
			}
			got, next = len(c.Leases), c.NextDue
		}
		if ctx.Err() != nil {
			return
		}
		if got == asked && asked > 0 {
			continue // there may be more
		}
		if asked == 0 {
			if !r.waitRoom(handled) {
				continue
			}
			next = time.Time{} // woken by r.freed
		}
		wait := o.PollInterval
		if !next.IsZero() && free > got {
			wait = min(wait, max(next.Sub(r.w.clock()), time.Millisecond))
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-r.sub.C:
		case <-r.freed:
		case <-timer.C:
		case <-backlog.C:
			if r.w.opts.Metrics != nil {
				r.reportBacklog(ctx)
			}
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// claimReadInlineMax is the largest claim whose messages a worker reads
// in the claim's own transaction. A larger one's are read after it
// commits (see claimTx), which frees the writer every claim and outcome
// shares; a small one, the claim of a message just enqueued, saves a
// transaction (on PostgreSQL, round trips) between commit and handler.
const claimReadInlineMax = 64

func (r *topicRunner) claim(ctx context.Context, n int) (Claim, error) {
	o := &r.w.opts
	var c Claim
	messages, _ := MessagesChain(o.Tenant, r.topic)
	read := false
	err := r.w.db.Update(ctx, func(tx *chain.Tx) error {
		var err error
		c, err = claimTx(tx, o.Tenant, r.topic, ClaimOptions{Worker: o.ID, Max: n, LeaseDuration: o.LeaseDuration,
			Now: r.w.clock(), Policy: r.t.Policy})
		if err != nil || len(c.Leases) > claimReadInlineMax {
			return err
		}
		read = true
		return readMessages(tx, o.Tenant, r.topic, messages, c.Leases)
	})
	if err != nil {
		return Claim{}, err
	}
	if !read {
		// The leases are held: read their messages in a read transaction
		// (see claimTx), retried a few times; a worker that cannot read
		// them leaves the leases to expire, and the messages are attempted
		// again with the same keys.
		err = retried(func() error {
			return r.w.db.View(context.WithoutCancel(ctx), func(tx *chain.Tx) error {
				return readMessages(tx, o.Tenant, r.topic, messages, c.Leases)
			})
		})
		if err != nil {
			return Claim{}, fmt.Errorf("outbox: %d messages leased but not read (their leases will expire): %w", len(c.Leases), err)
		}
	}
	if len(c.Leases) > 0 || c.Expired > 0 {
		r.w.metrics.Claimed(r.topic, len(c.Leases), c.Expired)
	}
	for _, d := range c.Dead {
		r.w.metrics.DeadLettered(r.topic, d.Reason, 1)
	}
	now := r.w.clock()
	r.mu.Lock()
	batch := make([]*inflight, len(c.Leases))
	for i, l := range c.Leases {
		j := &inflight{d: Delivery{Lease: l}, lease: l, deadline: l.Deadline}
		r.inflight[inflightKey{l.Message.ID, l.Token}] = j
		batch[i] = j
		if l.Attempt == 1 {
			r.w.metrics.PickedUp(r.topic, now.Sub(l.Message.EnqueuedAt))
		}
	}
	r.mu.Unlock()
	for _, j := range batch {
		r.jobs <- j // never blocks: the channel holds capacity jobs
	}
	return c, nil
}

func (r *topicRunner) handle(base context.Context) {
	// Each handler goroutine derives its calls' contexts from a parent of
	// its own, so that creating and canceling them does not contend on
	// the lock of one context all the goroutines share.
	base, stop := context.WithCancel(base)
	defer stop()
	for j := range r.jobs {
		ctx, cancel := context.WithTimeout(base, r.t.Timeout)
		r.mu.Lock()
		j.cancel = cancel
		r.mu.Unlock()
		var span trace.Span
		if r.w.tracer != nil {
			ctx, span = startDeliverySpan(ctx, r.w.tracer, r.w.opts.Tenant, &j.d)
		}
		start := time.Now()
		err := callHandler(ctx, r.t.Handler, &j.d)
		if span != nil {
			endDeliverySpan(span, &j.d, err)
		}
		cancel()
		r.mu.Lock()
		r.handled++
		wake := r.roomWanted
		r.roomWanted = false
		r.mu.Unlock()
		if wake {
			select {
			case r.freed <- struct{}{}: // a handler is free: the claim loop may claim ahead
			default:
			}
		}
		r.outcomes <- finished{outcome: Outcome{ID: j.d.Message.ID, Token: j.d.Token, Attempt: j.d.Attempt, Err: err,
			Detail: j.d.Detail, Duration: time.Since(start)}}
	}
}

// callHandler calls h, turning a panic into a transient error.
func callHandler(ctx context.Context, h Handler, d *Delivery) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("outbox: handler panicked: %v", p)
		}
	}()
	return h(ctx, d)
}

// record records outcomes in batches until the channel closes.
func (r *topicRunner) record() {
	batch := make([]Outcome, 0, OutcomeBatchMax)
	for f := range r.outcomes {
		batch = append(batch[:0], f.outcome)
	drain:
		for len(batch) < OutcomeBatchMax {
			select {
			case f, ok := <-r.outcomes:
				if !ok {
					break drain
				}
				batch = append(batch, f.outcome)
			default:
				break drain
			}
		}
		r.recordBatch(batch)
	}
}

func (r *topicRunner) recordBatch(batch []Outcome) {
	o := &r.w.opts
	var rec Recorded
	err := retried(func() error {
		return r.w.db.Update(context.Background(), func(tx *chain.Tx) error {
			var err error
			rec, err = RecordTx(tx, o.Tenant, r.topic, RecordOptions{Worker: o.ID, Now: r.w.clock(), Policy: r.t.Policy}, batch)
			return err
		})
	})
	if err != nil {
		// The leases expire and the messages are attempted again: at
		// least once holds, at the cost of a repeat.
		r.w.log.Error("outbox: recording outcomes failed", "tenant", o.Tenant, "topic", r.topic, "outcomes", len(batch), "err", err)
	}
	lost := 0
	for i, out := range batch {
		if err == nil && rec.Errs[i] != nil {
			lost++
			r.w.log.Warn("outbox: outcome refused", "topic", r.topic, "message", out.ID.String(), "err", rec.Errs[i])
		} else if err == nil {
			kind := Delivered
			switch {
			case errors.Is(out.Err, ErrPermanent):
				kind = Rejected
			case out.Err != nil:
				kind = Failed
			}
			r.w.metrics.Attempted(r.topic, kind, out.Duration)
		}
	}
	if lost > 0 {
		r.w.metrics.LeaseLost(r.topic, lost)
	}
	for _, d := range rec.Dead {
		r.w.metrics.DeadLettered(r.topic, d.Reason, 1)
	}
	r.mu.Lock()
	for _, out := range batch {
		delete(r.inflight, inflightKey{out.ID, out.Token})
	}
	r.handled -= len(batch)
	r.mu.Unlock()
	select {
	case r.freed <- struct{}{}:
	default:
	}
}

// retried calls op until it succeeds, the ledger is closed, or six calls
// have failed, waiting 10 ms, doubling, between them; it returns the last
// call's error.
func retried(op func() error) error {
	for attempt := 0; ; attempt++ {
		err := op()
		if err == nil || errors.Is(err, chain.ErrClosed) || attempt == 5 {
			return err
		}
		time.Sleep(time.Duration(10<<attempt) * time.Millisecond)
	}
}

// heartbeat extends the leases of running handlers every third of the
// lease, and cancels the handlers whose lease was lost.
func (r *topicRunner) heartbeat(ctx context.Context) {
	o := &r.w.opts
	ticker := time.NewTicker(o.LeaseDuration / 3)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		now := r.w.clock()
		var due []*inflight
		r.mu.Lock()
		for _, j := range r.inflight {
			if j.deadline.Sub(now) < o.LeaseDuration*2/3 {
				due = append(due, j)
			}
		}
		r.mu.Unlock()
		for len(due) > 0 {
			part := due[:min(len(due), OutcomeBatchMax)]
			due = due[len(part):]
			r.extend(part, now)
		}
	}
}

func (r *topicRunner) extend(part []*inflight, now time.Time) {
	o := &r.w.opts
	leases := make([]Lease, len(part))
	r.mu.Lock()
	for i, j := range part {
		leases[i] = j.lease
	}
	r.mu.Unlock()
	var errs []error
	err := r.w.db.Update(context.Background(), func(tx *chain.Tx) error {
		var err error
		errs, err = HeartbeatTx(tx, o.Tenant, r.topic, RecordOptions{Worker: o.ID, Now: now}, o.LeaseDuration, leases)
		return err
	})
	if err != nil {
		r.w.log.Error("outbox: heartbeat failed", "topic", r.topic, "err", err)
		return
	}
	lost := 0
	r.mu.Lock()
	for i, j := range part {
		if errs[i] != nil {
			lost++
			if j.cancel != nil {
				j.cancel() // another worker holds it now
			}
			continue
		}
		j.deadline = now.Add(o.LeaseDuration)
	}
	r.mu.Unlock()
	if lost > 0 {
		r.w.metrics.LeaseLost(r.topic, lost)
	}
}

// backlogScanMax bounds the index keys one backlog report reads.
const backlogScanMax = 100_000

// reportBacklog reports the messages due: the pending ones of the ready
// index and those whose lease expired (each lease index key counts its
// messages).
func (r *topicRunner) reportBacklog(ctx context.Context) {
	now := r.w.clock().UnixNano()
	n, oldest := 0, int64(math.MaxInt64)
	_ = r.w.db.View(ctx, func(tx *chain.Tx) error {
		for _, kind := range []string{stateReady, stateLease} {
			start := topicPrefix(r.w.opts.Tenant, kind, r.topic)
			end := binary.BigEndian.AppendUint64(bytes.Clone(start), uint64(now+1)^(1<<63))
			keys := 0
			for kv, err := range tx.StateScan(start, end, false) {
				if err != nil {
					return err
				}
				if len(kv.Key) < len(start)+8 {
					continue
				}
				if keys == 0 {
					oldest = min(oldest, int64(binary.BigEndian.Uint64(kv.Key[len(start):])^(1<<63)))
				}
				switch {
				case kind == stateReady:
					n++
				case len(kv.Value) == 8:
					n += int(binary.BigEndian.Uint64(kv.Value))
				}
				if keys++; keys == backlogScanMax {
					break
				}
			}
		}
		return nil
	})
	age := time.Duration(0)
	if n > 0 {
		age = time.Duration(now - oldest)
	}
	r.w.metrics.Backlog(r.topic, n, age)
}
