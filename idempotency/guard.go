package idempotency

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zeebo/blake3"
	"go.opentelemetry.io/otel/trace"
)

// Guard is the HTTP replay guard of one route (or group of routes): its
// Middleware runs a handler once per (operation, user, key) and replays the
// first response to every retry.
type Guard struct {
	opts          Options
	store         Store
	log           *slog.Logger
	metrics       Metrics
	now           func() time.Time
	statusMap     StatusMap
	keyHeader     string
	retryAfterSec int
	replayAllowed map[string]bool
	lastOperation atomic.Pointer[operationName]
	beats         heartbeats
	timed         bool         // Options.Metrics is set: store calls are timed
	tracer        trace.Tracer // nil without Options.TracerProvider
}

// New returns a Guard. It fails when Store or User is missing: a guard
// never runs requests in a shared, anonymous key space.
func New(opts Options) (*Guard, error) {
	if opts.Store == nil {
		return nil, errors.New("idempotency: Options.Store is required")
	}
	if opts.User == nil {
		return nil, errors.New("idempotency: Options.User is required: there is no anonymous key space")
	}
	if opts.LeaseDuration < 0 || opts.HeartbeatInterval < 0 || opts.TTL < 0 || opts.MaxRetries < 0 || opts.DeadAttemptsMax < 0 ||
		opts.RequestBodySizeMax < 0 || opts.ResponseSizeMax < 0 || opts.RetryAfter < 0 {
		return nil, errors.New("idempotency: negative durations, sizes and counts are not allowed")
	}
	if opts.LeaseDuration == 0 {
		opts.LeaseDuration = LeaseDurationDefault
	}
	if opts.HeartbeatInterval == 0 {
		opts.HeartbeatInterval = opts.LeaseDuration / 3
	}
	if opts.HeartbeatInterval >= opts.LeaseDuration {
		return nil, fmt.Errorf("idempotency: HeartbeatInterval %v must be shorter than LeaseDuration %v", opts.HeartbeatInterval, opts.LeaseDuration)
	}
	if opts.TTL == 0 {
		opts.TTL = TTLDefault
	}
	if opts.TTL < opts.LeaseDuration {
		return nil, fmt.Errorf("idempotency: TTL %v is shorter than LeaseDuration %v", opts.TTL, opts.LeaseDuration)
	}
	if opts.MaxRetries == 0 {
		opts.MaxRetries = MaxRetriesDefault
	}
	if opts.DeadAttemptsMax == 0 {
		opts.DeadAttemptsMax = max(DeadAttemptsMaxDefault, opts.MaxRetries)
	}
	if opts.DeadAttemptsMax < opts.MaxRetries {
		return nil, fmt.Errorf("idempotency: DeadAttemptsMax %d is below MaxRetries %d", opts.DeadAttemptsMax, opts.MaxRetries)
	}
	if opts.RequestBodySizeMax == 0 {
		opts.RequestBodySizeMax = RequestBodySizeMaxDefault
	}
	if opts.ResponseSizeMax == 0 {
		opts.ResponseSizeMax = ResponseSizeMaxDefault
	}
	if opts.RetryAfter == 0 {
		opts.RetryAfter = RetryAfterDefault
	}
	g := &Guard{opts: opts, store: opts.Store, log: opts.Logger, metrics: opts.Metrics, now: opts.Clock,
		statusMap: opts.StatusMap, keyHeader: opts.KeyHeader}
	if g.log == nil {
		g.log = slog.Default()
	}
	if g.metrics == nil {
		g.metrics = noMetrics{}
	} else {
		g.timed = true
	}
	if g.now == nil {
		g.now = time.Now
	}
	if opts.TracerProvider != nil {
		g.tracer = opts.TracerProvider.Tracer(TracerName)
	}
	if g.keyHeader == "" {
		g.keyHeader = KeyHeaderDefault
	}
	g.keyHeader = http.CanonicalHeaderKey(g.keyHeader)
	g.retryAfterSec = int((opts.RetryAfter + time.Second - 1) / time.Second)
	allow := opts.ReplayHeaders
	if allow == nil {
		allow = DefaultReplayHeaders
	}
	g.replayAllowed = map[string]bool{}
	for _, h := range allow {
		if c := http.CanonicalHeaderKey(h); !neverReplayed[c] {
			g.replayAllowed[c] = true
		}
	}
	return g, nil
}

// Middleware returns a middleware with a new Guard of opts; see New.
func Middleware(opts Options) (func(http.Handler) http.Handler, error) {
	g, err := New(opts)
	if err != nil {
		return nil, err
	}
	return g.Middleware, nil
}

// Store returns the guard's store.
func (g *Guard) Store() Store { return g.store }

// Middleware wraps next with the guard.
func (g *Guard) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.tracer != nil {
			g.serveTraced(w, r, next)
			return
		}
		g.serve(w, r, next)
	})
}

// tokenPrefix makes tokens unique across processes; the counter, within one.
var (
	tokenPrefix  = newTokenPrefix()
	tokenCounter atomic.Uint64
)

func newTokenPrefix() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return hex.EncodeToString(b[:])
}

func newToken() string {
	var b [32]byte
	return string(strconv.AppendUint(append(b[:0], tokenPrefix...), tokenCounter.Add(1), 36))
}

// requestDomain separates the guard's request hash from every other hash.
const requestDomain = "idempotency/request/v1\x00"

// RequestHash is the hash of a request: BLAKE3-256 over a domain prefix,
// the operation and the request's defining fields, each length-prefixed.
func RequestHash(operation string, fields []byte) [32]byte {
	return requestHash(operation, fields, false)
}

// requestHash is RequestHash of fields, or (canonical) of DefaultRequestFields
// of the body fields, canonicalised straight into the hash's input.
func requestHash(operation string, fields []byte, canonical bool) [32]byte {
	hb := hashBuffers.Get().(*hashBuffer)
	b := append(hb.b[:0], requestDomain...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(operation)))
	b = append(b, operation...)
	at := len(b)
	b = append(b, 0, 0, 0, 0) // the length of the fields, set below
	ok := false
	if canonical {
		b, ok = appendCanonicalJSON(b, fields, &hb.members)
		if !ok {
			b = b[:at+4]
		}
	}
	if !ok {
		b = append(b, fields...)
	}
	binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	sum := blake3.Sum256(b)
	if cap(b) <= 64<<10 && cap(hb.members) <= 1024 {
		hb.b = b
		hashBuffers.Put(hb)
	}
	return sum
}

// hashBuffer holds requestHash's input (a hasher costs more than a copy)
// and the canonicaliser's scratch space.
type hashBuffer struct {
	b       []byte
	members []member
}

var hashBuffers = sync.Pool{New: func() any { return &hashBuffer{b: make([]byte, 0, 1024)} }}

// DefaultRequestFields is the RequestFields of a guard that sets none: the
// body, canonicalised when it is JSON.
func DefaultRequestFields(_ *http.Request, body []byte) ([]byte, error) {
	if c, err := CanonicalJSON(body); err == nil {
		return c, nil
	}
	return body, nil
}

// operation returns the request's operation, and whether it is known to
// be valid.
func (g *Guard) operation(r *http.Request) (string, bool) {
	if g.opts.Operation != nil {
		return g.opts.Operation(r), false
	}
	p := r.Pattern
	if p == "" {
		p = r.URL.Path
	} else if i := strings.IndexAny(p, " \t"); i > 0 && !strings.Contains(p[:i], "/") {
		return p, false // the pattern names its method
	}
	if last := g.lastOperation.Load(); last != nil && last.method == r.Method && last.path == p {
		return last.operation, last.valid
	}
	op := &operationName{method: r.Method, path: p, operation: r.Method + " " + p}
	op.valid = validName(op.operation, OperationSizeMax)
	g.lastOperation.Store(op)
	return op.operation, op.valid
}

// operationName is the operation of a method and a route pattern (or
// path): the guard keeps the last one, so that a route's requests share
// its string, and its validation, rather than each building it.
type operationName struct {
	method, path, operation string
	valid                   bool
}

func (g *Guard) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	values := r.Header[g.keyHeader] // canonical (New)
	if len(values) == 0 {
		if g.opts.RequireKey {
			g.refuse(w, r, nil, OutcomeBadRequest, &Error{Code: CodeKeyRequired, Detail: "this route requires an " + g.keyHeader + " header"})
			return
		}
		g.metrics.Request(OutcomeUnguarded)
		if g.tracer != nil {
			trace.SpanFromContext(r.Context()).SetAttributes(attrOutcome.String(string(OutcomeUnguarded)))
		}
		next.ServeHTTP(w, r)
		return
	}
	if len(values) > 1 {
		g.refuse(w, r, nil, OutcomeBadRequest, &Error{Code: CodeKeyInvalid, Detail: "more than one " + g.keyHeader + " header"})
		return
	}
	key, err := ParseKey(values[0])
	if err != nil {
		g.refuse(w, r, nil, OutcomeBadRequest, err.(*Error))
		return
	}
	user, err := g.opts.User(r)
	if err != nil || user == "" {
		g.refuse(w, r, nil, OutcomeUnauthenticated, &Error{Code: CodeUnauthenticated, Detail: "no authenticated user", Err: err})
		return
	}
	op, opValid := g.operation(r)
	c := &Context{Scope: Scope{Operation: op, User: user, Key: key}, guard: g}
	if err := c.Scope.validate(opValid, true); err != nil {
		g.refuse(w, r, c, OutcomeBadRequest, &Error{Code: CodeKeyInvalid, Detail: err.Error()})
		return
	}
	body, e := g.readBody(r, c)
	defer c.releaseBody()
	if e != nil {
		g.refuse(w, r, c, OutcomeBadRequest, e)
		return
	}
	hashed := g.opts.RequestFields != nil
	if hashed {
		fields, err := g.opts.RequestFields(r, body)
		if err != nil {
			g.refuse(w, r, c, OutcomeBadRequest, &Error{Code: CodeBodyUnreadable, Detail: err.Error()})
			return
		}
		c.RequestHash = RequestHash(c.Operation, fields)
	}

	now := g.now()
	if g.opts.Cache != nil {
		if !hashed {
			c.body = body
		}
		rec, found, err := g.cacheGet(r.Context(), c.Scope)
		switch {
		case err != nil:
			g.metrics.CacheError()
			g.log.LogAttrs(r.Context(), slog.LevelWarn, "idempotency cache get failed", append(g.attrs(r, c), slog.Any("error", err))...)
		case !found || !rec.Finished() || rec.expired(now):
		case !hashed && rec.sameBody(body):
			c.RequestHash = rec.RequestHash
			g.metrics.CacheHit()
			g.existing(w, r, c, rec, false)
			return
		default:
			if !hashed {
				c.RequestHash, hashed = requestHash(c.Operation, body, true), true
			}
			if rec.RequestHash == c.RequestHash {
				g.metrics.CacheHit()
				g.existing(w, r, c, rec, false)
				return
			}
		}
	}
	if !hashed {
		c.RequestHash = requestHash(c.Operation, body, true) // DefaultRequestFields
	}
	c.token = newToken()
	claim := Claim{Scope: c.Scope, RequestHash: c.RequestHash, Token: c.token, Now: now,
		LeaseExpiresAt: now.Add(g.opts.LeaseDuration), ExpiresAt: now.Add(g.opts.TTL)}
	start := g.storeStart()
	res, err := g.store.Create(r.Context(), claim)
	g.storeLatency("create", start)
	if err != nil {
		g.refuse(w, r, c, OutcomeStoreUnavailable, g.storeError(err))
		return
	}
	if !res.Created && g.leaseEnded(res.Record, c.RequestHash, now) {
		res, err = g.takeOver(r.Context(), res.Record, claim)
		if err != nil {
			g.refuse(w, r, c, OutcomeStoreUnavailable, g.storeError(err))
			return
		}
	}
	if !res.Created {
		g.existing(w, r, c, res.Record, true)
		return
	}
	c.Attempt = res.Record.Attempt
	g.execute(w, r, c, body, next)
}

// storeError is the refusal of a request whose store call failed: 503
// STORE_UNAVAILABLE with Retry-After, an outage worth a retry, unless the
// store refused the server's credentials (a SQL error of class 28: a wrong
// password, a role refused), which no retry cures: 500 STORE_REFUSED.
func (g *Guard) storeError(err error) *Error {
	var coded interface{ SQLState() string }
	if errors.As(err, &coded) && strings.HasPrefix(coded.SQLState(), "28") {
		return &Error{Code: CodeStoreRefused, Detail: "the idempotency store refused the server's credentials", Err: err}
	}
	return &Error{Code: CodeStoreUnavailable, Detail: "the idempotency store did not answer", RetryAfter: g.retryAfterSec, Err: err}
}

// storeStart is the start of a store call, for storeLatency; without
// metrics no clock is read.
func (g *Guard) storeStart() time.Time {
	if !g.timed {
		return time.Time{}
	}
	return time.Now()
}

// storeLatency reports the latency of the store call op that began at start.
func (g *Guard) storeLatency(op string, start time.Time) {
	if g.timed {
		g.metrics.StoreLatency(op, time.Since(start))
	}
}

// cacheGet reads the cache; an LRU's record is read in place.
func (g *Guard) cacheGet(ctx context.Context, scope Scope) (Record, bool, error) {
	if l, ok := g.opts.Cache.(*LRU); ok {
		rec, found := l.shared(scope)
		if !found {
			return Record{}, false, nil
		}
		return *rec, true, nil
	}
	return g.opts.Cache.Get(ctx, scope)
}

// bodyBuffer holds the buffer of a request's body.
type bodyBuffer struct{ b []byte }

// bodyBuffers pools the buffers of the bodies of requests whose handler
// does not run (replays, refusals): a handler that runs keeps its body.
var bodyBuffers = sync.Pool{New: func() any { return new(bodyBuffer) }}

// bodyPooledSizeMax bounds the buffers bodyBuffers keeps.
const bodyPooledSizeMax = 64 << 10

// releaseBody returns the buffer of c's body to the pool, unless the
// handler ran (it keeps the body).
func (c *Context) releaseBody() {
	bb := c.bodyBuf
	if bb == nil {
		return
	}
	c.bodyBuf, c.body = nil, nil
	if c.run != nil || cap(bb.b) > bodyPooledSizeMax {
		bb.b = nil
	}
	bodyBuffers.Put(bb)
}

// readBody reads the request body, up to the limit (execute puts it back
// for the handler), into a buffer of c's.
func (g *Guard) readBody(r *http.Request, c *Context) ([]byte, *Error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	var body []byte
	var err error
	if n := r.ContentLength; n > 0 && n <= g.opts.RequestBodySizeMax {
		// One read into a buffer of the announced size (and a byte more,
		// to see a body that is longer than announced).
		if g.opts.RequestFields == nil { // which may keep what it is given
			bb := bodyBuffers.Get().(*bodyBuffer)
			c.bodyBuf = bb
			if int64(cap(bb.b)) <= n {
				bb.b = make([]byte, n+1)
			}
			body = bb.b[:n+1]
		} else {
			body = make([]byte, n+1)
		}
		var m int
		m, err = io.ReadFull(r.Body, body)
		body = body[:m]
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			err = nil
		}
		if err == nil && int64(m) > n {
			var rest []byte
			rest, err = io.ReadAll(io.LimitReader(r.Body, g.opts.RequestBodySizeMax+1-int64(m)))
			body = append(body, rest...)
		}
	} else {
		body, err = io.ReadAll(io.LimitReader(r.Body, g.opts.RequestBodySizeMax+1))
	}
	r.Body.Close()
	if err != nil {
		return nil, &Error{Code: CodeBodyUnreadable, Detail: "reading the body failed", Err: err}
	}
	if int64(len(body)) > g.opts.RequestBodySizeMax {
		return nil, &Error{Code: CodeBodyTooLarge, Detail: fmt.Sprintf("the body exceeds %d bytes", g.opts.RequestBodySizeMax)}
	}
	return body, nil
}

// bodyReader is the body the guard puts back: a reader of the bytes it
// read.
type bodyReader struct{ bytes.Reader }

func (*bodyReader) Close() error { return nil }

// existing answers a request whose scope already has a record. The hash is
// checked first: a different request is a conflict whatever the state.
func (g *Guard) existing(w http.ResponseWriter, r *http.Request, c *Context, rec Record, fromStore bool) {
	if fromStore {
		g.metrics.Duplicate(rec.Status)
	}
	if rec.RequestHash != c.RequestHash {
		g.refuse(w, r, c, OutcomeConflict, &Error{Code: CodeKeyReused, Detail: "this key was used with a different request"})
		return
	}
	if fromStore && rec.Finished() && g.opts.Cache != nil {
		rec.keepBody(c.body)
		rec.replay = newReplayForm(rec.Response)
		if err := g.opts.Cache.Add(r.Context(), rec); err != nil {
			g.metrics.CacheError()
			g.log.LogAttrs(r.Context(), slog.LevelWarn, "idempotency cache add failed", append(g.attrs(r, c), slog.Any("error", err))...)
		}
	}
	c.Attempt = rec.Attempt
	switch rec.Status {
	case StatusSuccess:
		c.Replayed = true
		g.finish(r, c, OutcomeReplayed, rec.Response.Status, slog.LevelDebug)
		if rec.replay != nil {
			rec.replay.write(w, rec.Response)
		} else {
			writeResponse(w, rec.Response, true)
		}
	case StatusFailed:
		g.refuse(w, r, c, OutcomeRejected, &Error{Code: CodeRequestFailed, Detail: "this key's request failed permanently: " + rec.Failure})
	default:
		g.refuse(w, r, c, OutcomeInProgress, &Error{Code: CodeInProgress, Detail: "a request with this key is being processed",
			RetryAfter: leaseLeftSec(rec.LeaseExpiresAt, g.now())})
	}
}

// leaseLeftSec is the Retry-After of a request in progress: the seconds
// left of its lease, rounded up, at least 1. A live attempt extends its
// lease before then; a dead one's key is taken over by the first retry
// after it (takeOver).
func leaseLeftSec(leaseExpiresAt, now time.Time) int {
	left := leaseExpiresAt.Sub(now)
	if left <= time.Second {
		return 1
	}
	return int((left + time.Second - 1) / time.Second)
}

// leaseEnded reports whether rec is an attempt of the same request whose
// lease ended: its holder stopped extending it (it died, or lost its
// store), so the retry need not wait for the jobs to recover it.
func (g *Guard) leaseEnded(rec Record, hash [32]byte, now time.Time) bool {
	return rec.Status == StatusProcessing && rec.RequestHash == hash && !now.Before(rec.LeaseExpiresAt)
}

// takeOver releases the dead attempt rec, as RecoverStuckRecords would
// (a failure, poisoning the key at DeadAttemptsMax), and claims the scope
// again. The release is fenced by rec's token, so a record that finished
// or was taken over meanwhile is left alone; the second Create answers
// whatever the scope holds then.
func (g *Guard) takeOver(ctx context.Context, rec Record, claim Claim) (CreateResult, error) {
	start := g.storeStart()
	_, err := g.store.Release(ctx, rec.Scope, rec.Token, g.opts.DeadAttemptsMax, claim.ExpiresAt, claim.Now)
	g.storeLatency("release", start)
	if err != nil && !errors.Is(err, ErrLeaseLost) {
		return CreateResult{}, err
	}
	if err == nil {
		g.metrics.Recovered(1)
		g.log.LogAttrs(ctx, slog.LevelWarn, "idempotency took over an attempt whose lease ended",
			slog.String("key", rec.Key), slog.String("user", rec.User), slog.String("operation", rec.Operation), slog.Int("attempt", rec.Attempt))
	}
	start = g.storeStart()
	res, err := g.store.Create(ctx, claim)
	g.storeLatency("create", start)
	return res, err
}

// writeResponse writes a stored response. Its header's keys are canonical;
// its values are copied into one slice, so that nothing done to w's header
// changes the stored (or cached) response.
func writeResponse(w http.ResponseWriter, resp *Response, replayed bool) {
	h := w.Header()
	n := 0
	for _, v := range resp.Header {
		n += len(v)
	}
	values := make([]string, 0, n+2)
	for k, v := range resp.Header {
		i := len(values)
		values = append(values, v...)
		h[k] = values[i:len(values):len(values)]
	}
	values = append(values, strconv.Itoa(len(resp.Body)))
	h["Content-Length"] = values[n : n+1 : n+1]
	if replayed {
		values = append(values, "true")
		h[ReplayedHeader] = values[n+1 : n+2 : n+2]
	}
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}

// replayForm is a cached SUCCESS record's response made ready for replays:
// its header's keys and values in slices, its Content-Length and the
// replay mark after them, so that a replay iterates no map and formats
// nothing, and copies the values into one slice (see writeResponse).
type replayForm struct {
	keys   []string
	counts []int    // values per key
	values []string // every key's values, then Content-Length and "true"
}

func newReplayForm(resp *Response) *replayForm {
	if resp == nil {
		return nil
	}
	f := &replayForm{keys: make([]string, 0, len(resp.Header)), counts: make([]int, 0, len(resp.Header))}
	for k, v := range resp.Header {
		f.keys = append(f.keys, k)
		f.counts = append(f.counts, len(v))
		f.values = append(f.values, v...)
	}
	f.values = append(f.values, strconv.Itoa(len(resp.Body)), "true")
	return f
}

// write writes resp, the response f was made of, as a replay.
func (f *replayForm) write(w http.ResponseWriter, resp *Response) {
	h := w.Header()
	values := append([]string(nil), f.values...)
	at := 0
	for i, k := range f.keys {
		n := f.counts[i]
		h[k] = values[at : at+n : at+n]
		at += n
	}
	h["Content-Length"] = values[at : at+1 : at+1]
	h[ReplayedHeader] = values[at+1 : at+2 : at+2]
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}

// refuse writes e as a problem and logs and counts outcome.
func (g *Guard) refuse(w http.ResponseWriter, r *http.Request, c *Context, outcome Outcome, e *Error) {
	status := g.statusMap.Status(e.Code)
	level := slog.LevelInfo
	if outcome == OutcomeStoreUnavailable {
		level = slog.LevelError
	}
	if c == nil {
		c = &Context{}
	}
	g.finish(r, c, outcome, status, level, slog.String("code", string(e.Code)))
	WriteProblem(w, g.statusMap, e)
}

// finish records the outcome on c, counts and logs it, and calls the hook.
func (g *Guard) finish(r *http.Request, c *Context, outcome Outcome, status int, level slog.Level, extra ...slog.Attr) {
	c.Outcome, c.Status = outcome, status
	g.metrics.Request(outcome)
	if g.tracer != nil {
		g.traceOutcome(r, c, outcome, status)
	}
	if g.log.Enabled(r.Context(), level) {
		attrs := append(g.attrs(r, c), slog.Int("status", status))
		g.log.LogAttrs(r.Context(), level, "idempotency request", append(attrs, extra...)...)
	}
	if g.opts.OnResponse != nil {
		g.opts.OnResponse(r, c)
	}
}

// attrs are the attributes of every log line about c.
func (g *Guard) attrs(r *http.Request, c *Context) []slog.Attr {
	attrs := make([]slog.Attr, 0, 8)
	attrs = append(attrs, slog.String("key", c.Key), slog.String("user", c.User),
		slog.String("operation", c.Operation), slog.String("outcome", string(c.Outcome)))
	if c.Attempt > 0 {
		attrs = append(attrs, slog.Int("attempt", c.Attempt))
	}
	if g.opts.RequestID != nil {
		if id := g.opts.RequestID(r.Context()); id != "" {
			attrs = append(attrs, slog.String("requestId", id))
		}
	}
	return attrs
}

// replayHeaders returns the allow-listed headers of h: h itself when
// every one of its keys is canonical and allow-listed (stores encode or
// copy what they keep, and the guard never changes a response's header).
func (g *Guard) replayHeaders(h http.Header) http.Header {
	all := true
	for k := range h {
		if !g.replayAllowed[k] { // the allow-list's keys are canonical
			all = false
			break
		}
	}
	if all {
		return h
	}
	out := make(http.Header, len(h))
	for k, v := range h {
		if c := http.CanonicalHeaderKey(k); g.replayAllowed[c] {
			out[c] = append([]string(nil), v...)
		}
	}
	return out
}

// storeCtx is the context of the store calls that end an attempt: they run
// even when the client has gone (the stores bound their own waits).
func storeCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithoutCancel(r.Context()), func() {}
}
