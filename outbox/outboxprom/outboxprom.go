// Package outboxprom adapts outbox.Metrics to Prometheus.
//
// # Basics
//
//	m := outboxprom.New(prometheus.DefaultRegisterer)
//	w, _ := outbox.NewWorker(db, outbox.WorkerOptions{Tenant: "acme", ..., Metrics: m.Tenant("acme")})
//
// Every series carries the tenant and the topic as labels, so that two
// tenants' topics of one name are two series:
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

// Metrics holds the Prometheus series of the outbox; Tenant gives a
// tenant's worker its outbox.Metrics.
type Metrics struct {
	claimed, expired, lost *prometheus.CounterVec
	attempts, dead         *prometheus.CounterVec
	handler, pickup        *prometheus.HistogramVec
	due, oldest            *prometheus.GaugeVec
}

// Tenant returns the outbox.Metrics of a tenant's worker: its series carry
// the tenant's label.
func (m *Metrics) Tenant(tenant string) outbox.Metrics { return &tenantMetrics{m: m, tenant: tenant} }

// tenantMetrics implements outbox.Metrics for one tenant.
type tenantMetrics struct {
	m      *Metrics
	tenant string
}

var _ outbox.Metrics = (*tenantMetrics)(nil)

// New creates the series and registers them with reg.
func New(reg prometheus.Registerer) *Metrics {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "outbox", Name: name, Help: help}, append([]string{"tenant", "topic"}, labels...))
	}
	buckets := prometheus.ExponentialBuckets(0.0005, 2, 18) // 0.5 ms to about 65 s
	m := &Metrics{
		claimed:  counter("claimed_total", "Messages leased to a worker."),
		expired:  counter("lease_expired_total", "Messages leased again after their lease expired."),
		lost:     counter("lease_lost_total", "Outcomes and heartbeats refused because the lease had passed on."),
		attempts: counter("attempts_total", "Delivery attempts by outcome.", "outcome"),
		dead:     counter("dead_total", "Messages dead-lettered, by reason.", "reason"),
		handler: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "outbox", Name: "handler_seconds",
			Help: "Time a handler took per attempt.", Buckets: buckets}, []string{"tenant", "topic"}),
		pickup: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "outbox", Name: "pickup_seconds",
			Help: "Time from enqueue to the first attempt's claim.", Buckets: buckets}, []string{"tenant", "topic"}),
		due: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "outbox", Name: "due",
			Help: "Messages due and not yet claimed."}, []string{"tenant", "topic"}),
		oldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "outbox", Name: "oldest_due_seconds",
			Help: "How long the most overdue message has waited for a worker."}, []string{"tenant", "topic"}),
	}
	reg.MustRegister(m.claimed, m.expired, m.lost, m.attempts, m.dead, m.handler, m.pickup, m.due, m.oldest)
	return m
}

// Claimed implements outbox.Metrics.
func (t *tenantMetrics) Claimed(topic string, leased, expired int) {
	t.m.claimed.WithLabelValues(t.tenant, topic).Add(float64(leased))
	if expired > 0 {
		t.m.expired.WithLabelValues(t.tenant, topic).Add(float64(expired))
	}
}

// Attempted implements outbox.Metrics.
func (t *tenantMetrics) Attempted(topic string, kind outbox.OutcomeKind, handler time.Duration) {
	t.m.attempts.WithLabelValues(t.tenant, topic, kind.String()).Inc()
	t.m.handler.WithLabelValues(t.tenant, topic).Observe(handler.Seconds())
}

// PickedUp implements outbox.Metrics.
func (t *tenantMetrics) PickedUp(topic string, latency time.Duration) {
	t.m.pickup.WithLabelValues(t.tenant, topic).Observe(max(latency, 0).Seconds())
}

// DeadLettered implements outbox.Metrics.
func (t *tenantMetrics) DeadLettered(topic string, reason outbox.DeadReason, n int) {
	t.m.dead.WithLabelValues(t.tenant, topic, reason.String()).Add(float64(n))
}

// LeaseLost implements outbox.Metrics.
func (t *tenantMetrics) LeaseLost(topic string, n int) {
	t.m.lost.WithLabelValues(t.tenant, topic).Add(float64(n))
}

// Backlog implements outbox.Metrics.
func (t *tenantMetrics) Backlog(topic string, due int, oldestDue time.Duration) {
	t.m.due.WithLabelValues(t.tenant, topic).Set(float64(due))
	t.m.oldest.WithLabelValues(t.tenant, topic).Set(oldestDue.Seconds())
}

// AttemptsCounter returns the counter of a tenant's topic's attempts with
// an outcome, for tests and dashboards built in Go.
func (m *Metrics) AttemptsCounter(tenant, topic string, kind outbox.OutcomeKind) prometheus.Counter {
	return m.attempts.WithLabelValues(tenant, topic, kind.String())
}
