package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/outbox"
)

// Delivery is an outbox topic the server delivers by webhook: every
// message of the tenant's topic is POSTed to URL, signed with Secret
// (Standard Webhooks), with Idempotency-Key outbox:<id>.
type Delivery struct {
	Tenant string `json:"tenant"`
	Topic  string `json:"topic"`
	URL    string `json:"url"`
	// Secret is the signing key, "whsec_<base64>".
	Secret string `json:"secret"`
	// Concurrency is the requests in flight; outbox.ConcurrencyDefault
	// when zero.
	Concurrency int `json:"concurrency,omitempty"`
	// Timeout bounds one request; outbox.WebhookTimeoutDefault when zero.
	Timeout Duration `json:"timeout,omitempty"`
	// MaxAttempts before a message is dead; the outbox's default when zero.
	MaxAttempts int `json:"max_attempts,omitempty"`
	// MaxAge is how long after its enqueue (or its last requeue) a message
	// may still be attempted before it is dead; outbox.MaxAgeDefault when
	// zero.
	MaxAge Duration `json:"max_age,omitempty"`
	// AllowPrivateAddresses lets the delivery reach loopback, private,
	// link-local and the other addresses outbox.CheckAddress refuses (a
	// receiver on the same host or network). Off by default.
	AllowPrivateAddresses bool `json:"allow_private_addresses,omitempty"`
}

// timeout is the delivery's request timeout.
func (d Delivery) timeout() time.Duration {
	if d.Timeout == 0 {
		return outbox.WebhookTimeoutDefault
	}
	return time.Duration(d.Timeout)
}

// webhook is the delivery's webhook options.
func (d Delivery) webhook() outbox.WebhookOptions {
	return outbox.WebhookOptions{URL: d.URL, Secret: d.Secret, Timeout: time.Duration(d.Timeout), AllowPrivateAddresses: d.AllowPrivateAddresses}
}

// ErrNegativeSetting: a delivery's concurrency, timeout, max_attempts or
// max_age is below zero.
var ErrNegativeSetting = errors.New("concurrency, timeout, max_attempts and max_age may not be negative (zero is the default)")

// DeliveryError is a delivery the server refuses (in a configuration
// file or Options.Deliveries): Err says why, ErrNegativeSetting or the
// outbox's error for the delivery's names or webhook.
type DeliveryError struct {
	Tenant, Topic string
	Err           error
}

func (e *DeliveryError) Error() string {
	return fmt.Sprintf("server: delivery %s/%s: %v", e.Tenant, e.Topic, e.Err)
}

func (e *DeliveryError) Unwrap() error { return e.Err }

// policy is the outbox policy of the delivered topic.
func (d Delivery) policy() outbox.Policy {
	return outbox.Policy{MaxAttempts: d.MaxAttempts, MaxAge: time.Duration(d.MaxAge)}
}

// checkDeliveries refuses a configuration the workers would refuse at
// Start, and a topic delivered twice. lease is Options.OutboxLease: when
// set, every delivery's timeout must fit it (outbox.LeaseFor).
func checkDeliveries(ds []Delivery, lease time.Duration) error {
	seen := map[[2]string]bool{}
	for _, d := range ds {
		if _, err := outbox.MessagesChain(d.Tenant, d.Topic); err != nil {
			return &DeliveryError{Tenant: d.Tenant, Topic: d.Topic, Err: err}
		}
		if d.Concurrency < 0 || d.Timeout < 0 || d.MaxAttempts < 0 || d.MaxAge < 0 {
			return &DeliveryError{Tenant: d.Tenant, Topic: d.Topic, Err: ErrNegativeSetting}
		}
		if _, err := outbox.Webhook(d.webhook()); err != nil {
			return &DeliveryError{Tenant: d.Tenant, Topic: d.Topic, Err: err}
		}
		if limit := cmp.Or(lease, outbox.LeaseDurationMax); outbox.LeaseFor(d.timeout()) > limit {
			return &DeliveryError{Tenant: d.Tenant, Topic: d.Topic, Err: fmt.Errorf("%w: a timeout of %v needs an outbox lease of at least %v, the lease is at most %v",
				outbox.ErrTimeoutBeyondLease, d.timeout(), outbox.LeaseFor(d.timeout()), limit)}
		}
		k := [2]string{d.Tenant, d.Topic}
		if seen[k] {
			return fmt.Errorf("server: topic %s/%s is delivered twice", d.Tenant, d.Topic)
		}
		seen[k] = true
	}
	return nil
}

// startWorkers starts one outbox worker per tenant of Options.Deliveries.
func (s *Server) startWorkers(ctx context.Context) ([]*outbox.Worker, error) {
	byTenant := map[string]outbox.WorkerOptions{}
	for _, d := range s.opts.Deliveries {
		h, err := outbox.Webhook(d.webhook())
		if err != nil {
			return nil, err
		}
		o, ok := byTenant[d.Tenant]
		if !ok {
			o = outbox.WorkerOptions{Tenant: d.Tenant, Topics: map[string]outbox.Topic{}, Concurrency: d.Concurrency,
				LeaseDuration: s.opts.OutboxLease, Logger: s.log, Metrics: s.outboxM.Tenant(d.Tenant), Clock: s.opts.Clock,
				TracerProvider: s.opts.TracerProvider}
		}
		// The worker's call timeout is the delivery's, and its lease
		// (unless OutboxLease is set) is derived from the longest of them.
		o.Topics[d.Topic] = outbox.Topic{Handler: h, Policy: d.policy(), Timeout: d.timeout()}
		o.Concurrency = max(o.Concurrency, d.Concurrency)
		byTenant[d.Tenant] = o
	}
	tenants := make([]string, 0, len(byTenant))
	for t := range byTenant {
		tenants = append(tenants, t)
	}
	sort.Strings(tenants)
	var workers []*outbox.Worker
	stopAll := func() {
		for _, w := range workers {
			_ = w.Stop(ctx)
		}
	}
	for _, t := range tenants {
		w, err := outbox.NewWorker(s.db, byTenant[t])
		if err == nil {
			err = w.Start(ctx)
		}
		if err != nil {
			stopAll()
			return nil, fmt.Errorf("server: outbox worker of %s: %w", t, err)
		}
		workers = append(workers, w)
	}
	return workers, nil
}

// orphanWorker names the releases of orphaned leases in the deliveries
// history.
const orphanWorker = "ledgerctl-serve:orphan-release"

// ReleaseOrphanLeases records, for every leased outbox message of every
// tenant, a transient failure of its attempt ("orphaned: the process that
// held the lease ended") due at once, so that a worker retries it now
// rather than when its lease would have expired. It is right only when no
// other process is delivering: on the embedded default, at the start of
// the one process that holds the ledger file. The attempt counts toward
// the topic's MaxAttempts as a failed attempt would (deliveries's
// policies give the limit of each topic; the outbox's default for others).
// It returns how many messages it released.
func ReleaseOrphanLeases(ctx context.Context, db *chain.DB, now time.Time, deliveries []Delivery) (int, error) {
	policies := map[[2]string]outbox.Policy{}
	for _, d := range deliveries {
		policies[[2]string{d.Tenant, d.Topic}] = d.policy()
	}
	topics := map[[2]string]bool{}
	for h, err := range db.Chains(ctx, "") {
		if err != nil {
			return 0, err
		}
		if tenant, topic, isDeliveries, ok := outbox.ParseChain(h.Chain); ok && isDeliveries {
			topics[[2]string{tenant, topic}] = true
		}
	}
	released := 0
	for tt := range topics {
		n, err := releaseTopic(ctx, db, tt[0], tt[1], now, policies[tt])
		released += n
		if err != nil {
			return released, err
		}
	}
	return released, nil
}

func releaseTopic(ctx context.Context, db *chain.DB, tenant, topic string, now time.Time, policy outbox.Policy) (int, error) {
	// Due at once: the smallest backoff the policy allows.
	policy.BackoffMin, policy.BackoffMax = time.Nanosecond, time.Nanosecond
	released := 0
	for {
		infos, err := outbox.List(ctx, db, tenant, outbox.ListOptions{Topic: topic, Status: outbox.Leased,
			Limit: min(outbox.ListLimitDefault, outbox.OutcomeBatchMax)})
		if err != nil || len(infos) == 0 {
			return released, err
		}
		outcomes := make([]outbox.Outcome, 0, len(infos))
		for _, i := range infos {
			outcomes = append(outcomes, outbox.Outcome{ID: i.Message.ID, Token: i.Token, Attempt: i.Attempts,
				Err: errOrphaned, Detail: errOrphaned.Error()})
		}
		var n int
		err = db.Update(ctx, func(tx *chain.Tx) error {
			rec, err := outbox.RecordTx(tx, tenant, topic, outbox.RecordOptions{Worker: orphanWorker, Now: now, Policy: policy}, outcomes)
			if err != nil {
				return err
			}
			n = 0
			for _, e := range rec.Errs {
				if e == nil {
					n++
				}
			}
			return nil
		})
		if err != nil {
			return released, err
		}
		released += n
		if n == 0 {
			return released, nil // only leases that changed meanwhile remain
		}
	}
}

var errOrphaned = errors.New("orphaned: the process that held the lease ended before recording an outcome")
