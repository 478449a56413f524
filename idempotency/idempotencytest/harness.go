package idempotencytest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/idempotency"
)

// Harness opens the stores of one kind for the suite.
type Harness struct {
	// Open returns a fresh, empty store, closed when the test ends.
	Open func(t *testing.T) idempotency.Store
	// Unreachable returns a store of the same kind whose backend does not
	// answer (closed, or never reachable); nil: the suite wraps Open's
	// store in one that fails every call.
	Unreachable func(t *testing.T) idempotency.Store
}

// Clock is a settable clock for leases and expiry.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock at a fixed time.
func NewClock() *Clock { return &Clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// ErrDown is the error of a DownStore.
var ErrDown = errors.New("idempotencytest: store down")

// DownStore fails every call with ErrDown.
type DownStore struct{}

func (DownStore) Create(context.Context, idempotency.Claim) (idempotency.CreateResult, error) {
	return idempotency.CreateResult{}, ErrDown
}
func (DownStore) Get(context.Context, idempotency.Scope, time.Time) (idempotency.Record, error) {
	return idempotency.Record{}, ErrDown
}
func (DownStore) Extend(context.Context, idempotency.Scope, string, time.Time, time.Time) error {
	return ErrDown
}
func (DownStore) Succeed(context.Context, idempotency.Scope, string, idempotency.Response, time.Time, time.Time) error {
	return ErrDown
}
func (DownStore) Fail(context.Context, idempotency.Scope, string, string, time.Time, time.Time) error {
	return ErrDown
}
func (DownStore) Release(context.Context, idempotency.Scope, string, int, time.Time, time.Time) (idempotency.ReleaseResult, error) {
	return idempotency.ReleaseResult{}, ErrDown
}
func (DownStore) Abandon(context.Context, idempotency.Scope, string, time.Time) error { return ErrDown }
func (DownStore) RecoverStuck(context.Context, time.Time, int, int, time.Time, time.Time) (int, error) {
	return 0, ErrDown
}
func (DownStore) DeleteExpired(context.Context, time.Time, int) (int, error) { return 0, ErrDown }
func (DownStore) List(context.Context, idempotency.Scope, idempotency.Status, int, time.Time) ([]idempotency.Record, error) {
	return nil, ErrDown
}

// DownCache fails every call.
type DownCache struct{}

func (DownCache) Get(context.Context, idempotency.Scope) (idempotency.Record, bool, error) {
	return idempotency.Record{}, false, ErrDown
}
func (DownCache) Add(context.Context, idempotency.Record) error { return ErrDown }

// Run runs the store rules and the guard's contract against h's stores.
func Run(t *testing.T, h Harness) {
	for _, tc := range storeTests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h.Open(t)) })
	}
	for _, tc := range guardTests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h) })
	}
}
