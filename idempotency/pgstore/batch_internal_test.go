package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/idempotency"
)

// TestBatcherGathersWaitingCalls: with batchInflightMax sends blocked, the
// calls that come meanwhile go in one batch, each answered its own result,
// and an error answers every call of its batch.
func TestBatcherGathersWaitingCalls(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var sizes []int
	b := &batcher[int, int]{send: func(_ context.Context, items []int) ([]int, error) {
		mu.Lock()
		sizes = append(sizes, len(items))
		mu.Unlock()
		if items[0] < 0 {
			return nil, errors.New("refused")
		}
		<-release
		out := make([]int, len(items))
		for i, v := range items {
			out[i] = 2 * v
		}
		return out, nil
	}}
	const waiting = 10
	var wg sync.WaitGroup
	errs := make(chan error, batchInflightMax+waiting)
	call := func(v int) {
		defer wg.Done()
		got, err := b.do(context.Background(), v)
		if err != nil || got != 2*v {
			errs <- fmt.Errorf("do(%d) = %d, %v; want %d", v, got, err, 2*v)
		}
	}
	for v := range batchInflightMax {
		wg.Add(1)
		go call(1000 + v)
	}
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(sizes) == batchInflightMax })
	for v := range waiting {
		wg.Add(1)
		go call(v)
	}
	waitFor(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.pending != nil && len(b.pending.items) == waiting
	})
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(sizes) != batchInflightMax+1 || sizes[batchInflightMax] != waiting {
		t.Fatalf("batch sizes %v, want %d sends of 1 then one of %d", sizes, batchInflightMax, waiting)
	}
	// The last sender gives its slot back after its callers are answered.
	waitFor(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return b.inflight == 0 && b.pending == nil })
	if _, err := b.do(context.Background(), -1); err == nil || err.Error() != "refused" {
		t.Fatalf("a refused batch answered %v", err)
	}
}

// TestBatcherSendsAFullBatch: a call that fills a batch sends it although
// batchInflightMax sends are under way.
func TestBatcherSendsAFullBatch(t *testing.T) {
	release := make(chan struct{})
	sent := make(chan int, batchInflightMax+2)
	b := &batcher[int, int]{send: func(_ context.Context, items []int) ([]int, error) {
		sent <- len(items)
		if items[0] >= 0 {
			<-release
		}
		return make([]int, len(items)), nil
	}}
	var wg sync.WaitGroup
	for range batchInflightMax {
		wg.Add(1)
		go func() { defer wg.Done(); b.do(context.Background(), 0) }()
		<-sent
	}
	for range batchItemsMax {
		wg.Add(1)
		go func() { defer wg.Done(); b.do(context.Background(), -1) }()
	}
	select {
	case n := <-sent:
		if n != batchItemsMax {
			t.Fatalf("sent a batch of %d, want %d", n, batchItemsMax)
		}
	case <-time.After(time.Minute):
		t.Fatal("a full batch waited for the sends in flight")
	}
	close(release)
	wg.Wait()
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in a minute")
		}
	}
}

// TestBatchedClaimsAndSuccesses: concurrent claims of the same scopes, in
// whatever batches they fall, create each scope once; concurrent SUCCESS
// records are written for the holders only, a stale token answered
// ErrLeaseLost.
func TestBatchedClaimsAndSuccesses(t *testing.T) {
	ctx := context.Background()
	s := openInternal(t, 4)
	const scopes, per = 16, 4
	now := time.Now()
	var mu sync.Mutex
	holders := map[string]string{} // key -> token of the created claim
	var wg sync.WaitGroup
	for i := range scopes * per {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := idempotency.Claim{Scope: idempotency.Scope{Operation: "POST /pay", User: "alice", Key: fmt.Sprint("k", i%scopes)},
				Token: fmt.Sprint("t", i), Now: now, LeaseExpiresAt: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}
			res, err := s.Create(ctx, c)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if res.Created {
				if h, ok := holders[c.Key]; ok {
					t.Errorf("%s created twice: by %s and %s", c.Key, h, c.Token)
				}
				holders[c.Key] = c.Token
			}
		}()
	}
	wg.Wait()
	if len(holders) != scopes {
		t.Fatalf("%d scopes created, want %d", len(holders), scopes)
	}
	for key, token := range holders {
		for _, tok := range []string{token, "stale"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := s.Succeed(ctx, idempotency.Scope{Operation: "POST /pay", User: "alice", Key: key}, tok,
					idempotency.Response{Status: 201, Header: map[string][]string{"X": {key}}, Body: []byte(key)}, now.Add(time.Hour), now)
				if want := error(nil); tok == "stale" && !errors.Is(err, idempotency.ErrLeaseLost) || tok != "stale" && err != want {
					t.Errorf("Succeed(%s, %s) = %v", key, tok, err)
				}
			}()
		}
	}
	wg.Wait()
	for key, token := range holders {
		rec, err := s.Get(ctx, idempotency.Scope{Operation: "POST /pay", User: "alice", Key: key}, now)
		if err != nil || rec.Status != idempotency.StatusSuccess || rec.Token != token || string(rec.Response.Body) != key ||
			rec.Response.Header.Get("X") != key || rec.Response.Status != 201 {
			t.Errorf("%s: %+v, %v", key, rec, err)
		}
	}
}

// TestSendClaimsAnswersEachClaim: one batch of claims in no order, with a
// scope twice and a scope already held, answers each claim by its own
// scope: created for the first claim of each new scope (attempt 1), not
// for the second nor for the held one; the held scope keeps its holder.
func TestSendClaimsAnswersEachClaim(t *testing.T) {
	ctx := context.Background()
	s := openInternal(t, 2)
	now := time.Now()
	claim := func(op, key, token string) idempotency.Claim {
		return idempotency.Claim{Scope: idempotency.Scope{Operation: op, User: "alice", Key: key}, Token: token,
			Now: now, LeaseExpiresAt: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}
	}
	held := claim("POST /pay", "k-held", "t-holder")
	if res, err := s.Create(ctx, held); err != nil || !res.Created {
		t.Fatalf("Create: %+v, %v", res, err)
	}
	batch := []idempotency.Claim{
		claim("POST /pay", "k-2", "t0"),
		claim("POST /pay/"+strings.Repeat("x", 40), "k-1", "t1"), // an operation longer than a short string
		claim("POST /pay", "k-held", "t2"),
		claim("POST /pay", "k-1", "t3"),
		claim("POST /pay", "k-2", "t4"), // k-2 again: t0 came first
		claim("POST /a", "k-2", "t5"),
	}
	got, err := s.sendClaims(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	want := []bool{true, true, false, true, false, true}
	for i, c := range batch {
		if got[i].created != want[i] || want[i] && got[i].attempt != 1 {
			t.Errorf("claim %s %s (%s): %+v, want created %v", c.Operation, c.Key, c.Token, got[i], want[i])
		}
	}
	for _, c := range []idempotency.Claim{batch[0], batch[1], batch[3], batch[5], held} {
		rec, err := s.Get(ctx, c.Scope, now)
		if err != nil || rec.Token != c.Token || rec.Status != idempotency.StatusProcessing {
			t.Errorf("%s %s: %+v, %v; want held by %s", c.Operation, c.Key, rec, err, c.Token)
		}
	}
}
