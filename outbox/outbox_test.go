package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/outbox"
)

func TestEnqueueClaimDeliver(t *testing.T) {
	clock := newTestClock()
	forEachBackend(t, clock.Now, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		req := outbox.EnqueueRequest{Tenant: "acme", Topic: "email", IdempotencyKey: "inv-1:email",
			Headers: []outbox.Header{{Name: "To", Value: "a@example.com"}}, Payload: []byte(`{"invoice":1}`)}
		first := enqueue(t, db, req)
		again := enqueue(t, db, req)
		if first.Replayed || !again.Replayed || first.ID != again.ID || first.Key != "outbox:"+first.ID.String() {
			t.Fatalf("enqueue %+v, retry %+v", first, again)
		}
		req.Payload = []byte("other")
		if _, err := outbox.Enqueue(ctx, db, req); !errors.Is(err, chain.ErrIdempotencyConflict) {
			t.Fatalf("changed payload: %v, want a conflict", err)
		}
		c := claim(t, db, "acme", "email", outbox.ClaimOptions{Worker: "w1", Max: 10, Now: clock.Now()})
		if len(c.Leases) != 1 || c.Leases[0].Message.Key != first.Key || c.Leases[0].Attempt != 1 ||
			string(c.Leases[0].Message.Payload) != `{"invoice":1}` || c.Leases[0].Message.Header("To") != "a@example.com" {
			t.Fatalf("claim %+v", c)
		}
		if again := claim(t, db, "acme", "email", outbox.ClaimOptions{Worker: "w2", Max: 10, Now: clock.Now()}); len(again.Leases) != 0 {
			t.Fatalf("a leased message was claimed again: %+v", again)
		}
		errs := record(t, db, "acme", "email", outbox.RecordOptions{Worker: "w1", Now: clock.Now()}, outcomeOf(c.Leases[0], nil))
		if errs[0] != nil {
			t.Fatal(errs[0])
		}
		info, err := outbox.Get(ctx, db, "acme", first.ID)
		if err != nil || info.Status != outbox.Done || info.Attempts != 1 || info.Worker != "w1" {
			t.Fatalf("get: %+v %v", info, err)
		}
		var types []string
		for ev, err := range outbox.History(ctx, db, "acme", first.ID) {
			if err != nil {
				t.Fatal(err)
			}
			types = append(types, ev.Type)
		}
		if len(types) != 2 || types[0] != outbox.TypeLease || types[1] != outbox.TypeOutcome {
			t.Fatalf("history %v", types)
		}
		mustCheck(t, db)
	})
}

// A worker whose lease expired and was taken over cannot record its
// outcome over the newer attempt's (the race of riverqueue/river#1302: a
// rescued job's first worker finished last and overwrote the second's).
func TestStaleOutcomeRefused(t *testing.T) {
	clock := newTestClock()
	forEachBackend(t, clock.Now, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		res := enqueue(t, db, outbox.EnqueueRequest{Tenant: "acme", Topic: "capture", IdempotencyKey: "pay-1"})
		lease := 50 * time.Millisecond
		first := claim(t, db, "acme", "capture", outbox.ClaimOptions{Worker: "slow", LeaseDuration: lease, Now: clock.Now()})
		clock.Advance(2 * lease) // the slow worker's lease expires
		second := claim(t, db, "acme", "capture", outbox.ClaimOptions{Worker: "fast", LeaseDuration: lease, Now: clock.Now()})
		if len(first.Leases) != 1 || len(second.Leases) != 1 || second.Expired != 1 || second.Leases[0].Token <= first.Leases[0].Token {
			t.Fatalf("claims %+v, %+v", first, second)
		}
		// The second attempt fails transiently; then the first worker,
		// back from a long pause, reports success, and heartbeats.
		if errs := record(t, db, "acme", "capture", outbox.RecordOptions{Worker: "fast", Now: clock.Now()},
			outcomeOf(second.Leases[0], errors.New("gateway timeout"))); errs[0] != nil {
			t.Fatal(errs[0])
		}
		stale := record(t, db, "acme", "capture", outbox.RecordOptions{Worker: "slow", Now: clock.Now()}, outcomeOf(first.Leases[0], nil))
		if !errors.Is(stale[0], outbox.ErrLeaseLost) {
			t.Fatalf("stale outcome: %v, want ErrLeaseLost", stale[0])
		}
		var hb []error
		err := db.Update(ctx, func(tx *chain.Tx) error {
			var err error
			hb, err = outbox.HeartbeatTx(tx, "acme", "capture", outbox.RecordOptions{Worker: "slow", Now: clock.Now()}, lease, first.Leases)
			return err
		})
		if err != nil || !errors.Is(hb[0], outbox.ErrLeaseLost) {
			t.Fatalf("stale heartbeat: %v %v", hb, err)
		}
		info, err := outbox.Get(ctx, db, "acme", res.ID)
		if err != nil || info.Status != outbox.Pending || info.Attempts != 2 || info.Worker != "fast" {
			t.Fatalf("after the stale outcome: %+v %v", info, err)
		}
		mustCheck(t, db)
	})
}

func TestOrderingKeyBlocksOnlyItsKey(t *testing.T) {
	clock := newTestClock()
	forEachBackend(t, clock.Now, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		var a []outbox.EnqueueResult
		for i, k := range []string{"a1", "a2", "a3"} {
			a = append(a, enqueue(t, db, outbox.EnqueueRequest{Tenant: "acme", Topic: "sync", IdempotencyKey: k, OrderingKey: "customer-A"}))
			if i == 0 {
				enqueue(t, db, outbox.EnqueueRequest{Tenant: "acme", Topic: "sync", IdempotencyKey: "b1", OrderingKey: "customer-B"})
			}
		}
		policy := outbox.Policy{MaxAttempts: 1}
		c := claim(t, db, "acme", "sync", outbox.ClaimOptions{Worker: "w", Max: 10, Now: clock.Now(), Policy: policy})
		if len(c.Leases) != 2 || c.Leases[0].Message.IdempotencyKey != "a1" || c.Leases[1].Message.IdempotencyKey != "b1" {
			t.Fatalf("claim %+v: want the head of each key", c.Leases)
		}
		record(t, db, "acme", "sync", outbox.RecordOptions{Worker: "w", Now: clock.Now(), Policy: policy},
			outcomeOf(c.Leases[0], errors.New("down")), outcomeOf(c.Leases[1], nil))
		clock.Advance(time.Hour)
		if c := claim(t, db, "acme", "sync", outbox.ClaimOptions{Worker: "w", Max: 10, Now: clock.Now(), Policy: policy}); len(c.Leases) != 0 {
			t.Fatalf("a blocked key delivered %+v", c.Leases)
		}
		stats, err := outbox.Stats(ctx, db, "acme", "sync")
		if err != nil || len(stats) != 1 || len(stats[0].BlockedKeys) != 1 || stats[0].BlockedKeys[0].OrderingKey != "customer-A" ||
			stats[0].BlockedKeys[0].Behind != 2 || stats[0].Dead != 1 || stats[0].Done != 1 {
			t.Fatalf("stats %+v %v", stats, err)
		}
		if err := outbox.Requeue(ctx, db, "acme", []outbox.ID{a[0].ID}, outbox.RequeueOptions{Operator: "ops@acme", Reason: "gateway fixed"}); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"a1", "a2", "a3"} {
			c := claim(t, db, "acme", "sync", outbox.ClaimOptions{Worker: "w", Max: 10, Now: clock.Now(), Policy: policy})
			if len(c.Leases) != 1 || c.Leases[0].Message.IdempotencyKey != want {
				t.Fatalf("claim %+v, want only %s", c.Leases, want)
			}
			record(t, db, "acme", "sync", outbox.RecordOptions{Worker: "w", Now: clock.Now(), Policy: policy}, outcomeOf(c.Leases[0], nil))
		}
		mustCheck(t, db)
	})
}
