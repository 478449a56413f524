package idempotency

import (
	"context"
	"slices"
	"time"
)

// Store keeps the records of the guard. Every method is safe for concurrent
// use. Times are the caller's (the guard's clock), so that one clock decides
// leases and expiry across processes sharing a store.
//
// The rules every store keeps (the conformance suite in idempotencytest
// checks them):
//
//   - Create is atomic: of concurrent creates of one scope, in goroutines or
//     in processes sharing the store, exactly one returns Created.
//   - A record whose ExpiresAt has passed counts as absent: Create replaces
//     it, Get and List do not return it.
//   - Extend, Succeed, Fail, Release and Abandon act only on a PROCESSING record
//     held by the given token; otherwise they return ErrLeaseLost and change
//     nothing. A stale attempt can never change a finished record.
//   - The retry count of a scope survives the deletion of its record: it is
//     kept apart, keyed by the scope, until it expires itself.
//   - Errors other than ErrNotFound, ErrLeaseLost and ErrInvalidScope mean
//     the store could not answer.
type Store interface {
	// Create claims c's scope for a new attempt. When no live record
	// exists it writes a PROCESSING record (Attempt = retry count + 1) and
	// returns Created; otherwise it returns the existing record.
	Create(ctx context.Context, c Claim) (CreateResult, error)
	// Get returns the live record of scope, or ErrNotFound.
	Get(ctx context.Context, scope Scope, now time.Time) (Record, error)
	// Extend moves the lease of the PROCESSING record held by token.
	Extend(ctx context.Context, scope Scope, token string, leaseExpiresAt, now time.Time) error
	// Succeed makes the record held by token SUCCESS with resp, until
	// expiresAt.
	Succeed(ctx context.Context, scope Scope, token string, resp Response, expiresAt, now time.Time) error
	// Fail makes the record held by token FAILED (poisoned) until expiresAt.
	Fail(ctx context.Context, scope Scope, token string, failure string, expiresAt, now time.Time) error
	// Release ends the attempt held by token as a transient failure: it
	// adds one to the scope's retry count and deletes the record, or, when
	// the count reaches maxRetries, makes it FAILED until expiresAt.
	Release(ctx context.Context, scope Scope, token string, maxRetries int, expiresAt, now time.Time) (ReleaseResult, error)
	// Abandon ends the attempt held by token because a store could not
	// answer it (an outage, not a failure of the operation): it deletes
	// the record and leaves the scope's retry count as it is, so that an
	// outage never poisons a key.
	Abandon(ctx context.Context, scope Scope, token string, now time.Time) error
	// RecoverStuck releases, as Release would, up to limit PROCESSING
	// records whose lease ended at or before leaseEndedBy, and returns
	// how many it released.
	RecoverStuck(ctx context.Context, leaseEndedBy time.Time, limit, maxRetries int, expiresAt, now time.Time) (int, error)
	// DeleteExpired deletes up to limit records (and retry counts) whose
	// ExpiresAt is at or before now, and returns how many records it
	// deleted.
	DeleteExpired(ctx context.Context, now time.Time, limit int) (int, error)
	// List returns up to limit live records in scope order after the
	// scope `after` (all from the start when after is the zero Scope),
	// only those with the status when status is not empty.
	List(ctx context.Context, after Scope, status Status, limit int, now time.Time) ([]Record, error)
}

// Claim asks Store.Create for a scope.
type Claim struct {
	Scope
	RequestHash    [32]byte
	Token          string
	Now            time.Time
	LeaseExpiresAt time.Time
	ExpiresAt      time.Time
}

// CreateResult is what Store.Create answers.
type CreateResult struct {
	// Created is set when this claim now holds the scope.
	Created bool
	// Record is the created record, or the existing one.
	Record Record
}

// ReleaseResult is what Store.Release answers.
type ReleaseResult struct {
	// Retries is the scope's retry count after this release.
	Retries int
	// Poisoned is set when the release reached maxRetries and the record
	// is now FAILED.
	Poisoned bool
}

// scopeLess orders scopes as List does.
func scopeLess(a, b Scope) bool {
	if a.Operation != b.Operation {
		return a.Operation < b.Operation
	}
	if a.User != b.User {
		return a.User < b.User
	}
	return a.Key < b.Key
}

// firstInScopeOrder sorts recs in scope order and returns the first limit.
func firstInScopeOrder(recs []Record, limit int) []Record {
	slices.SortFunc(recs, func(a, b Record) int {
		if scopeLess(a.Scope, b.Scope) {
			return -1
		}
		if scopeLess(b.Scope, a.Scope) {
			return 1
		}
		return 0
	})
	if len(recs) > limit {
		recs = recs[:limit]
	}
	return recs
}
