package idempotency

import "time"

// Metrics is the guard's view of a metrics system; idempotencyprom adapts it
// to Prometheus. Every method must be safe for concurrent use and cheap.
type Metrics interface {
	// Request counts one guarded request by its outcome.
	Request(outcome Outcome)
	// Duplicate counts a request that found an existing record, by the
	// record's status.
	Duplicate(status Status)
	// CacheHit counts a retry answered from the cache.
	CacheHit()
	// CacheError counts a failed cache call.
	CacheError()
	// StoreLatency reports one store call ("create", "succeed", …).
	StoreLatency(op string, d time.Duration)
	// Recovered counts records released by RecoverStuckRecords, or taken
	// over by a retry after their lease ended.
	Recovered(n int)
	// Cleaned counts records deleted by CleanupExpiredRecords.
	Cleaned(n int)
}

// noMetrics is the Metrics of a guard without one.
type noMetrics struct{}

func (noMetrics) Request(Outcome)                    {}
func (noMetrics) Duplicate(Status)                   {}
func (noMetrics) CacheHit()                          {}
func (noMetrics) CacheError()                        {}
func (noMetrics) StoreLatency(string, time.Duration) {}
func (noMetrics) Recovered(int)                      {}
func (noMetrics) Cleaned(int)                        {}
