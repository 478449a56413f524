package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/ledgerworks/ledger/api"
)

// Client calls one server. It is safe for concurrent use; share one per
// server, so its connections are kept alive and reused.
type Client struct {
	base          string // scheme://host[/prefix], without a trailing slash
	auth          string // "Bearer <token>", or ""
	http          *http.Client
	maxAttempts   int
	backoffBase   time.Duration
	backoffMax    time.Duration
	retryAfterMax time.Duration
	attemptTO     time.Duration
	inProgressMax time.Duration
	responseMax   int64
	userAgent     string
	newKey        func() string
	onRetry       func(RetryEvent)
}

// New checks opts and builds a Client.
func New(opts Options) (*Client, error) {
	u, err := url.Parse(opts.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%w: BaseURL %q is not an http or https URL without query", ErrInvalidOptions, opts.BaseURL)
	}
	if opts.MaxAttempts < 0 || opts.MaxAttempts > MaxAttemptsMax || opts.BackoffBase < 0 || opts.BackoffMax < 0 ||
		opts.RetryAfterMax < 0 || opts.AttemptTimeout < 0 || opts.ResponseSizeMax < 0 || opts.InProgressWaitMax < 0 {
		return nil, fmt.Errorf("%w: a negative limit, or MaxAttempts over %d", ErrInvalidOptions, MaxAttemptsMax)
	}
	if strings.ContainsAny(opts.Token, "\r\n") || strings.ContainsAny(opts.UserAgent, "\r\n") {
		return nil, fmt.Errorf("%w: Token or UserAgent holds a line break", ErrInvalidOptions)
	}
	c := &Client{
		base:          strings.TrimRight(u.String(), "/"),
		http:          opts.HTTPClient,
		maxAttempts:   cmpOr(opts.MaxAttempts, MaxAttemptsDefault),
		backoffBase:   cmpOr(opts.BackoffBase, BackoffBaseDefault),
		backoffMax:    cmpOr(opts.BackoffMax, BackoffMaxDefault),
		retryAfterMax: cmpOr(opts.RetryAfterMax, RetryAfterMaxDefault),
		inProgressMax: cmpOr(opts.InProgressWaitMax, InProgressWaitMaxDefault),
		attemptTO:     opts.AttemptTimeout,
		responseMax:   cmpOr(opts.ResponseSizeMax, ResponseSizeMaxDefault),
		userAgent:     cmpOr(opts.UserAgent, UserAgentDefault),
		newKey:        opts.NewKey,
		onRetry:       opts.OnRetry,
	}
	if opts.Token != "" {
		c.auth = "Bearer " + opts.Token
	}
	if c.http == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConns = IdleConnsPerHostDefault
		t.MaxIdleConnsPerHost = IdleConnsPerHostDefault
		c.http = &http.Client{Transport: t}
	}
	if c.newKey == nil {
		c.newKey = uuid.NewString
	}
	return c, nil
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// NewKey returns a fresh Idempotency-Key from Options.NewKey (a UUID v4 by
// default), for a caller that records the key of an intent before it sends
// it (WithIdempotencyKey).
func (c *Client) NewKey() string { return c.newKey() }

// CloseIdleConnections closes the connections kept alive for reuse.
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

// CallOption adjusts one call.
type CallOption func(*callConfig)

type callConfig struct {
	attempts int
	key      string
	keySet   bool
	info     *ResponseInfo
}

// WithIdempotencyKey sends key instead of a fresh one: for an intent whose
// key the caller keeps across its own restarts. Use it with the exact same
// request every time; the same key with another request is refused (409
// KEY_REUSED_WITH_DIFFERENT_REQUEST). An empty key is refused
// (ErrInvalidKey), not replaced. Reads ignore it.
func WithIdempotencyKey(key string) CallOption {
	return func(c *callConfig) { c.key, c.keySet = key, true }
}

// WithMaxAttempts bounds this call's attempts instead of
// Options.MaxAttempts (1: no retry; values outside 1 to MaxAttemptsMax are
// ignored).
func WithMaxAttempts(n int) CallOption {
	return func(c *callConfig) {
		if n >= 1 && n <= MaxAttemptsMax {
			c.attempts = n
		}
	}
}

// WithResponseInfo fills *info with what the call's last attempt learned,
// whether it succeeded or failed.
func WithResponseInfo(info *ResponseInfo) CallOption {
	return func(c *callConfig) { c.info = info }
}

// ResponseInfo describes a call's last attempt.
type ResponseInfo struct {
	// Key is the Idempotency-Key sent ("" for reads).
	Key string
	// Status is the HTTP status; 0 when no response arrived.
	Status int
	// Replayed is true when the guard answered with the stored response of
	// an earlier attempt (Idempotent-Replayed: true).
	Replayed bool
	// Attempts is how many attempts the call made.
	Attempts int
	// RequestID is the server's X-Request-Id.
	RequestID string
}

// call is one request of a typed method.
type call struct {
	method string
	path   string // escaped, from the base: "/v1/…"
	query  url.Values
	in     any  // the body, encoded once; nil for none
	out    any  // decoded from a 2xx body; nil to discard it
	keyed  bool // state-changing: send an Idempotency-Key
}

// attemptResult is what one attempt got.
type attemptResult struct {
	status    int
	header    http.Header
	body      []byte
	replayed  bool
	requestID string
}

// do runs c: encodes the body once, picks the key once, and sends both on
// every attempt until one is final, the attempts run out, or ctx ends.
func (c *Client) do(ctx context.Context, k call, opts []CallOption) error {
	var cfg callConfig
	for _, o := range opts {
		o(&cfg)
	}
	maxAttempts := cmpOr(cfg.attempts, c.maxAttempts)
	var body []byte
	if k.in != nil {
		var err error
		if body, err = json.Marshal(k.in); err != nil {
			return fmt.Errorf("%w: %s %s: encoding the request: %v", ErrInvalidArgument, k.method, k.path, err)
		}
	}
	key := ""
	if k.keyed {
		key = cfg.key
		if !cfg.keySet {
			key = c.newKey()
		}
		if err := checkKey(key); err != nil {
			return err
		}
	}
	target := c.base + k.path
	if len(k.query) > 0 {
		target += "?" + k.query.Encode()
	}
	var last *Error
	counted := 0                       // attempts that count toward maxAttempts
	var inProgressWaited time.Duration // waits after REQUEST_IN_PROGRESS
	for attempt := 1; ; attempt++ {
		res, err := c.attempt(ctx, k.method, target, key, body)
		if cfg.info != nil {
			*cfg.info = ResponseInfo{Key: key, Status: res.status, Replayed: res.replayed, Attempts: attempt, RequestID: res.requestID}
		}
		if err == nil && res.status >= 200 && res.status < 300 {
			return c.decode(k, key, attempt, res)
		}
		if ctx.Err() != nil {
			return c.ended(k, context.Cause(ctx), last, err, res, key, attempt)
		}
		last = c.failure(k, key, attempt, res, err)
		// Another attempt holds the key and the server told how long its
		// lease lasts: waiting for it is not a failed attempt.
		inProgress := last.Code == api.CodeInProgress && last.RetryAfter > 0
		if !inProgress {
			counted++
		}
		if !last.Retryable || maxAttempts == 1 || counted >= maxAttempts || last.RetryAfter > c.retryAfterMax {
			return last
		}
		wait := max(jitter(backoffCeiling(attempt, c.backoffBase, c.backoffMax)), last.RetryAfter)
		if inProgress {
			if inProgressWaited+wait > c.inProgressMax {
				return last
			}
			inProgressWaited += wait
		}
		if deadline, ok := ctx.Deadline(); ok && time.Now().Add(wait).After(deadline) {
			return fmt.Errorf("client: %s %s: the next attempt would begin after the context's deadline: %w; last attempt: %w",
				k.method, k.path, context.DeadlineExceeded, last)
		}
		if c.onRetry != nil {
			c.onRetry(RetryEvent{Method: k.method, Path: k.path, Key: key, Attempt: attempt, Err: last, Wait: wait})
		}
		if err := sleep(ctx, wait); err != nil {
			return fmt.Errorf("client: %s %s: %w; last attempt: %w", k.method, k.path, err, last)
		}
	}
}

// ended is the error of a call whose context ended during an attempt.
func (c *Client) ended(k call, ctxErr error, last *Error, err error, res attemptResult, key string, attempt int) error {
	if err == nil || res.status != 0 {
		last = c.failure(k, key, attempt, res, err)
	}
	if last == nil {
		return fmt.Errorf("client: %s %s: %w", k.method, k.path, ctxErr)
	}
	return fmt.Errorf("client: %s %s: %w; last attempt: %w", k.method, k.path, ctxErr, last)
}

// failure builds the Error of a failed attempt.
func (c *Client) failure(k call, key string, attempt int, res attemptResult, err error) *Error {
	var e *Error
	switch {
	case errors.Is(err, errResponseTooLarge):
		e = &Error{Status: res.status, Code: CodeResponseTooLarge, Err: err}
	case err != nil:
		e = &Error{Code: CodeNetworkError, Err: err, Retryable: retryableTransportError(err)}
	default:
		e = decodeProblem(res.status, res.header.Get("Content-Type"), res.body)
		e.Retryable = retryableStatus(res.status, e.Code)
		e.RetryAfter = parseRetryAfter(res.header.Get("Retry-After"), time.Now())
	}
	e.Method, e.Path, e.Key, e.Attempts, e.RequestID = k.method, k.path, key, attempt, res.requestID
	return e
}

// decode reads a 2xx body into k.out.
func (c *Client) decode(k call, key string, attempt int, res attemptResult) error {
	if k.out == nil || res.status == http.StatusNoContent {
		return nil
	}
	if err := json.Unmarshal(res.body, k.out); err != nil {
		return &Error{Method: k.method, Path: k.path, Status: res.status, Code: CodeUnexpectedResponse,
			Detail: printablePrefix(res.body, problemDetailMax), Key: key, Attempts: attempt, RequestID: res.requestID,
			Err: fmt.Errorf("decoding the response: %w", err)}
	}
	return nil
}

var errResponseTooLarge = errors.New("response body over the client's ResponseSizeMax")

// attempt sends the request once and reads the whole response. An error is
// a transport failure (no status) or, with a status, errResponseTooLarge.
func (c *Client) attempt(ctx context.Context, method, target, key string, body []byte) (attemptResult, error) {
	if c.attemptTO > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.attemptTO)
		defer cancel()
	}
	var rd io.Reader = http.NoBody
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return attemptResult{}, err
	}
	h := req.Header
	h["Accept"] = acceptValue
	h["User-Agent"] = []string{c.userAgent}
	if body != nil {
		h["Content-Type"] = jsonValue
	}
	if c.auth != "" {
		h["Authorization"] = []string{c.auth}
	}
	if key != "" {
		h[api.HeaderIdempotencyKey] = []string{key}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return attemptResult{}, err
	}
	defer resp.Body.Close()
	res := attemptResult{status: resp.StatusCode, header: resp.Header,
		replayed: resp.Header.Get(api.HeaderReplayed) == "true", requestID: resp.Header.Get(api.HeaderRequestID)}
	res.body, err = readBody(resp, c.responseMax)
	if err != nil && !errors.Is(err, errResponseTooLarge) {
		return attemptResult{}, err // a body cut short: the outcome is unknown
	}
	return res, err
}

var (
	acceptValue = []string{"application/json, application/problem+json"}
	jsonValue   = []string{"application/json"}
)

// readBody reads at most limit bytes of resp's body.
func readBody(resp *http.Response, limit int64) ([]byte, error) {
	n := resp.ContentLength
	if n > limit {
		return nil, errResponseTooLarge
	}
	var buf []byte
	if n > 0 {
		buf = make([]byte, 0, n+1) // +1: ReadAll's EOF check without a grow
	} else {
		buf = make([]byte, 0, 512)
	}
	b := bytes.NewBuffer(buf)
	if _, err := b.ReadFrom(io.LimitReader(resp.Body, limit+1)); err != nil {
		return nil, err
	}
	if int64(b.Len()) > limit {
		return nil, errResponseTooLarge
	}
	return b.Bytes(), nil
}
