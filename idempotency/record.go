package idempotency

import (
	"net/http"
	"time"
)

// Status is the state of a record.
type Status string

// The states of a record. PROCESSING becomes SUCCESS or FAILED, or is
// deleted when an attempt fails transiently; SUCCESS and FAILED are final
// until the record expires.
const (
	StatusProcessing Status = "PROCESSING"
	StatusSuccess    Status = "SUCCESS"
	StatusFailed     Status = "FAILED"
)

// Scope names one idempotent request: the operation (a route, carrying the
// tenant where there is one), the authenticated user, and the client's key.
// Two requests share a record only when all three are equal.
type Scope struct {
	Operation string
	User      string
	Key       string
}

// Response is a stored response: what a replay writes back.
type Response struct {
	Status int
	Header http.Header // only the allow-listed headers
	Body   []byte
}

// Record is a store's record of one scope.
type Record struct {
	Scope
	Status Status
	// RequestHash is the hash of the request that created the record
	// (Guard's RequestHash); a retry with another hash is a conflict.
	RequestHash [32]byte
	// Token fences the attempt that holds a PROCESSING record: only a call
	// carrying it can finish or release the record.
	Token string
	// Attempt counts the attempts of the scope, this one included: 1 for
	// the first, more after transient failures.
	Attempt int
	// Response is the stored response of a SUCCESS record.
	Response *Response
	// Failure describes why a FAILED record failed.
	Failure string

	CreatedAt time.Time
	UpdatedAt time.Time
	// LeaseExpiresAt is when a PROCESSING record's attempt counts as dead
	// unless it is extended (heartbeat).
	LeaseExpiresAt time.Time
	// ExpiresAt is when the record is purged and its key becomes reusable.
	ExpiresAt time.Time
}

// Finished reports whether the record is SUCCESS or FAILED.
func (r *Record) Finished() bool { return r.Status == StatusSuccess || r.Status == StatusFailed }

// expired reports whether the record counts as absent at now.
func (r *Record) expired(now time.Time) bool { return !now.Before(r.ExpiresAt) }

// clone returns a deep copy of r.
func (r Record) clone() Record {
	if r.Response != nil {
		resp := *r.Response
		resp.Header = resp.Header.Clone()
		resp.Body = append([]byte(nil), resp.Body...)
		r.Response = &resp
	}
	return r
}
