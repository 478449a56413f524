package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/outbox"
)

// Activity counts each outcome once, in the bucket of its entry's time,
// and nothing before the window; a bad window is refused.
func TestActivity(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	forEachBackend(t, clock.Now, func(t *testing.T, db *chain.DB) {
		for _, key := range []string{"a", "b", "c", "d"} {
			enqueue(t, db, outbox.EnqueueRequest{Tenant: "acme", Topic: "t", IdempotencyKey: key, Payload: []byte("{}")})
		}
		start := clock.Now()
		attempt := func(err error) {
			c := claim(t, db, "acme", "t", outbox.ClaimOptions{Worker: "w", Now: clock.Now()})
			if len(c.Leases) != 1 {
				t.Fatalf("claimed %d", len(c.Leases))
			}
			record(t, db, "acme", "t", outbox.RecordOptions{Worker: "w", Now: clock.Now()}, outcomeOf(c.Leases[0], err))
		}
		attempt(errors.New("down")) // a failure in the first minute
		clock.Advance(90 * time.Second)
		attempt(nil) // deliveries in the second minute
		attempt(nil)
		clock.Advance(10 * time.Minute)
		attempt(nil) // past the window's end: counted in its last bucket
		rep, err := outbox.Activity(ctx, db, "acme", "t", start, time.Minute, 3)
		if err != nil {
			t.Fatal(err)
		}
		b := rep.Buckets
		if b[0].Failed != 1 || b[0].Delivered != 0 || b[1].Delivered != 2 || b[2].Delivered != 1 || rep.Truncated || !b[1].Start.Equal(start.Add(time.Minute)) {
			t.Fatalf("buckets %+v", b)
		}
		later, err := outbox.Activity(ctx, db, "acme", "t", clock.Now().Add(time.Minute), time.Minute, 3)
		if err != nil || later.Buckets[0].Delivered+later.Buckets[2].Delivered+later.Buckets[0].Failed != 0 {
			t.Fatalf("a window after every outcome: %+v %v", later, err)
		}
		if _, err := outbox.Activity(ctx, db, "acme", "t", start, time.Minute, 0); !errors.Is(err, chain.ErrInvalid) {
			t.Fatalf("zero buckets: %v", err)
		}
		if rep, err := outbox.Activity(ctx, db, "acme", "none", start, time.Minute, 2); err != nil || len(rep.Buckets) != 2 {
			t.Fatalf("a topic without deliveries: %+v %v", rep, err)
		}
	})
}
