package ratelimit

import (
	"context"
	"time"

	"golang.org/x/time/rate"
)

// Store holds token buckets shared by every process that uses it, so
// that N servers on one database allow a key its rate once, not N times
// (pgbuckets: PostgreSQL). A bucket is named; its rate and burst are the
// caller's (every instance must be given the same).
type Store interface {
	// Take spends one token of the bucket and returns ok when it holds
	// one; otherwise it spends nothing and returns the wait until a token
	// is due.
	Take(ctx context.Context, bucket []byte, limit rate.Limit, burst int) (ok bool, wait time.Duration, err error)
	// Give puts back the token a Take of the same request spent, when the
	// request is refused by its other bucket.
	Give(ctx context.Context, bucket []byte, limit rate.Limit, burst int) error
}

// StoreTimeoutDefault is Options.StoreTimeout when zero.
const StoreTimeoutDefault = time.Second

// Bucket names in a Store: the kind, then the key id or the address.
const (
	bucketKey  = "k/"
	bucketAddr = "a/"
)

// decision is one bucket's answer for a request.
type decision struct {
	ok     bool
	wait   time.Duration
	shared bool // taken from the Store (to be given back there)
	res    *rate.Reservation
}

// take spends a token of the named bucket: from the Store when there is
// one, and from this process's bucket when there is none or it failed.
// A failure of the Store is counted, and the request is then limited by
// this process's bucket alone: at worst N instances allow N times the
// rate while their database fails, and never answer 500 or 503 for it.
func (l *Limiter) take(ctx context.Context, now time.Time, c *lru, kind, name string, limit rate.Limit, burst int) decision {
	if l.opts.Store != nil {
		sctx, cancel := context.WithTimeout(ctx, l.opts.StoreTimeout)
		ok, wait, err := l.opts.Store.Take(sctx, []byte(kind+name), limit, burst)
		cancel()
		if err == nil {
			return decision{ok: ok, wait: wait, shared: true}
		}
		l.storeErrors.Add(1)
		l.logStoreError(err)
	}
	res := c.get(name).ReserveN(now, 1)
	wait := res.DelayFrom(now)
	return decision{ok: wait == 0, wait: wait, res: res}
}

// undo gives back the token d spent.
func (l *Limiter) undo(ctx context.Context, now time.Time, d decision, kind, name string, limit rate.Limit, burst int) {
	switch {
	case d.res != nil:
		d.res.CancelAt(now)
	case d.shared && d.ok:
		sctx, cancel := context.WithTimeout(ctx, l.opts.StoreTimeout)
		defer cancel()
		if err := l.opts.Store.Give(sctx, []byte(kind+name), limit, burst); err != nil {
			l.storeErrors.Add(1)
			l.logStoreError(err)
		}
	}
}

// logStoreError logs a failure of the Store, at most once a second.
func (l *Limiter) logStoreError(err error) {
	now := time.Now().UnixNano()
	last := l.lastLog.Load()
	if now-last < int64(time.Second) || !l.lastLog.CompareAndSwap(last, now) {
		return
	}
	l.opts.Logger.Warn("rate limit store failed; this process's buckets limit the request", "err", err,
		"failures", l.storeErrors.Load())
}
