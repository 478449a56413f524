package idempotency

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// execute runs next for the attempt c holds, then stores its outcome and
// writes its response.
func (g *Guard) execute(w http.ResponseWriter, r *http.Request, c *Context, body []byte, next http.Handler) {
	a := &attempt{req: r, ctx: guardContext{Context: r.Context(), c: c}}
	c.run = a
	cw := &a.cw
	*cw = captureWriter{w: w, limit: g.opts.ResponseSizeMax}
	if body != nil {
		// The body, read by the guard, for the handler.
		a.body.Reset(body)
		r.Body = &a.body
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	g.beats.start(g, c)
	done := false
	defer func() {
		if done {
			return
		}
		// The handler panicked: the attempt failed transiently.
		g.beats.stop(c)
		ctx, cancel := storeCtx(r)
		defer cancel()
		now := g.now()
		_ = endRetried(ctx, func() error {
			_, err := g.store.Release(ctx, c.Scope, c.token, g.opts.MaxRetries, now.Add(g.opts.TTL), now)
			return err
		})
		g.finish(r, c, OutcomeFailedTransient, http.StatusInternalServerError, slog.LevelError, slog.String("error", "handler panicked"))
	}()
	next.ServeHTTP(cw, r.WithContext(&a.ctx))
	done = true
	g.beats.stop(c)
	g.settle(r, c, cw)
	cw.send()
}

// settle records the end of the attempt in the store.
func (g *Guard) settle(r *http.Request, c *Context, cw *captureWriter) {
	status := cw.statusCode()
	c.mu.Lock()
	handlerErr, txPending, committed := c.err, c.txPending, c.committed
	c.mu.Unlock()
	if committed {
		g.finish(r, c, OutcomeExecuted, status, slog.LevelDebug)
		return
	}
	ctx, cancel := storeCtx(r)
	defer cancel()
	now := g.now()
	expiresAt := now.Add(g.opts.TTL)
	if txPending {
		start := g.storeStart()
		ok, err := g.store.(TxStore).Committed(ctx, c.Scope, c.token)
		g.storeLatency("committed", start)
		if err != nil {
			g.finish(r, c, OutcomeStoreError, status, slog.LevelError, slog.Any("error", err))
			return
		}
		if ok {
			g.finish(r, c, OutcomeExecuted, status, slog.LevelDebug)
			return
		}
	}

	failed := handlerErr != nil || status >= 500 || status == http.StatusRequestTimeout || status == http.StatusTooManyRequests
	notStored := cw.streamed || cw.hijacked || cw.oversize
	switch {
	case failed && g.opts.IsOutage != nil && g.opts.IsOutage(status, handlerErr):
		// An outage (a store that did not answer), not a failure of the
		// operation: the key is freed without counting toward MaxRetries.
		start := g.storeStart()
		err := endRetried(ctx, func() error { return g.store.Abandon(ctx, c.Scope, c.token, now) })
		g.storeLatency("abandon", start)
		g.ended(r, c, OutcomeUnavailable, status, err)
	case failed && g.opts.IsPermanentError != nil && g.opts.IsPermanentError(status, handlerErr):
		failure := "the handler failed with status " + http.StatusText(status)
		if handlerErr != nil {
			failure = handlerErr.Error()
		}
		start := g.storeStart()
		err := endRetried(ctx, func() error { return g.store.Fail(ctx, c.Scope, c.token, failure, expiresAt, now) })
		g.storeLatency("fail", start)
		g.ended(r, c, OutcomeFailedPermanent, status, err)
	case failed || notStored:
		start := g.storeStart()
		var res ReleaseResult
		err := endRetried(ctx, func() error {
			var err error
			res, err = g.store.Release(ctx, c.Scope, c.token, g.opts.MaxRetries, expiresAt, now)
			return err
		})
		g.storeLatency("release", start)
		outcome := OutcomeFailedTransient
		if notStored && !failed {
			outcome = OutcomeNotStored
		}
		if res.Poisoned {
			outcome = OutcomePoisoned
		}
		g.ended(r, c, outcome, status, err)
	default:
		resp := cw.response()
		resp.Header = g.replayHeaders(resp.Header)
		start := g.storeStart()
		err := endRetried(ctx, func() error { return g.store.Succeed(ctx, c.Scope, c.token, resp, expiresAt, now) })
		g.storeLatency("succeed", start)
		g.ended(r, c, OutcomeExecuted, status, err)
	}
}

// Tries of a store call that ends an attempt: a call that failed (a
// terminated backend, a lost connection) is tried again, after a short
// wait, before the record is left to the lease's end and the recovery.
const (
	endTriesMax    = 4
	endBackoffBase = 25 * time.Millisecond // doubled each try: 175 ms of waits in all
)

// endRetried runs call, a store call fenced by the attempt's token, until
// it succeeds, answers ErrLeaseLost (it took effect, or the record is no
// longer the attempt's) or ErrInvalidScope, or endTriesMax tries failed.
func endRetried(ctx context.Context, call func() error) error {
	var err error
	for i := range endTriesMax {
		if err = call(); err == nil || errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrInvalidScope) {
			return err
		}
		if i+1 < endTriesMax {
			t := time.NewTimer(endBackoffBase << i)
			select {
			case <-ctx.Done():
				t.Stop()
				return err
			case <-t.C:
			}
		}
	}
	return err
}

// ended finishes an attempt whose store call returned err. The response is
// sent either way: the handler's effect happened, and a retry is answered
// by the ledger's own uniqueness if the record is lost.
func (g *Guard) ended(r *http.Request, c *Context, outcome Outcome, status int, err error) {
	if err != nil {
		g.finish(r, c, OutcomeStoreError, status, slog.LevelError, slog.String("intended", string(outcome)), slog.Any("error", err))
		return
	}
	level := slog.LevelDebug
	if outcome != OutcomeExecuted {
		level = slog.LevelWarn
	}
	g.finish(r, c, outcome, status, level)
}

// guardContext is a request's context carrying its Context: the Context
// holds it, so that attaching the Context costs no allocation.
type guardContext struct {
	context.Context
	c *Context
}

func (gc *guardContext) Value(key any) any {
	if key == (contextKey{}) {
		return gc.c
	}
	return gc.Context.Value(key)
}

// heartbeats extends the leases of a guard's running attempts: one
// goroutine, running while attempts run, extends every running attempt's
// lease each HeartbeatInterval, so that each is extended within an interval
// of its start and every interval after, and an attempt costs no timer of
// its own.
type heartbeats struct {
	mu      sync.Mutex
	running map[*Context]struct{}
	ticking bool
}

// start registers c's attempt.
func (hb *heartbeats) start(g *Guard, c *Context) {
	hb.mu.Lock()
	if hb.running == nil {
		hb.running = map[*Context]struct{}{}
	}
	hb.running[c] = struct{}{}
	if !hb.ticking {
		hb.ticking = true
		go hb.loop(g)
	}
	hb.mu.Unlock()
}

// stop unregisters c's attempt: its lease is not extended again.
func (hb *heartbeats) stop(c *Context) {
	hb.mu.Lock()
	delete(hb.running, c)
	hb.mu.Unlock()
}

// loop extends the running attempts' leases until none runs.
func (hb *heartbeats) loop(g *Guard) {
	t := time.NewTicker(g.opts.HeartbeatInterval)
	defer t.Stop()
	var batch []*Context
	for range t.C {
		hb.mu.Lock()
		if len(hb.running) == 0 {
			hb.ticking = false
			hb.mu.Unlock()
			return
		}
		batch = batch[:0]
		for c := range hb.running {
			batch = append(batch, c)
		}
		hb.mu.Unlock()
		for _, c := range batch {
			hb.extend(g, c)
		}
		clear(batch)
	}
}

// extendTriesMax bounds the tries of one heartbeat of an attempt: a store
// whose connection was terminated answers the next try on another one, at
// once, rather than an interval later (a lease survives two missed beats).
const extendTriesMax = 3

// extend extends c's lease, and logs a failure while the attempt runs.
func (hb *heartbeats) extend(g *Guard, c *Context) {
	ctx := context.WithoutCancel(c.run.ctx.Context)
	now := g.now()
	var err error
	for range extendTriesMax {
		err = g.store.Extend(ctx, c.Scope, c.token, now.Add(g.opts.LeaseDuration), now)
		if err == nil {
			return
		}
		if errors.Is(err, ErrLeaseLost) {
			break
		}
	}
	lost := errors.Is(err, ErrLeaseLost)
	hb.mu.Lock()
	_, running := hb.running[c]
	if running && lost {
		delete(hb.running, c) // no lease left to extend
	}
	hb.mu.Unlock()
	switch {
	case !running: // the attempt ended meanwhile
	case lost:
		g.log.LogAttrs(ctx, slog.LevelError, "idempotency lease lost while the handler runs", g.attrs(c.run.req, c)...)
	default:
		g.log.LogAttrs(ctx, slog.LevelWarn, "idempotency heartbeat failed", append(g.attrs(c.run.req, c), slog.Any("error", err))...)
	}
}

// captureWriter buffers a handler's response so that it is stored before
// the client sees it. A flush, a hijack or a body over the limit switches
// it to passing writes through; such a response is not stored.
type captureWriter struct {
	w           http.ResponseWriter
	header      http.Header // made on the first call of Header
	direct      Response    // a response WriteResponse handed over whole
	hasDirect   bool
	buf         bytes.Buffer
	limit       int
	status      int
	wroteHeader bool
	passing     bool // writes go to w
	streamed    bool
	hijacked    bool
	oversize    bool
}

func (cw *captureWriter) Header() http.Header {
	cw.undirect()
	if cw.header == nil {
		cw.header = http.Header{}
	}
	return cw.header
}

// take records resp, written by WriteResponse before anything else, as
// the response, without copying it; false when something was written, or
// a header asked for, before.
func (cw *captureWriter) take(resp *Response) bool {
	if cw.wroteHeader || cw.header != nil || resp.Status < 200 || len(resp.Body) > cw.limit {
		return false
	}
	cw.direct, cw.hasDirect = *resp, true
	cw.wroteHeader, cw.status = true, resp.Status
	return true
}

// undirect turns a response taken whole into a header and a buffered
// body, before anything else is done to the writer.
func (cw *captureWriter) undirect() {
	if !cw.hasDirect {
		return
	}
	resp := cw.direct
	cw.direct, cw.hasDirect = Response{}, false
	cw.header = make(http.Header, len(resp.Header))
	for k, v := range resp.Header {
		cw.header[k] = append([]string(nil), v...)
	}
	cw.buf.Write(resp.Body)
}

// response is the captured response.
func (cw *captureWriter) response() Response {
	if cw.hasDirect {
		return cw.direct
	}
	return Response{Status: cw.statusCode(), Header: cw.header, Body: cw.buf.Bytes()}
}

func (cw *captureWriter) WriteHeader(status int) {
	if cw.wroteHeader || status < 200 { // informational responses are neither stored nor sent
		return
	}
	cw.wroteHeader, cw.status = true, status
}

func (cw *captureWriter) statusCode() int {
	if !cw.wroteHeader {
		return http.StatusOK
	}
	return cw.status
}

func (cw *captureWriter) Write(p []byte) (int, error) {
	cw.undirect()
	if !cw.wroteHeader {
		cw.WriteHeader(http.StatusOK)
	}
	if cw.passing {
		return cw.w.Write(p)
	}
	if cw.buf.Len()+len(p) > cw.limit {
		cw.oversize = true
		cw.pass()
		return cw.w.Write(p)
	}
	return cw.buf.Write(p)
}

// pass writes the headers and the buffered body to w and passes every
// later write through.
func (cw *captureWriter) pass() {
	if cw.passing {
		return
	}
	cw.undirect()
	cw.passing = true
	h := cw.w.Header()
	for k, v := range cw.header {
		h[k] = v
	}
	cw.w.WriteHeader(cw.statusCode())
	_, _ = cw.w.Write(cw.buf.Bytes())
}

// Flush sends what is buffered: the response is then streamed and is not
// stored.
func (cw *captureWriter) Flush() {
	if !cw.wroteHeader {
		cw.WriteHeader(http.StatusOK)
	}
	cw.streamed = true
	cw.pass()
	if f, ok := cw.w.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack hands the connection to the handler; the response is not stored.
func (cw *captureWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := cw.w.(http.Hijacker)
	if !ok {
		return nil, nil, http.ErrNotSupported
	}
	cw.undirect()
	cw.hijacked, cw.passing = true, true
	return h.Hijack()
}

// send writes the buffered response to the client.
func (cw *captureWriter) send() {
	if cw.passing {
		return
	}
	resp := cw.response()
	writeResponse(cw.w, &resp, false)
}
