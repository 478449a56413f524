package idempotency

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// execute runs next for the attempt c holds, then stores its outcome and
// writes its response.
func (g *Guard) execute(w http.ResponseWriter, r *http.Request, c *Context, body []byte, next http.Handler) {
	cw := &captureWriter{w: w, header: http.Header{}, limit: g.opts.ResponseSizeMax}
	hb := g.startHeartbeat(r, c)
	done := false
	defer func() {
		if done {
			return
		}
		// The handler panicked: the attempt failed transiently.
		hb.stop()
		ctx, cancel := storeCtx(r)
		defer cancel()
		_, _ = g.store.Release(ctx, c.Scope, c.token, g.opts.MaxRetries, g.now().Add(g.opts.TTL), g.now())
		g.finish(r, c, OutcomeFailedTransient, http.StatusInternalServerError, slog.LevelError, slog.String("error", "handler panicked"))
	}()
	next.ServeHTTP(cw, r.WithContext(contextWith(r, c)))
	done = true
	hb.stop()
	g.settle(r, c, cw)
	cw.send()
}

// settle records the end of the attempt in the store.
func (g *Guard) settle(r *http.Request, c *Context, cw *captureWriter) {
	ctx, cancel := storeCtx(r)
	defer cancel()
	status := cw.statusCode()
	now := g.now()
	expiresAt := now.Add(g.opts.TTL)

	c.mu.Lock()
	handlerErr, txPending, committed := c.err, c.txPending, c.committed
	c.mu.Unlock()
	if committed {
		g.finish(r, c, OutcomeExecuted, status, slog.LevelDebug)
		return
	}
	if txPending {
		start := time.Now()
		ok, err := g.store.(TxStore).Committed(ctx, c.Scope, c.token)
		g.metrics.StoreLatency("committed", time.Since(start))
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
	case failed && g.opts.IsPermanentError != nil && g.opts.IsPermanentError(status, handlerErr):
		failure := "the handler failed with status " + http.StatusText(status)
		if handlerErr != nil {
			failure = handlerErr.Error()
		}
		start := time.Now()
		err := g.store.Fail(ctx, c.Scope, c.token, failure, expiresAt, now)
		g.metrics.StoreLatency("fail", time.Since(start))
		g.ended(r, c, OutcomeFailedPermanent, status, err)
	case failed || notStored:
		start := time.Now()
		res, err := g.store.Release(ctx, c.Scope, c.token, g.opts.MaxRetries, expiresAt, now)
		g.metrics.StoreLatency("release", time.Since(start))
		outcome := OutcomeFailedTransient
		if notStored && !failed {
			outcome = OutcomeNotStored
		}
		if res.Poisoned {
			outcome = OutcomePoisoned
		}
		g.ended(r, c, outcome, status, err)
	default:
		resp := Response{Status: status, Header: g.replayHeaders(cw.header), Body: cw.buf.Bytes()}
		start := time.Now()
		err := g.store.Succeed(ctx, c.Scope, c.token, resp, expiresAt, now)
		g.metrics.StoreLatency("succeed", time.Since(start))
		g.ended(r, c, OutcomeExecuted, status, err)
	}
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

func contextWith(r *http.Request, c *Context) context.Context {
	return context.WithValue(r.Context(), contextKey{}, c)
}

// heartbeat extends a running attempt's lease every HeartbeatInterval.
type heartbeat struct {
	mu      sync.Mutex
	t       *time.Timer
	stopped bool
}

func (g *Guard) startHeartbeat(r *http.Request, c *Context) *heartbeat {
	hb := &c.hb
	hb.mu.Lock()
	defer hb.mu.Unlock()
	hb.t = time.AfterFunc(g.opts.HeartbeatInterval, func() {
		ctx, cancel := storeCtx(r)
		defer cancel()
		now := g.now()
		err := g.store.Extend(ctx, c.Scope, c.token, now.Add(g.opts.LeaseDuration), now)
		hb.mu.Lock()
		defer hb.mu.Unlock()
		if hb.stopped {
			return
		}
		if errors.Is(err, ErrLeaseLost) {
			g.log.LogAttrs(r.Context(), slog.LevelError, "idempotency lease lost while the handler runs", g.attrs(r, c)...)
			return
		}
		if err != nil {
			g.log.LogAttrs(r.Context(), slog.LevelWarn, "idempotency heartbeat failed", append(g.attrs(r, c), slog.Any("error", err))...)
		}
		hb.t.Reset(g.opts.HeartbeatInterval)
	})
	return hb
}

func (hb *heartbeat) stop() {
	hb.mu.Lock()
	hb.stopped = true
	hb.t.Stop()
	hb.mu.Unlock()
}

// captureWriter buffers a handler's response so that it is stored before
// the client sees it. A flush, a hijack or a body over the limit switches
// it to passing writes through; such a response is not stored.
type captureWriter struct {
	w           http.ResponseWriter
	header      http.Header
	buf         bytes.Buffer
	limit       int
	status      int
	wroteHeader bool
	passing     bool // writes go to w
	streamed    bool
	hijacked    bool
	oversize    bool
}

func (cw *captureWriter) Header() http.Header { return cw.header }

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
	cw.hijacked, cw.passing = true, true
	return h.Hijack()
}

// send writes the buffered response to the client.
func (cw *captureWriter) send() {
	if cw.passing {
		return
	}
	writeResponse(cw.w, &Response{Status: cw.statusCode(), Header: cw.header, Body: cw.buf.Bytes()}, false)
}
