package idempotency

import (
	"bytes"
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

	// rawBody, or over rawBodyKeptMax bytes its hash rawDigest, is, in a
	// record the guard cached, the raw body of the retry whose request hash
	// matched (neither when the guard's RequestFields select the fields):
	// a retry with the same bytes then matches without its body being
	// canonicalised and hashed. Stores do not keep them.
	rawBody   []byte
	rawDigest [32]byte
	// replay is, in a record the guard cached, its response made ready for
	// replays (immutable, shared by the record's copies).
	replay *replayForm
}

// rawBodyKeptMax bounds the raw body a cached record keeps; a longer
// one's hash is kept instead.
const rawBodyKeptMax = 4 << 10

// rawDomain separates the hash of a kept raw body from request hashes.
const rawDomain = "idempotency/raw-body/v1\x00"

// keepBody keeps, in a record about to be cached, the raw body of the
// retry whose request hash matched (nil: none, the fields were selected).
func (r *Record) keepBody(body []byte) {
	switch {
	case body == nil:
	case len(body) <= rawBodyKeptMax:
		r.rawBody = bytes.Clone(body) // the guard reuses its buffers
	default:
		r.rawDigest = RequestHash(rawDomain, body)
	}
}

// sameBody reports whether body is the raw body the record keeps.
func (r *Record) sameBody(body []byte) bool {
	switch {
	case r.rawBody != nil:
		return bytes.Equal(r.rawBody, body)
	case r.rawDigest != [32]byte{} && len(body) > rawBodyKeptMax:
		return RequestHash(rawDomain, body) == r.rawDigest
	}
	return false
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
