// Package outboxprom adapts outbox.Metrics to Prometheus.
//
// # Basics
//
//	m := outboxprom.New(prometheus.DefaultRegisterer)
//	w, _ := outbox.NewWorker(db, outbox.WorkerOptions{..., Metrics: m})
//
// Every series carries the topic as a label:
//
//	outbox_claimed_total, outbox_lease_expired_total      leases taken; of them, taken over after a lease expired
//	outbox_attempts_total{outcome}                        attempts by outcome: delivered, failed, rejected
//	outbox_dead_total{reason}                             messages dead-lettered: rejected, max_attempts, max_age
//	outbox_lease_lost_total                               outcomes and heartbeats refused: the lease had passed on
//	outbox_handler_seconds                                handler time per attempt (histogram)
//	outbox_pickup_seconds                                 enqueue to the first attempt's claim (histogram)
//	outbox_due                                            messages due and not yet claimed (gauge)
//	outbox_oldest_due_seconds                             how long the most overdue message has waited (gauge)
//
// # Caveats
//
// The gauges are sampled by each worker every WorkerOptions.BacklogInterval;
// with several workers on one topic they report the same backlog, so
// aggregate them with max, not sum. Register one Metrics per registry:
// New panics when its series are registered already.
package outboxprom

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ledgerworks/ledger/outbox"
)

// Metrics implements outbox.Metrics with Prometheus series.
type Metrics struct {
	claimed, expired, lost *prometheus.CounterVec
	attempts, dead         *prometheus.CounterVec
	handler, pickup        *prometheus.HistogramVec
	due, oldest            *prometheus.GaugeVec
}

var _ outbox.Metrics = (*Metrics)(nil)

// New creates the series and registers them with reg.
func New(reg prometheus.Registerer) *Metrics {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "outbox", Name: name, Help: help}, append([]string{"topic"}, labels...))
	}
	buckets := prometheus.ExponentialBuckets(0.0005, 2, 18) // 0.5 ms to about 65 s
	m := &Metrics{
		claimed:  counter("claimed_total", "Messages leased to a worker."),
		expired:  counter("lease_expired_total", "Messages leased again after their lease expired."),
		lost:     counter("lease_lost_total", "Outcomes and heartbeats refused because the lease had passed on."),
		attempts: counter("attempts_total", "Delivery attempts by outcome.", "outcome"),
		dead:     counter("dead_total", "Messages dead-lettered, by reason.", "reason"),
		handler: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "outbox", Name: "handler_seconds",
			Help: "Time a handler took per attempt.", Buckets: buckets}, []string{"topic"}),
		pickup: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "outbox", Name: "pickup_seconds",
			Help: "Time from enqueue to the first attempt's claim.", Buckets: buckets}, []string{"topic"}),
		due: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "outbox", Name: "due",
			Help: "Messages due and not yet claimed."}, []string{"topic"}),
		oldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "outbox", Name: "oldest_due_seconds",
			Help: "How long the most overdue message has waited for a worker."}, []string{"topic"}),
	}
	reg.MustRegister(m.claimed, m.expired, m.lost, m.attempts, m.dead, m.handler, m.pickup, m.due, m.oldest)
	return m
}

// Claimed implements outbox.Metrics.
func (m *Metrics) Claimed(topic string, leased, expired int) {
	m.claimed.WithLabelValues(topic).Add(float64(leased))
	if expired > 0 {
		m.expired.WithLabelValues(topic).Add(float64(expired))
	}
}

// Attempted implements outbox.Metrics.
func (m *Metrics) Attempted(topic string, kind outbox.OutcomeKind, handler time.Duration) {
	m.attempts.WithLabelValues(topic, kind.String()).Inc()
	m.handler.WithLabelValues(topic).Observe(handler.Seconds())
}

// PickedUp implements outbox.Metrics.
func (m *Metrics) PickedUp(topic string, latency time.Duration) {
	m.pickup.WithLabelValues(topic).Observe(max(latency, 0).Seconds())
}

// DeadLettered implements outbox.Metrics.
func (m *Metrics) DeadLettered(topic string, reason outbox.DeadReason, n int) {
	m.dead.WithLabelValues(topic, reason.String()).Add(float64(n))
}

// LeaseLost implements outbox.Metrics.
func (m *Metrics) LeaseLost(topic string, n int) { m.lost.WithLabelValues(topic).Add(float64(n)) }

// Backlog implements outbox.Metrics.
func (m *Metrics) Backlog(topic string, due int, oldestDue time.Duration) {
	m.due.WithLabelValues(topic).Set(float64(due))
	m.oldest.WithLabelValues(topic).Set(oldestDue.Seconds())
}

// AttemptsCounter returns the counter of a topic's attempts with an
// outcome, for tests and dashboards built in Go.
func (m *Metrics) AttemptsCounter(topic string, kind outbox.OutcomeKind) prometheus.Counter {
	return m.attempts.WithLabelValues(topic, kind.String())
}
