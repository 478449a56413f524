package client

import (
	"net/http"
	"time"
)

// Defaults of Options.
const (
	// MaxAttemptsDefault is how many attempts a call makes, the first
	// included, when Options.MaxAttempts is zero.
	MaxAttemptsDefault = 6
	// BackoffBaseDefault is the first retry's backoff ceiling.
	BackoffBaseDefault = 100 * time.Millisecond
	// BackoffMaxDefault caps every backoff ceiling.
	BackoffMaxDefault = 5 * time.Second
	// RetryAfterMaxDefault is the longest Retry-After the client waits for.
	RetryAfterMaxDefault = 30 * time.Second
	// InProgressWaitMaxDefault is how long a call waits in all for
	// REQUEST_IN_PROGRESS answers: more than a server's lease
	// (server.IdempotencyLeaseDefault, 10 s) and its recovery, so that a
	// key held by a server that died is taken over by the call's retry.
	InProgressWaitMaxDefault = 30 * time.Second
	// ResponseSizeMaxDefault bounds a response body.
	ResponseSizeMaxDefault = 16 << 20
	// IdleConnsPerHostDefault is how many idle keep-alive connections the
	// default transport keeps to the server.
	IdleConnsPerHostDefault = 128
	// UserAgentDefault is sent when Options.UserAgent is empty.
	UserAgentDefault = "ledgerworks-client/1"
)

// Limits, checked on entry.
const (
	// KeySizeMax bounds an Idempotency-Key in bytes, as the server does.
	KeySizeMax = 255
	// MaxAttemptsMax bounds Options.MaxAttempts.
	MaxAttemptsMax = 1000
)

// Options configure a Client. BaseURL is required; every other zero value
// is a documented default.
type Options struct {
	// BaseURL is the server's root, such as "http://127.0.0.1:8080". A path
	// is kept as a prefix of every route ("https://erp.example/ledger").
	// Required.
	BaseURL string
	// Token is the API key, sent as "Authorization: Bearer <Token>". Empty:
	// no Authorization header (only the health routes answer then).
	Token string
	// HTTPClient sends the requests. Nil: a client of its own with a
	// keep-alive transport holding up to IdleConnsPerHostDefault idle
	// connections to the server and no overall timeout (the context and
	// AttemptTimeout bound a call). A caller's client must not have a
	// Timeout shorter than a call's retries, or set AttemptTimeout instead.
	HTTPClient *http.Client
	// MaxAttempts bounds the attempts of one call, the first included,
	// REQUEST_IN_PROGRESS answers with a Retry-After excluded
	// (InProgressWaitMax bounds those). Zero: MaxAttemptsDefault; 1: never retry; at most
	// MaxAttemptsMax.
	MaxAttempts int
	// BackoffBase is the first retry's backoff ceiling; each further retry
	// doubles it, up to BackoffMax. The wait is drawn uniformly from
	// [0, ceiling) (full jitter), and is never shorter than the response's
	// Retry-After. Zero: BackoffBaseDefault.
	BackoffBase time.Duration
	// BackoffMax caps the backoff ceiling. Zero: BackoffMaxDefault.
	BackoffMax time.Duration
	// RetryAfterMax is the longest Retry-After the client waits for; a
	// response asking for longer ends the call with its error (Retryable
	// stays true). Zero: RetryAfterMaxDefault.
	RetryAfterMax time.Duration
	// InProgressWaitMax bounds the time a call waits in all after 409
	// REQUEST_IN_PROGRESS answers with a Retry-After, which do not count
	// toward MaxAttempts (another attempt holds the key: nothing failed).
	// Each such wait is at least the answer's Retry-After, the time left
	// of the holder's lease. A call that would wait longer ends with the
	// answer's error (Retryable). An answer without Retry-After counts as
	// an attempt. Zero: InProgressWaitMaxDefault.
	InProgressWaitMax time.Duration
	// AttemptTimeout bounds one attempt, from connecting to the last byte
	// of the response; an attempt that runs out is a network error and is
	// retried. Zero: no bound beyond the context's.
	AttemptTimeout time.Duration
	// ResponseSizeMax bounds a response body in bytes; a larger one fails
	// the call with RESPONSE_TOO_LARGE. Zero: ResponseSizeMaxDefault.
	ResponseSizeMax int64
	// UserAgent is sent in User-Agent. Empty: UserAgentDefault.
	UserAgent string
	// NewKey returns a fresh Idempotency-Key for each intent. Nil: a random
	// UUID v4 (github.com/google/uuid). It must never return a key twice.
	NewKey func() string
	// OnRetry, when set, is called before each wait between attempts, from
	// the calling goroutine: for logs and metrics.
	OnRetry func(RetryEvent)
}

// RetryEvent describes an attempt that failed and will be retried.
type RetryEvent struct {
	Method, Path string
	// Key is the call's Idempotency-Key ("" for reads).
	Key string
	// Attempt is the number of the attempt that failed, from 1.
	Attempt int
	// Err is that attempt's error (an *Error).
	Err error
	// Wait is how long the client waits before the next attempt.
	Wait time.Duration
}
