package idempotency

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// Defaults of Options.
const (
	KeyHeaderDefault          = "Idempotency-Key"
	ReplayedHeader            = "Idempotent-Replayed"
	LeaseDurationDefault      = 5 * time.Minute
	TTLDefault                = 24 * time.Hour
	MaxRetriesDefault         = 3
	DeadAttemptsMaxDefault    = 10
	RequestBodySizeMaxDefault = 1 << 20
	ResponseSizeMaxDefault    = 1 << 20
	RetryAfterDefault         = time.Second
)

// Options configure a Guard for one route (or a group of routes sharing
// them). Store and User are required; every other zero value is documented
// and usable. Build one Guard per set of options: a route that needs
// another StatusMap or lease gets its own Guard over the same Store.
type Options struct {
	// Store keeps the records. Required.
	Store Store
	// User returns the authenticated user of a request. Required: there is
	// no anonymous key space. An error or an empty id refuses the request
	// with 401 UNAUTHENTICATED (a request without a key on a route that
	// does not require one is passed on unguarded and not asked).
	User func(r *http.Request) (string, error)
	// Operation names the request's operation. Nil: the route pattern
	// (r.Pattern, prefixed with the method when the pattern has none), or
	// the method and path when no pattern matched. Set it to carry a
	// tenant, e.g. "acme:payments:create".
	Operation func(r *http.Request) string
	// RequireKey refuses requests without a key (400 KEY_REQUIRED). When
	// false, such requests are passed on unguarded.
	RequireKey bool
	// KeyHeader is the header carrying the key; KeyHeaderDefault when empty.
	KeyHeader string
	// RequestFields returns the bytes that define the request, from the
	// request and its body; they and the operation are hashed. Nil: the
	// whole body, canonicalised when it is JSON (CanonicalJSON). Leave out
	// what changes between retries of one intent (timestamps, trace ids,
	// signatures over them): hashing them makes every retry a conflict.
	RequestFields func(r *http.Request, body []byte) ([]byte, error)
	// IsPermanentError decides whether a failed attempt (a 5xx, 408 or 429
	// response, or Context.Fail) poisons the key. Nil: no failure is
	// permanent; every failure releases the key for a retry.
	IsPermanentError func(status int, err error) bool
	// IsOutage decides whether a failed attempt failed because a store
	// did not answer (an outage) rather than because of the operation: such
	// an attempt frees the key without counting toward MaxRetries, so that
	// an outage never poisons a key. It is asked before IsPermanentError.
	// Nil: no failure is an outage; every failure counts. A server that
	// answers store failures 503 sets it to status == 503.
	IsOutage func(status int, err error) bool
	// StatusMap overrides statuses of codes; DefaultStatusMap for codes it
	// lacks.
	StatusMap StatusMap
	// LeaseDuration is how long a PROCESSING record stays held without a
	// heartbeat; LeaseDurationDefault when zero. Keep it well above the
	// handler's worst case.
	LeaseDuration time.Duration
	// HeartbeatInterval is how often a running handler's lease is
	// extended; LeaseDuration/3 when zero.
	HeartbeatInterval time.Duration
	// TTL is how long a record is kept; TTLDefault when zero.
	TTL time.Duration
	// MaxRetries is how many transient failures poison a key;
	// MaxRetriesDefault when zero.
	MaxRetries int
	// DeadAttemptsMax is the count of failures at which an attempt found
	// dead (its lease ended unextended: its process died, or lost its
	// store) poisons its key, when a retry takes the key over or the jobs
	// recover it; DeadAttemptsMaxDefault when zero, at least MaxRetries. A
	// dead attempt counts as a failure like any other, but it is most
	// often an outage of its server, seldom a request that kills its
	// server: a request that killed its servers this often is stopped,
	// and a key whose servers were killed under it a few times is not.
	DeadAttemptsMax int
	// RequestBodySizeMax bounds the body read for hashing;
	// RequestBodySizeMaxDefault when zero. Larger bodies get 413.
	RequestBodySizeMax int64
	// ResponseSizeMax bounds a stored response body;
	// ResponseSizeMaxDefault when zero. A larger response is sent but not
	// stored (the attempt is released as a transient failure).
	ResponseSizeMax int
	// ReplayHeaders is the allow-list of response headers stored and
	// replayed; DefaultReplayHeaders when nil. Set-Cookie, Date and
	// hop-by-hop headers are never stored, even when listed.
	ReplayHeaders []string
	// RetryAfter is the Retry-After of REQUEST_IN_PROGRESS and
	// STORE_UNAVAILABLE; RetryAfterDefault when zero (rounded up to whole
	// seconds).
	RetryAfter time.Duration
	// Cache, when set, answers retries of finished requests before the
	// store; its failures are logged and counted, never surfaced.
	Cache Cache
	// Logger receives one line per guarded request; slog.Default() when
	// nil. Executions and replays log at Debug, refusals at Info, store
	// failures at Warn or Error.
	Logger *slog.Logger
	// RequestID returns the request id to log, from the request's
	// context; none when nil.
	RequestID func(ctx context.Context) string
	// Metrics receives counts and latencies; none when nil.
	Metrics Metrics
	// OnResponse, when set, is called once per guarded request after its
	// outcome is decided and before the response is written.
	OnResponse func(r *http.Request, c *Context)
	// Clock returns the time; time.Now when nil.
	Clock func() time.Time
	// TracerProvider, when set, makes each guarded request a span,
	// "idempotency.guard", a child of the request's, that carries the
	// outcome and the scope's digest (never the key); the handler runs
	// within it. None when nil.
	TracerProvider trace.TracerProvider
}

// DefaultReplayHeaders are the response headers stored and replayed when
// Options.ReplayHeaders is nil.
var DefaultReplayHeaders = []string{
	"Content-Type", "Content-Language", "Content-Encoding", "Content-Location",
	"Location", "ETag", "Last-Modified", "Link", "Vary", "Cache-Control", "Expires",
}

// neverReplayed are headers no allow-list can make replayed.
var neverReplayed = map[string]bool{
	"Set-Cookie": true, "Date": true, "Connection": true, "Keep-Alive": true,
	"Proxy-Authenticate": true, "Proxy-Authorization": true, "Proxy-Connection": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Content-Length": true, ReplayedHeader: true,
}
