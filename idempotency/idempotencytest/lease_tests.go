package idempotencytest

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/idempotency"
)

// deadAttempt leaves, as a server that died would, a PROCESSING record of
// body1 under alice's key k-1 whose lease ends after lease.
func deadAttempt(t *testing.T, s *server, store idempotency.Store, lease time.Duration) idempotency.Scope {
	t.Helper()
	now := s.clock.Now()
	canon, _ := idempotency.CanonicalJSON([]byte(body1))
	scope := idempotency.Scope{Operation: "POST /payments", User: "alice", Key: "k-1"}
	_, err := store.Create(context.Background(), idempotency.Claim{Scope: scope, RequestHash: idempotency.RequestHash(scope.Operation, canon),
		Token: "dead-server", Now: now, LeaseExpiresAt: now.Add(lease), ExpiresAt: now.Add(24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	return scope
}

// A retry while another attempt holds the key is told to come back when
// the holder's lease ends (rounded up, at least a second).
func testRetryAfterLeaseLeft(t *testing.T, h Harness) {
	store := h.Open(t)
	s := newServer(t, store, idempotency.Options{LeaseDuration: time.Minute})
	deadAttempt(t, s, store, time.Minute)
	for _, c := range []struct {
		advance time.Duration
		want    string
	}{{0, "60"}, {44*time.Second + 500*time.Millisecond, "16"}, {15 * time.Second, "1"}} {
		s.clock.Advance(c.advance)
		r := s.do(t, "/payments", "alice", "k-1", body1)
		if r.code() != string(idempotency.CodeInProgress) || r.header.Get("Retry-After") != c.want {
			t.Fatalf("after %v more: %d %s Retry-After %q, want REQUEST_IN_PROGRESS with %s", c.advance, r.status, r.code(), r.header.Get("Retry-After"), c.want)
		}
	}
}

// The first retry after a dead attempt's lease ended runs the request
// itself, without waiting for the jobs; the dead attempt counts as a
// transient failure, as the jobs would count it.
func testTakeOver(t *testing.T, h Harness) {
	store := h.Open(t)
	s := newServer(t, store, idempotency.Options{LeaseDuration: 10 * time.Second})
	scope := deadAttempt(t, s, store, 10*time.Second)
	if r := s.do(t, "/payments", "alice", "k-1", `{"amount":2}`); r.code() != string(idempotency.CodeKeyReused) {
		t.Fatalf("another body: %+v", r)
	}
	s.clock.Advance(10 * time.Second)
	if r := s.do(t, "/payments", "alice", "k-1", `{"amount":2}`); r.code() != string(idempotency.CodeKeyReused) {
		t.Fatalf("another body after the lease ended: %+v, want a conflict, never a take-over", r)
	}
	r := s.do(t, "/payments", "alice", "k-1", body1)
	if r.status != http.StatusCreated || r.header.Get(idempotency.ReplayedHeader) != "" {
		t.Fatalf("retry after the lease ended: %+v, want a fresh execution", r)
	}
	if rec, err := store.Get(context.Background(), scope, s.clock.Now()); err != nil || rec.Attempt != 2 || rec.Status != idempotency.StatusSuccess {
		t.Fatalf("record after the take-over: %+v, %v", rec, err)
	}
	if err := store.Succeed(context.Background(), scope, "dead-server", idempotency.Response{Status: 200}, s.clock.Now().Add(time.Hour), s.clock.Now()); !errors.Is(err, idempotency.ErrLeaseLost) {
		t.Fatalf("the dead attempt finished after the take-over: %v, want ErrLeaseLost", err)
	}
}

// An outage is retried as often as it takes: it frees the key without
// counting, where three handler failures poison it.
func testOutagesNeverPoison(t *testing.T, h Harness) {
	store := h.Open(t)
	s := newServer(t, store, idempotency.Options{MaxRetries: 3,
		IsOutage: func(status int, err error) bool { return status == http.StatusServiceUnavailable }})
	var attempts []int
	s.behave = func(w http.ResponseWriter, r *http.Request, run int64) {
		attempts = append(attempts, idempotency.FromContext(r.Context()).Attempt)
		if run <= 5 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}
	for i := range 5 {
		if r := s.do(t, "/payments", "alice", "k-1", body1); r.status != http.StatusServiceUnavailable {
			t.Fatalf("outage %d: %+v", i+1, r)
		}
	}
	if r := s.do(t, "/payments", "alice", "k-1", body1); r.status != http.StatusCreated {
		t.Fatalf("after five outages: %+v, want the request run", r)
	}
	for i, a := range attempts {
		if a != 1 {
			t.Fatalf("attempt numbers %v: outages counted (run %d)", attempts, i+1)
		}
	}
	s.behave = func(w http.ResponseWriter, r *http.Request, run int64) { w.WriteHeader(http.StatusInternalServerError) }
	for range 3 {
		s.do(t, "/payments", "alice", "k-2", body1)
	}
	if r := s.do(t, "/payments", "alice", "k-2", body1); r.code() != string(idempotency.CodeRequestFailed) {
		t.Fatalf("after three handler failures: %+v, want the key poisoned", r)
	}
}

// flakyEnds fails the first calls of Release and Abandon, as a store
// whose connection was terminated under them.
type flakyEnds struct {
	idempotency.Store
	failures atomic.Int32
}

var errTerminated = errors.New("idempotencytest: backend terminated")

func (f *flakyEnds) Release(ctx context.Context, sc idempotency.Scope, token string, maxRetries int, expiresAt, now time.Time) (idempotency.ReleaseResult, error) {
	if f.failures.Add(-1) >= 0 {
		return idempotency.ReleaseResult{}, errTerminated
	}
	return f.Store.Release(ctx, sc, token, maxRetries, expiresAt, now)
}

func (f *flakyEnds) Abandon(ctx context.Context, sc idempotency.Scope, token string, now time.Time) error {
	if f.failures.Add(-1) >= 0 {
		return errTerminated
	}
	return f.Store.Abandon(ctx, sc, token, now)
}

// A release that fails is tried again: the key is free for the next
// retry, not held until its lease ends.
func testReleaseRetried(t *testing.T, h Harness) {
	store := &flakyEnds{Store: h.Open(t)}
	s := newServer(t, store, idempotency.Options{LeaseDuration: time.Hour,
		IsOutage: func(status int, err error) bool { return status == http.StatusServiceUnavailable }})
	for _, status := range []int{http.StatusInternalServerError, http.StatusServiceUnavailable} {
		key := http.StatusText(status)
		store.failures.Store(2)
		s.behave = func(w http.ResponseWriter, r *http.Request, run int64) {
			if run == 1 {
				w.WriteHeader(status)
				return
			}
			w.WriteHeader(http.StatusCreated)
		}
		if r := s.do(t, "/payments", "alice", key, body1); r.status != status {
			t.Fatalf("first: %+v", r)
		}
		if r := s.do(t, "/payments", "alice", key, body1); r.status != http.StatusCreated {
			t.Fatalf("retry after a %d whose release failed twice: %+v, want the request run", status, r)
		}
	}
}
