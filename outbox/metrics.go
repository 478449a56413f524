package outbox

import "time"

// Metrics is the outbox's view of a metrics system; adapt it to yours
// (outbox/outboxprom adapts it to Prometheus, per tenant). Its methods are called by
// a Worker's goroutines concurrently and must not block.
type Metrics interface {
	// Claimed reports one claim: messages leased, and how many of them
	// had an expired lease (a worker died or stalled).
	Claimed(topic string, leased, expired int)
	// Attempted reports one attempt's outcome and how long its handler
	// ran.
	Attempted(topic string, kind OutcomeKind, handler time.Duration)
	// PickedUp reports the time from a message's enqueue to its first
	// attempt's claim.
	PickedUp(topic string, latency time.Duration)
	// DeadLettered counts messages dead-lettered, by reason.
	DeadLettered(topic string, reason DeadReason, n int)
	// LeaseLost counts outcomes and heartbeats refused because the lease
	// was no longer the worker's.
	LeaseLost(topic string, n int)
	// Backlog reports, every Options.BacklogInterval, the messages due
	// now and waiting for a worker, and how long the most overdue one
	// has waited.
	Backlog(topic string, due int, oldestDue time.Duration)
}

// nopMetrics is used when no Metrics are configured.
type nopMetrics struct{}

func (nopMetrics) Claimed(string, int, int)                     {}
func (nopMetrics) Attempted(string, OutcomeKind, time.Duration) {}
func (nopMetrics) PickedUp(string, time.Duration)               {}
func (nopMetrics) DeadLettered(string, DeadReason, int)         {}
func (nopMetrics) LeaseLost(string, int)                        {}
func (nopMetrics) Backlog(string, int, time.Duration)           {}
