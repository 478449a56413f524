// Package idempotencyprom adapts idempotency.Metrics to Prometheus.
//
// # Basics
//
//	m := idempotencyprom.New(prometheus.DefaultRegisterer)
//	guard, err := idempotency.New(idempotency.Options{..., Metrics: m})
//
// The series: idempotency_requests_total{outcome},
// idempotency_duplicates_total{status}, idempotency_cache_hits_total,
// idempotency_cache_errors_total, idempotency_store_duration_seconds{op}
// (a histogram), idempotency_recovered_total and idempotency_cleaned_total.
//
// # Caveats
//
// New registers the collectors and panics if the registerer already holds
// them (as prometheus.MustRegister does); build one Metrics per registry and
// share it between guards.
package idempotencyprom

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ledgerworks/ledger/idempotency"
)

// Metrics implements idempotency.Metrics with Prometheus collectors.
type Metrics struct {
	requests    *children[prometheus.Counter]
	duplicates  *children[prometheus.Counter]
	cacheHits   prometheus.Counter
	cacheErrors prometheus.Counter
	store       *children[prometheus.Observer]
	recovered   prometheus.Counter
	cleaned     prometheus.Counter
}

var _ idempotency.Metrics = (*Metrics)(nil)

// New creates the collectors and registers them with reg (none when nil).
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: counters(prometheus.NewCounterVec(prometheus.CounterOpts{Name: "idempotency_requests_total",
			Help: "Guarded requests by outcome (executed, replayed, conflict, in_progress, store_unavailable, ...)."}, []string{"outcome"})),
		duplicates: counters(prometheus.NewCounterVec(prometheus.CounterOpts{Name: "idempotency_duplicates_total",
			Help: "Requests that found an existing record, by the record's status."}, []string{"status"})),
		cacheHits: prometheus.NewCounter(prometheus.CounterOpts{Name: "idempotency_cache_hits_total",
			Help: "Retries answered from the cache."}),
		cacheErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "idempotency_cache_errors_total",
			Help: "Failed cache calls (swallowed)."}),
		store: observers(prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "idempotency_store_duration_seconds",
			Help:    "Latency of idempotency store calls by operation.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}}, []string{"op"})),
		recovered: prometheus.NewCounter(prometheus.CounterOpts{Name: "idempotency_recovered_total",
			Help: "Stuck PROCESSING records released by recovery."}),
		cleaned: prometheus.NewCounter(prometheus.CounterOpts{Name: "idempotency_cleaned_total",
			Help: "Expired records deleted by cleanup."}),
	}
	if reg != nil {
		reg.MustRegister(m.requests.vec, m.duplicates.vec, m.cacheHits, m.cacheErrors, m.store.vec, m.recovered, m.cleaned)
	}
	return m
}

// Request implements idempotency.Metrics.
func (m *Metrics) Request(o idempotency.Outcome) { m.requests.get(string(o)).Inc() }

// Duplicate implements idempotency.Metrics.
func (m *Metrics) Duplicate(s idempotency.Status) { m.duplicates.get(string(s)).Inc() }

// CacheHit implements idempotency.Metrics.
func (m *Metrics) CacheHit() { m.cacheHits.Inc() }

// CacheError implements idempotency.Metrics.
func (m *Metrics) CacheError() { m.cacheErrors.Inc() }

// StoreLatency implements idempotency.Metrics.
func (m *Metrics) StoreLatency(op string, d time.Duration) {
	m.store.get(op).Observe(d.Seconds())
}

// Recovered implements idempotency.Metrics.
func (m *Metrics) Recovered(n int) { m.recovered.Add(float64(n)) }

// Cleaned implements idempotency.Metrics.
func (m *Metrics) Cleaned(n int) { m.cleaned.Add(float64(n)) }

// children keeps the series of a one-label vector by label value, so that a
// request costs a map read rather than the vector's label hashing and
// lock. The labels are the guard's outcomes, statuses and store
// operations: a small fixed set, each series kept once it is met.
type children[T any] struct {
	vec  prometheus.Collector
	with func(lvs ...string) T
	m    atomic.Pointer[map[string]T] // replaced, never changed
	mu   sync.Mutex                   // one writer of m at a time
}

func newChildren[T any](vec prometheus.Collector, with func(lvs ...string) T) *children[T] {
	c := &children[T]{vec: vec, with: with}
	c.m.Store(&map[string]T{})
	return c
}

func counters(vec *prometheus.CounterVec) *children[prometheus.Counter] {
	return newChildren(vec, vec.WithLabelValues)
}

func observers(vec *prometheus.HistogramVec) *children[prometheus.Observer] {
	return newChildren(vec, vec.WithLabelValues)
}

func (c *children[T]) get(label string) T {
	if v, ok := (*c.m.Load())[label]; ok {
		return v
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := *c.m.Load()
	if v, ok := old[label]; ok {
		return v
	}
	v := c.with(label)
	next := maps.Clone(old)
	next[label] = v
	c.m.Store(&next)
	return v
}
