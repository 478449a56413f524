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
	// Take spends one token of each bucket that holds one, together (one
	// round trip), and answers in the buckets' order: OK, or the wait
	// until a token is due for a bucket that held none, which spends
	// nothing of it.
	Take(ctx context.Context, buckets []Bucket) ([]Taken, error)
	// Give puts back the tokens a Take of the same request spent, when
	// another of its buckets refused it.
	Give(ctx context.Context, buckets []Bucket) error
}

// Bucket names a bucket of a Store and gives its rate and size.
type Bucket struct {
	Name  []byte
	Limit rate.Limit
	Burst int
}

// Taken is a Store's answer for one bucket.
type Taken struct {
	OK   bool
	Wait time.Duration // when not OK
}

// StoreTimeoutDefault is Options.StoreTimeout when zero.
const StoreTimeoutDefault = time.Second

// Bucket names in a Store: the kind, then the key id or the address.
const (
	bucketKey  = "k/"
	bucketAddr = "a/"
)

// limit is one bucket a request spends from: its name in this process
// and in the Store, and its answer.
type limit struct {
	lru   *lru
	name  string
	rate  rate.Limit
	burst int
	kind  string

	ok   bool
	wait time.Duration
	res  *rate.Reservation // when this process's bucket answered
}

// take spends a token of each limit: from the Store when there is one,
// and from this process's buckets when there is none or it failed. A
// failure of the Store is counted, and the request is then limited by
// this process's buckets alone: at worst N instances allow N times the
// rate while their database fails, and never answer 500 or 503 for it.
func (l *Limiter) take(ctx context.Context, now time.Time, limits []limit) {
	if l.opts.Store != nil {
		sctx, cancel := context.WithTimeout(ctx, l.opts.StoreTimeout)
		taken, err := l.opts.Store.Take(sctx, storeBuckets(limits))
		cancel()
		if err == nil && len(taken) == len(limits) {
			for i := range limits {
				limits[i].ok, limits[i].wait = taken[i].OK, taken[i].Wait
			}
			return
		}
		if err == nil {
			err = errStoreAnswers
		}
		l.storeErrors.Add(1)
		l.logStoreError(err)
	}
	for i := range limits {
		m := &limits[i]
		m.res = m.lru.get(m.name).ReserveN(now, 1)
		m.wait = m.res.DelayFrom(now)
		m.ok = m.wait == 0
	}
}

// undo gives back the tokens the limits spent.
func (l *Limiter) undo(ctx context.Context, now time.Time, limits []limit) {
	var give []limit
	for _, m := range limits {
		switch {
		case m.res != nil:
			m.res.CancelAt(now)
		case m.ok:
			give = append(give, m)
		}
	}
	if len(give) == 0 {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, l.opts.StoreTimeout)
	defer cancel()
	if err := l.opts.Store.Give(sctx, storeBuckets(give)); err != nil {
		l.storeErrors.Add(1)
		l.logStoreError(err)
	}
}

func storeBuckets(limits []limit) []Bucket {
	b := make([]Bucket, len(limits))
	for i, m := range limits {
		b[i] = Bucket{Name: []byte(m.kind + m.name), Limit: m.rate, Burst: m.burst}
	}
	return b
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
