package idempotency

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// Defaults of the jobs.
const (
	JobIntervalDefault  = time.Minute
	JobBatchSizeDefault = 1000
)

// JobsOptions configure Jobs; Store is required, the zero value of every
// other field is usable.
type JobsOptions struct {
	// Store is the store to recover and clean.
	Store Store
	// MaxRetries is the count at which a recovered attempt poisons its key;
	// MaxRetriesDefault when zero. Use the guards' DeadAttemptsMax
	// (Guard.Jobs does).
	MaxRetries int
	// TTL is how long a poisoned record or a retry count is kept;
	// TTLDefault when zero.
	TTL time.Duration
	// Interval is how often Run runs both jobs; JobIntervalDefault when zero.
	Interval time.Duration
	// RecoverTimeout is Run's timeout for RecoverStuckRecords (how long
	// after its lease ended a record counts as stuck); 0 means at once.
	RecoverTimeout time.Duration
	// BatchSize bounds the records one run of a job handles;
	// JobBatchSizeDefault when zero.
	BatchSize int
	// Logger receives a line per run that did something, and errors;
	// slog.Default() when nil.
	Logger *slog.Logger
	// Metrics counts recovered and cleaned records; none when nil.
	Metrics Metrics
	// Clock returns the time; time.Now when nil.
	Clock func() time.Time
}

// Jobs are the background work of a store: recovering stuck attempts and
// purging expired records.
type Jobs struct {
	opts JobsOptions
	log  *slog.Logger
	m    Metrics
	now  func() time.Time
}

// NewJobs returns the jobs of opts.Store.
func NewJobs(opts JobsOptions) (*Jobs, error) {
	if opts.Store == nil {
		return nil, errors.New("idempotency: JobsOptions.Store is required")
	}
	if opts.MaxRetries < 0 || opts.TTL < 0 || opts.Interval < 0 || opts.RecoverTimeout < 0 || opts.BatchSize < 0 {
		return nil, errors.New("idempotency: negative job options are not allowed")
	}
	if opts.MaxRetries == 0 {
		opts.MaxRetries = MaxRetriesDefault
	}
	if opts.TTL == 0 {
		opts.TTL = TTLDefault
	}
	if opts.Interval == 0 {
		opts.Interval = JobIntervalDefault
	}
	if opts.BatchSize == 0 {
		opts.BatchSize = JobBatchSizeDefault
	}
	j := &Jobs{opts: opts, log: opts.Logger, m: opts.Metrics, now: opts.Clock}
	if j.log == nil {
		j.log = slog.Default()
	}
	if j.m == nil {
		j.m = noMetrics{}
	}
	if j.now == nil {
		j.now = time.Now
	}
	return j, nil
}

// Jobs returns the jobs of the guard's store, with its limit of dead
// attempts (DeadAttemptsMax), TTL, clock, logger and metrics.
func (g *Guard) Jobs() *Jobs {
	j, _ := NewJobs(JobsOptions{Store: g.store, MaxRetries: g.opts.DeadAttemptsMax, TTL: g.opts.TTL,
		Logger: g.log, Metrics: g.opts.Metrics, Clock: g.opts.Clock})
	return j
}

// RecoverStuckRecords releases up to limit PROCESSING records whose lease
// ended at least timeout ago, each as a failure (so a key whose attempts
// keep dying is poisoned at JobsOptions.MaxRetries), and returns how many
// it released. A live attempt extends its lease (heartbeat), so it is never
// recovered while it runs.
func (j *Jobs) RecoverStuckRecords(ctx context.Context, timeout time.Duration, limit int) (int, error) {
	if limit <= 0 {
		return 0, errors.New("idempotency: RecoverStuckRecords needs a positive limit")
	}
	now := j.now()
	n, err := j.opts.Store.RecoverStuck(ctx, now.Add(-timeout), limit, j.opts.MaxRetries, now.Add(j.opts.TTL), now)
	if n > 0 {
		j.m.Recovered(n)
		j.log.LogAttrs(ctx, slog.LevelWarn, "idempotency recovered stuck records", slog.Int("records", n))
	}
	return n, err
}

// CleanupExpiredRecords deletes up to limit expired records (and expired
// retry counts), in batches, and returns how many records it deleted.
func (j *Jobs) CleanupExpiredRecords(ctx context.Context, limit int) (int, error) {
	if limit <= 0 {
		return 0, errors.New("idempotency: CleanupExpiredRecords needs a positive limit")
	}
	n, err := j.opts.Store.DeleteExpired(ctx, j.now(), limit)
	if n > 0 {
		j.m.Cleaned(n)
		j.log.LogAttrs(ctx, slog.LevelInfo, "idempotency cleaned expired records", slog.Int("records", n))
	}
	return n, err
}

// Run runs both jobs every Interval until ctx ends, then returns ctx's
// error. A job's error is logged and the schedule goes on.
func (j *Jobs) Run(ctx context.Context) error {
	t := time.NewTicker(j.opts.Interval)
	defer t.Stop()
	for {
		if _, err := j.RecoverStuckRecords(ctx, j.opts.RecoverTimeout, j.opts.BatchSize); err != nil && ctx.Err() == nil {
			j.log.LogAttrs(ctx, slog.LevelError, "idempotency recovery failed", slog.Any("error", err))
		}
		if _, err := j.CleanupExpiredRecords(ctx, j.opts.BatchSize); err != nil && ctx.Err() == nil {
			j.log.LogAttrs(ctx, slog.LevelError, "idempotency cleanup failed", slog.Any("error", err))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
