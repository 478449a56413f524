package outbox_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/outbox"
)

// A handler timeout the lease cannot cover is refused when the worker is
// built; a lease is derived from the longest timeout when none is set;
// and a handler slower than two thirds of its lease but within its timeout
// is attempted once and delivered.
func TestWorkerLeaseCoversHandlerTimeout(t *testing.T) {
	db := openBolt(t, tempLedger(t), nil)
	t.Cleanup(func() { db.Close() }) // after the workers stop
	ok := func(context.Context, *outbox.Delivery) error { return nil }
	for _, tc := range []struct{ lease, timeout time.Duration }{
		{300 * time.Millisecond, 300 * time.Millisecond},
		{30 * time.Second, 40 * time.Second}, // the default lease and a 40 s receiver
		{time.Second, 700 * time.Millisecond},
	} {
		_, err := outbox.NewWorker(db, outbox.WorkerOptions{Tenant: "acme", LeaseDuration: tc.lease,
			Topics: map[string]outbox.Topic{"hooks": {Handler: ok, Timeout: tc.timeout}}})
		if !errors.Is(err, outbox.ErrTimeoutBeyondLease) || !errors.Is(err, chain.ErrInvalid) {
			t.Errorf("lease %v, timeout %v: %v, want ErrTimeoutBeyondLease", tc.lease, tc.timeout, err)
		}
	}
	if _, err := outbox.NewWorker(db, outbox.WorkerOptions{Tenant: "acme", LeaseDuration: 450 * time.Millisecond,
		Topics: map[string]outbox.Topic{"hooks": {Handler: ok, Timeout: 300 * time.Millisecond}}}); err != nil {
		t.Fatalf("a lease of LeaseFor(timeout): %v", err)
	}
	for _, timeout := range []time.Duration{-time.Second, outbox.LeaseDurationMax + 1} {
		_, err := outbox.NewWorker(db, outbox.WorkerOptions{Tenant: "acme", Topics: map[string]outbox.Topic{"hooks": {Handler: ok, Timeout: timeout}}})
		if !errors.Is(err, outbox.ErrInvalidOptions) {
			t.Errorf("timeout %v: %v", timeout, err)
		}
	}

	// No lease set and a 40 s timeout: the lease is LeaseFor(40 s), and the
	// handler's context ends at its timeout, not at a default lease.
	type seen struct{ lease, deadline time.Duration }
	got := make(chan seen, 4)
	startWorker(t, db, outbox.WorkerOptions{Tenant: "acme", PollInterval: 20 * time.Millisecond,
		Topics: map[string]outbox.Topic{"slow": {Timeout: 40 * time.Second, Handler: func(ctx context.Context, d *outbox.Delivery) error {
			dl, _ := ctx.Deadline()
			got <- seen{time.Until(d.Deadline), time.Until(dl)}
			return nil
		}}}})
	enqueue(t, db, outbox.EnqueueRequest{Tenant: "acme", Topic: "slow", IdempotencyKey: "s-1"})
	select {
	case s := <-got:
		if s.lease < outbox.LeaseFor(40*time.Second)-5*time.Second || s.lease > outbox.LeaseFor(40*time.Second) {
			t.Fatalf("the handler held a lease of %v, want about %v", s.lease, outbox.LeaseFor(40*time.Second))
		}
		if s.deadline < 35*time.Second || s.deadline > 40*time.Second {
			t.Fatalf("the handler's context ends in %v, want its 40 s timeout", s.deadline)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not attempted")
	}

	// A short pair: timeout 800 ms, lease 1.2 s, a handler of 600 ms (past
	// the heartbeats' two thirds of the lease, within its timeout).
	var calls atomic.Int64
	delivered := make(chan struct{})
	startWorker(t, db, outbox.WorkerOptions{Tenant: "acme", PollInterval: 20 * time.Millisecond, LeaseDuration: 1200 * time.Millisecond,
		Topics: map[string]outbox.Topic{"short": {Timeout: 800 * time.Millisecond, Handler: func(ctx context.Context, d *outbox.Delivery) error {
			calls.Add(1)
			select {
			case <-time.After(600 * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
			close(delivered)
			return nil
		}}}})
	enqueue(t, db, outbox.EnqueueRequest{Tenant: "acme", Topic: "short", IdempotencyKey: "s-2"})
	select {
	case <-delivered:
	case <-time.After(10 * time.Second):
		t.Fatal("not delivered")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		infos, err := outbox.List(context.Background(), db, "acme", outbox.ListOptions{Topic: "short", Status: outbox.Done})
		if err != nil {
			t.Fatal(err)
		}
		if len(infos) == 1 && infos[0].Status == outbox.Done {
			if infos[0].Attempts != 1 || calls.Load() != 1 {
				t.Fatalf("attempts %d, calls %d, want 1", infos[0].Attempts, calls.Load())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not done: %+v", infos)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
