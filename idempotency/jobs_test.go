package idempotency_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/idempotency"
	"github.com/ledgerworks/ledger/idempotency/idempotencytest"
)

// Jobs.Run recovers stuck attempts and purges expired records on its
// schedule until its context ends.
func TestJobsRunOnASchedule(t *testing.T) {
	clock := idempotencytest.NewClock()
	store := idempotency.NewMemoryStore()
	now := clock.Now()
	ctx := context.Background()
	stuck := idempotency.Scope{Operation: "op", User: "u", Key: "stuck"}
	old := idempotency.Scope{Operation: "op", User: "u", Key: "old"}
	for _, sc := range []idempotency.Scope{stuck, old} {
		if _, err := store.Create(ctx, idempotency.Claim{Scope: sc, Token: sc.Key, Now: now, LeaseExpiresAt: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Succeed(ctx, old, "old", idempotency.Response{Status: 200}, now.Add(30*time.Minute), now); err != nil {
		t.Fatal(err)
	}
	clock.Advance(45 * time.Minute)
	jobs, err := idempotency.NewJobs(idempotency.JobsOptions{Store: store, Interval: 10 * time.Millisecond, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := jobs.Run(runCtx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run returned %v, want the context's error", err)
	}
	for _, sc := range []idempotency.Scope{stuck, old} {
		if _, err := store.Get(ctx, sc, now); !errors.Is(err, idempotency.ErrNotFound) {
			t.Errorf("%s is still stored after the jobs ran: %v", sc.Key, err)
		}
	}
	if _, err := idempotency.NewJobs(idempotency.JobsOptions{}); err == nil {
		t.Fatal("NewJobs without a store succeeded")
	}
}
