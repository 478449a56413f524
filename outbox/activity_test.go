package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"pgregory.net/rapid"

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

// Activity against a plain model: random attempts (delivered, failed,
// rejected) at random times, and random windows; every outcome in the
// window is counted once, in the bucket its time falls in (the last one
// also taking what comes after its end).
func TestActivityModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		clock := newTestClock()
		db := openBolt(rt, filepath.Join(t.TempDir(), "ledger.db"), clock.Now)
		defer db.Close()
		ctx := context.Background()
		type outcome struct {
			at   time.Time
			kind int // 0 delivered, 1 failed, 2 rejected
		}
		var model []outcome
		n := rapid.IntRange(1, 12).Draw(rt, "messages")
		for i := range n {
			enqueue(t, db, outbox.EnqueueRequest{Tenant: "acme", Topic: "t", IdempotencyKey: fmt.Sprint("m", i), Payload: []byte("{}")})
		}
		for range rapid.IntRange(0, 2*n).Draw(rt, "attempts") {
			clock.Advance(time.Duration(rapid.IntRange(0, 120).Draw(rt, "wait_s")) * time.Second)
			c := claim(t, db, "acme", "t", outbox.ClaimOptions{Worker: "w", Now: clock.Now(), LeaseDuration: time.Minute})
			if len(c.Leases) == 0 {
				continue
			}
			kind := rapid.IntRange(0, 2).Draw(rt, "kind")
			err := []error{nil, errors.New("down"), fmt.Errorf("gone: %w", outbox.ErrPermanent)}[kind]
			record(t, db, "acme", "t", outbox.RecordOptions{Worker: "w", Now: clock.Now()},
				outcomeOf(c.Leases[0], err))
			model = append(model, outcome{clock.Now(), kind})
		}
		start := newTestClock().Now().Add(time.Duration(rapid.IntRange(-60, 600).Draw(rt, "start_s")) * time.Second)
		width := time.Duration(rapid.IntRange(1, 300).Draw(rt, "width_s")) * time.Second
		buckets := rapid.IntRange(1, 20).Draw(rt, "buckets")
		rep, err := outbox.Activity(ctx, db, "acme", "t", start, width, buckets)
		if err != nil {
			rt.Fatal(err)
		}
		want := make([][3]int64, buckets)
		for _, o := range model {
			if o.at.Before(start) {
				continue
			}
			i := min(int(o.at.Sub(start)/width), buckets-1)
			want[i][o.kind]++
		}
		for i, b := range rep.Buckets {
			if got := [3]int64{b.Delivered, b.Failed, b.Rejected}; got != want[i] {
				rt.Fatalf("bucket %d: %v, want %v (all %+v)", i, got, want[i], rep.Buckets)
			}
		}
	})
}
