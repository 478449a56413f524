package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/outbox"
)

// attempts records what a handler was given.
type attempts struct {
	mu   sync.Mutex
	keys map[string][]string // message key -> the Key of each attempt
	done chan struct{}
	want int
	ok   map[string]bool
}

func newAttempts(want int) *attempts {
	return &attempts{keys: map[string][]string{}, ok: map[string]bool{}, done: make(chan struct{}), want: want}
}

func (a *attempts) add(d *outbox.Delivery, delivered bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.keys[d.Message.IdempotencyKey] = append(a.keys[d.Message.IdempotencyKey], d.Message.Key)
	if delivered && !a.ok[d.Message.IdempotencyKey] {
		a.ok[d.Message.IdempotencyKey] = true
		if len(a.ok) == a.want {
			close(a.done)
		}
	}
}

func (a *attempts) wait(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-a.done:
	case <-time.After(d):
		a.mu.Lock()
		defer a.mu.Unlock()
		t.Fatalf("%d of %d messages delivered", len(a.ok), a.want)
	}
}

func startWorker(t *testing.T, db *chain.DB, o outbox.WorkerOptions) *outbox.Worker {
	t.Helper()
	w, err := outbox.NewWorker(db, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(context.Background()) })
	return w
}

func TestWorkerDeliversRetriesAndDeadLetters(t *testing.T) {
	forEachBackend(t, nil, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		const n = 120
		got := newAttempts(n - 1)
		var mu sync.Mutex
		failedOnce := map[string]bool{}
		handler := func(ctx context.Context, d *outbox.Delivery) error {
			key := d.Message.IdempotencyKey
			switch {
			case key == "m-7":
				got.add(d, false)
				return outbox.Permanent(errors.New("422 unknown customer"))
			case len(key)%2 == 0: // every other message fails once first
				mu.Lock()
				first := !failedOnce[key]
				failedOnce[key] = true
				mu.Unlock()
				if first {
					got.add(d, false)
					return errors.New("503 try later")
				}
			}
			d.Detail = "202 accepted"
			got.add(d, true)
			return nil
		}
		policy := outbox.Policy{BackoffMin: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond}
		startWorker(t, db, outbox.WorkerOptions{Tenant: "acme", Topics: map[string]outbox.Topic{"email": {Handler: handler, Policy: policy}},
			Concurrency: 8, PollInterval: 50 * time.Millisecond, LeaseDuration: 5 * time.Second})
		startWorker(t, db, outbox.WorkerOptions{Tenant: "acme", Topics: map[string]outbox.Topic{"email": {Handler: handler, Policy: policy}},
			Concurrency: 8, PollInterval: 50 * time.Millisecond, LeaseDuration: 5 * time.Second})
		for i := range n {
			ordering := ""
			if i%3 == 0 {
				ordering = fmt.Sprintf("cust-%d", i%4)
			}
			enqueue(t, db, outbox.EnqueueRequest{Tenant: "acme", Topic: "email", IdempotencyKey: fmt.Sprintf("m-%d", i), OrderingKey: ordering})
		}
		got.wait(t, 30*time.Second)
		got.mu.Lock()
		for key, keys := range got.keys {
			want := outbox.MessageID("acme", "email", key).Key()
			for _, k := range keys {
				if k != want {
					t.Errorf("%s attempted with key %s, want %s", key, k, want)
				}
			}
		}
		got.mu.Unlock()
		waitFor(t, func() bool {
			dead, err := outbox.ListDead(ctx, db, "acme", "email")
			return err == nil && len(dead) == 1 && dead[0].Message.IdempotencyKey == "m-7"
		})
		waitFor(t, func() bool {
			s, err := outbox.Stats(ctx, db, "acme", "email")
			return err == nil && len(s) == 1 && s[0].Done == n-1 && s[0].Dead == 1
		})
		mustCheck(t, db)
	})
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Messages of one ordering key reach the handler one at a time, in
// enqueue order, even with many handler goroutines and two workers.
func TestWorkerOrderingKeyOneAtATime(t *testing.T) {
	db := openBolt(t, tempLedger(t), nil)
	defer db.Close()
	const n = 60
	var mu sync.Mutex
	running := map[string]bool{}
	seen := map[string][]int{}
	got := newAttempts(n)
	handler := func(ctx context.Context, d *outbox.Delivery) error {
		k := d.Message.OrderingKey
		mu.Lock()
		if running[k] {
			mu.Unlock()
			t.Errorf("two messages of key %s at once", k)
			return nil
		}
		running[k] = true
		var i int
		fmt.Sscanf(d.Message.IdempotencyKey, "m-%d", &i)
		seen[k] = append(seen[k], i)
		mu.Unlock()
		time.Sleep(time.Millisecond)
		mu.Lock()
		running[k] = false
		mu.Unlock()
		got.add(d, true)
		return nil
	}
	for range 2 {
		startWorker(t, db, outbox.WorkerOptions{Tenant: "acme", Topics: map[string]outbox.Topic{"sync": {Handler: handler}}, Concurrency: 16})
	}
	for i := range n {
		enqueue(t, db, outbox.EnqueueRequest{Tenant: "acme", Topic: "sync", IdempotencyKey: fmt.Sprintf("m-%d", i), OrderingKey: fmt.Sprintf("k%d", i%3)})
	}
	got.wait(t, 20*time.Second)
	mu.Lock()
	defer mu.Unlock()
	for k, order := range seen {
		for j := 1; j < len(order); j++ {
			if order[j] <= order[j-1] {
				t.Fatalf("key %s delivered in order %v", k, order)
			}
		}
	}
	mustCheck(t, db)
}

// A message that sorts before messages already delivered (its due time is
// earlier: it was enqueued, or became due, behind the point a reader that
// kept a cursor would have passed) is still delivered. This is the
// out-of-order commit bug of watermill-sql (ThreeDotsLabs/watermill#311),
// where a consumer's offset skipped a row whose transaction committed after
// a later row's; the outbox keeps no cursor: every claim reads the ready
// index from its start.
func TestLateCommitNotSkipped(t *testing.T) {
	clock := newTestClock()
	forEachBackend(t, clock.Now, func(t *testing.T, db *chain.DB) {
		enqueue(t, db, outbox.EnqueueRequest{Tenant: "acme", Topic: "hooks", IdempotencyKey: "later"})
		c := claim(t, db, "acme", "hooks", outbox.ClaimOptions{Worker: "w", Now: clock.Now()})
		record(t, db, "acme", "hooks", outbox.RecordOptions{Worker: "w", Now: clock.Now()}, outcomeOf(c.Leases[0], nil))
		// Committed now, due before the message just delivered.
		early := enqueue(t, db, outbox.EnqueueRequest{Tenant: "acme", Topic: "hooks", IdempotencyKey: "earlier",
			NotBefore: clock.Now().Add(-time.Hour)})
		c = claim(t, db, "acme", "hooks", outbox.ClaimOptions{Worker: "w", Now: clock.Now()})
		if len(c.Leases) != 1 || c.Leases[0].Message.ID != early.ID {
			t.Fatalf("claim %+v: the late-committed message was skipped", c.Leases)
		}
	})
}

// stallMetrics holds the recorder in Attempted, called after an outcome
// batch committed and before the worker lets go of its leases, until
// release is closed; it counts the claims.
type stallMetrics struct {
	release chan struct{}
	claims  atomic.Int64
}

func (m *stallMetrics) Claimed(string, int, int)                            { m.claims.Add(1) }
func (m *stallMetrics) Attempted(string, outbox.OutcomeKind, time.Duration) { <-m.release }
func (m *stallMetrics) PickedUp(string, time.Duration)                      {}
func (m *stallMetrics) DeadLettered(string, outbox.DeadReason, int)         {}
func (m *stallMetrics) LeaseLost(string, int)                               {}
func (m *stallMetrics) Backlog(string, int, time.Duration)                  {}

// TestWorkerClaimsWhileOutcomesRecord: once the handlers are done with a
// batch, the worker claims the next one without waiting for its outcomes'
// record.
func TestWorkerClaimsWhileOutcomesRecord(t *testing.T) {
	forEachBackend(t, nil, func(t *testing.T, db *chain.DB) {
		const n, batch = 30, 10
		for i := range n {
			enqueue(t, db, outbox.EnqueueRequest{Tenant: "acme", Topic: "ahead", IdempotencyKey: fmt.Sprintf("m-%02d", i),
				Payload: []byte("{}")})
		}
		m := &stallMetrics{release: make(chan struct{})}
		var once sync.Once
		let := func() { once.Do(func() { close(m.release) }) }
		got := newAttempts(n)
		startWorker(t, db, outbox.WorkerOptions{Tenant: "acme", Concurrency: 1, ClaimBatch: batch, Metrics: m,
			PollInterval: 10 * time.Millisecond,
			Topics: map[string]outbox.Topic{"ahead": {Handler: func(ctx context.Context, d *outbox.Delivery) error {
				got.add(d, true)
				return nil
			}}}})
		t.Cleanup(let) // before the worker's Stop, which waits for the recorder
		deadline := time.Now().Add(10 * time.Second)
		for m.claims.Load() < 2 {
			if time.Now().After(deadline) {
				t.Fatalf("%d claims while the first batch's outcomes are held in their record, want 2", m.claims.Load())
			}
			time.Sleep(5 * time.Millisecond)
		}
		let()
		got.wait(t, 30*time.Second)
		for key, tries := range got.keys {
			if len(tries) != 1 {
				t.Errorf("%s attempted %d times", key, len(tries))
			}
		}
	})
}

// TestWorkerQueuesOneBatchForSlowHandlers: while the handlers are busy,
// no more than Concurrency+ClaimBatch leases wait for or run in them, so a
// slow receiver does not hold more messages than that.
func TestWorkerQueuesOneBatchForSlowHandlers(t *testing.T) {
	forEachBackend(t, nil, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		const n, batch, concurrency = 50, 10, 2
		for i := range n {
			enqueue(t, db, outbox.EnqueueRequest{Tenant: "acme", Topic: "slow", IdempotencyKey: fmt.Sprintf("m-%02d", i),
				Payload: []byte("{}")})
		}
		release := make(chan struct{})
		var once sync.Once
		let := func() { once.Do(func() { close(release) }) }
		var running atomic.Int64
		got := newAttempts(n)
		startWorker(t, db, outbox.WorkerOptions{Tenant: "acme", Concurrency: concurrency, ClaimBatch: batch,
			PollInterval: 10 * time.Millisecond,
			Topics: map[string]outbox.Topic{"slow": {Handler: func(ctx context.Context, d *outbox.Delivery) error {
				running.Add(1)
				<-release
				got.add(d, true)
				return nil
			}}}})
		t.Cleanup(let) // before the worker's Stop, which waits for the handlers
		deadline := time.Now().Add(10 * time.Second)
		for running.Load() < concurrency {
			if time.Now().After(deadline) {
				t.Fatalf("%d handlers running, want %d", running.Load(), concurrency)
			}
			time.Sleep(5 * time.Millisecond)
		}
		for range 10 { // a claim beyond the bound would land in these 100 ms
			s, err := outbox.Stats(ctx, db, "acme", "slow")
			if err != nil {
				t.Fatal(err)
			}
			if s[0].Leased > concurrency+batch {
				t.Fatalf("%d messages leased for %d busy handlers, at most %d", s[0].Leased, concurrency, concurrency+batch)
			}
			time.Sleep(10 * time.Millisecond)
		}
		let()
		got.wait(t, 30*time.Second)
	})
}
