package idempotency

import (
	"context"
	"slices"
	"sync"
	"time"
)

// MemoryStore keeps records in process memory. It is for tests and
// examples only: its records vanish with the process, and processes cannot
// share it. The zero value is not usable; call NewMemoryStore.
type MemoryStore struct {
	mu      sync.Mutex
	records map[Scope]*Record
	retries map[Scope]retryCount
}

// retryCount is a scope's count of transient failures, kept apart from its
// record.
type retryCount struct {
	n         int
	expiresAt time.Time
}

// NewMemoryStore returns an empty memory store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{records: map[Scope]*Record{}, retries: map[Scope]retryCount{}}
}

func (s *MemoryStore) liveRetries(scope Scope, now time.Time) int {
	rc, ok := s.retries[scope]
	if !ok || !now.Before(rc.expiresAt) {
		return 0
	}
	return rc.n
}

// Create implements Store.
func (s *MemoryStore) Create(ctx context.Context, c Claim) (CreateResult, error) {
	if err := c.Scope.Validate(); err != nil {
		return CreateResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return CreateResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.records[c.Scope]; ok && !r.expired(c.Now) {
		return CreateResult{Record: r.clone()}, nil
	}
	r := newProcessing(c, s.liveRetries(c.Scope, c.Now))
	s.records[c.Scope] = &r
	return CreateResult{Created: true, Record: r.clone()}, nil
}

// newProcessing is the PROCESSING record a claim creates after retries
// transient failures.
func newProcessing(c Claim, retries int) Record {
	return Record{
		Scope: c.Scope, Status: StatusProcessing, RequestHash: c.RequestHash, Token: c.Token,
		Attempt: retries + 1, CreatedAt: c.Now, UpdatedAt: c.Now,
		LeaseExpiresAt: c.LeaseExpiresAt, ExpiresAt: c.ExpiresAt,
	}
}

// Get implements Store.
func (s *MemoryStore) Get(ctx context.Context, scope Scope, now time.Time) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[scope]
	if !ok || r.expired(now) {
		return Record{}, ErrNotFound
	}
	return r.clone(), nil
}

// held returns the PROCESSING record of scope held by token.
func (s *MemoryStore) held(scope Scope, token string, now time.Time) (*Record, error) {
	r, ok := s.records[scope]
	if !ok || r.Status != StatusProcessing || r.Token != token || r.expired(now) {
		return nil, ErrLeaseLost
	}
	return r, nil
}

// onHeld applies change to the PROCESSING record of scope held by token.
func (s *MemoryStore) onHeld(ctx context.Context, scope Scope, token string, now time.Time, change func(r *Record)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.held(scope, token, now)
	if err != nil {
		return err
	}
	change(r)
	return nil
}

// Extend implements Store.
func (s *MemoryStore) Extend(ctx context.Context, scope Scope, token string, leaseExpiresAt, now time.Time) error {
	return s.onHeld(ctx, scope, token, now, func(r *Record) { r.LeaseExpiresAt, r.UpdatedAt = leaseExpiresAt, now })
}

// Succeed implements Store.
func (s *MemoryStore) Succeed(ctx context.Context, scope Scope, token string, resp Response, expiresAt, now time.Time) error {
	resp.Header = resp.Header.Clone()
	resp.Body = slices.Clone(resp.Body)
	return s.onHeld(ctx, scope, token, now, func(r *Record) {
		r.Status, r.Response, r.ExpiresAt, r.UpdatedAt = StatusSuccess, &resp, expiresAt, now
	})
}

// Fail implements Store.
func (s *MemoryStore) Fail(ctx context.Context, scope Scope, token string, failure string, expiresAt, now time.Time) error {
	return s.onHeld(ctx, scope, token, now, func(r *Record) {
		r.Status, r.Failure, r.ExpiresAt, r.UpdatedAt = StatusFailed, failure, expiresAt, now
	})
}

// Release implements Store.
func (s *MemoryStore) Release(ctx context.Context, scope Scope, token string, maxRetries int, expiresAt, now time.Time) (ReleaseResult, error) {
	if err := ctx.Err(); err != nil {
		return ReleaseResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.release(scope, token, maxRetries, expiresAt, now)
}

func (s *MemoryStore) release(scope Scope, token string, maxRetries int, expiresAt, now time.Time) (ReleaseResult, error) {
	r, err := s.held(scope, token, now)
	if err != nil {
		return ReleaseResult{}, err
	}
	n := s.liveRetries(scope, now) + 1
	s.retries[scope] = retryCount{n: n, expiresAt: expiresAt}
	if n >= maxRetries {
		r.Status, r.Failure, r.ExpiresAt, r.UpdatedAt = StatusFailed, poisonedFailure, expiresAt, now
		return ReleaseResult{Retries: n, Poisoned: true}, nil
	}
	delete(s.records, scope)
	return ReleaseResult{Retries: n}, nil
}

// Abandon implements Store.
func (s *MemoryStore) Abandon(ctx context.Context, scope Scope, token string, now time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.held(scope, token, now); err != nil {
		return err
	}
	delete(s.records, scope)
	return nil
}

// poisonedFailure is the Failure of a record poisoned by its retries.
const poisonedFailure = "transient failures reached the retry limit"

// RecoverStuck implements Store.
func (s *MemoryStore) RecoverStuck(ctx context.Context, leaseEndedBy time.Time, limit, maxRetries int, expiresAt, now time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for scope, r := range s.records {
		if n >= limit {
			break
		}
		if r.Status == StatusProcessing && !r.LeaseExpiresAt.After(leaseEndedBy) && !r.expired(now) {
			if _, err := s.release(scope, r.Token, maxRetries, expiresAt, now); err == nil {
				n++
			}
		}
	}
	return n, nil
}

// DeleteExpired implements Store.
func (s *MemoryStore) DeleteExpired(ctx context.Context, now time.Time, limit int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for scope, r := range s.records {
		if n >= limit {
			break
		}
		if r.expired(now) {
			delete(s.records, scope)
			n++
		}
	}
	for scope, rc := range s.retries {
		if !now.Before(rc.expiresAt) {
			delete(s.retries, scope)
		}
	}
	return n, nil
}

// List implements Store.
func (s *MemoryStore) List(ctx context.Context, after Scope, status Status, limit int, now time.Time) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	var out []Record
	for scope, r := range s.records {
		if r.expired(now) || (status != "" && r.Status != status) || (after != (Scope{}) && !scopeLess(after, scope)) {
			continue
		}
		out = append(out, r.clone())
	}
	s.mu.Unlock()
	return firstInScopeOrder(out, limit), nil
}
