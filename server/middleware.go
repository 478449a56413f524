package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/apikey"
)

// requestIDLengthMax bounds an X-Request-Id taken from a request; a longer
// or unprintable one is replaced by the server's own.
const requestIDLengthMax = 128

// info is what the outer middleware learns about a request as it passes
// down: the access log and the metrics read it once the handler returns.
type info struct {
	id     string
	route  *Route
	tenant string
	keyID  string
	// auth is the answer for the request's token, kept by the rate
	// limiter's keyID so that the API key check does not authenticate the
	// token a second time.
	auth     authAnswer
	authDone bool
}

// authAnswer is Authenticator.Authenticate's answer for token.
type authAnswer struct {
	token string
	key   apikey.Key
	err   error
}

// authenticate is Authenticator.Authenticate, answered from the request's
// info when the rate limiter authenticated the same token already.
func (s *Server) authenticate(ctx context.Context, token string) (apikey.Key, error) {
	in := infoOf(ctx)
	if in != nil && in.authDone && in.auth.token == token {
		return in.auth.key, in.auth.err
	}
	k, err := s.auth.Authenticate(ctx, token)
	if in != nil {
		in.auth, in.authDone = authAnswer{token: token, key: k, err: err}, true
	}
	return k, err
}

// keyID is the rate limiter's default KeyID: the id of the key that the
// Bearer token authenticates (Authenticator.KeyIDOf), its answer kept for
// the API key check.
func (s *Server) keyID(r *http.Request) (string, bool) {
	token, ok := apikey.BearerToken(r.Header.Get("Authorization"))
	if !ok {
		return "", false
	}
	k, err := s.authenticate(r.Context(), token)
	if err != nil {
		return "", false
	}
	return k.ID, true
}

type infoKey struct{}

func infoOf(ctx context.Context) *info {
	i, _ := ctx.Value(infoKey{}).(*info)
	return i
}

// RequestIDFromContext returns the request id of a request the server
// handles, or "".
func RequestIDFromContext(ctx context.Context) string {
	if i := infoOf(ctx); i != nil {
		return i.id
	}
	return ""
}

func newRequestIDPrefix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b) + "-"
}

// requestID returns the request's own X-Request-Id when it is short
// printable ASCII, else a new id: a prefix random per server and a count.
func (s *Server) requestID(r *http.Request) string {
	if id := r.Header.Get(api.HeaderRequestID); id != "" && len(id) <= requestIDLengthMax && printable(id) {
		return id
	}
	var buf [48]byte // one allocation: the string
	return string(strconv.AppendUint(append(buf[:0], s.idPrefix...), s.requests.Add(1), 10))
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// statusWriter records the status and size of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// requestState is what the outer stack keeps about a request.
type requestState struct {
	in info
	sw statusWriter
}

// buildHandler is the outer stack: request id, access log and metrics,
// panic recovery, the body limit, then the mux.
func (s *Server) buildHandler() http.Handler {
	mux, _ := s.buildMux()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		st := &requestState{in: info{id: s.requestID(r)}, sw: statusWriter{ResponseWriter: w}} // one allocation for both
		in, sw := &st.in, &st.sw
		w.Header().Set(api.HeaderRequestID, in.id)
		if s.tracer != nil {
			var span trace.Span
			r, span = s.startSpan(r, in.id)
			defer func() { s.endSpan(span, r, in, sw) }() // after the access log, and when a panic goes on
		}
		r = r.WithContext(context.WithValue(r.Context(), infoKey{}, in))
		s.metrics.inFlight.Inc()
		defer func() {
			s.metrics.inFlight.Dec()
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.LogAttrs(r.Context(), slog.LevelError, "handler panicked", slog.String("request_id", in.id),
					slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
				if sw.status == 0 {
					s.problem(sw, r, &httpError{status: http.StatusInternalServerError, code: api.CodeStorage, detail: "internal error"})
				}
			}
			s.finish(r, in, sw, time.Since(start))
		}()
		if !s.limitBody(sw, r) {
			return
		}
		if !s.servedPath(sw, r) {
			return
		}
		mux.ServeHTTP(sw, r)
	})
}

// finish writes the access log line and the metrics of one request.
func (s *Server) finish(r *http.Request, in *info, sw *statusWriter, elapsed time.Duration) {
	status := sw.status
	if status == 0 {
		status = http.StatusOK
	}
	s.metrics.observe(in.route, status, elapsed)
	level := slog.LevelInfo
	if status >= 500 {
		level = slog.LevelError
	}
	if !s.log.Enabled(r.Context(), level) {
		return // a disabled or discarding logger costs nothing more
	}
	route := unmatchedRoute
	if in.route != nil {
		route = in.route.routeKey()
	}
	attrs := []slog.Attr{slog.String("request_id", in.id), slog.String("method", r.Method),
		slog.String("path", r.URL.Path), slog.String("route", route), slog.Int("status", status),
		slog.Int64("bytes", sw.bytes), slog.Duration("duration", elapsed), slog.String("remote", r.RemoteAddr)}
	if in.tenant != "" {
		attrs = append(attrs, slog.String("tenant", in.tenant), slog.String("key_id", in.keyID))
	}
	if sw.Header().Get(api.HeaderReplayed) == "true" {
		attrs = append(attrs, slog.Bool("replayed", true))
	}
	s.log.LogAttrs(r.Context(), level, "http request", attrs...)
}

// limitBody refuses a body larger than BodySizeMax with 413
// PAYLOAD_TOO_LARGE before any layer reads it: at once when Content-Length
// says so, else (a chunked body) after reading at most the limit and a
// byte. It returns false when it answered.
func (s *Server) limitBody(w http.ResponseWriter, r *http.Request) bool {
	if r.Body == nil || r.Body == http.NoBody {
		return true
	}
	tooLarge := func() error { // made only for a refusal
		return &httpError{status: http.StatusRequestEntityTooLarge, code: api.CodePayloadTooLarge,
			detail: fmt.Sprintf("the body exceeds %d bytes", s.opts.BodySizeMax)}
	}
	if r.ContentLength > s.opts.BodySizeMax {
		s.refuseBody(w, r, tooLarge())
		return false
	}
	if r.ContentLength >= 0 {
		r.Body = http.MaxBytesReader(w, r.Body, s.opts.BodySizeMax)
		return true
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, s.opts.BodySizeMax+1))
	if err != nil {
		r.Body.Close()
		s.problem(w, r, invalidf("reading the body: %v", err))
		return false
	}
	if int64(len(body)) > s.opts.BodySizeMax {
		s.refuseBody(w, r, tooLarge())
		return false
	}
	r.Body.Close()
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	return true
}

// Bounds of the lingering close after a 413.
const (
	// LingerSizeMax is the most of a refused body the server reads and
	// discards after its 413.
	LingerSizeMax = 16 << 20
	// LingerTimeout bounds the time it spends doing so.
	LingerTimeout = 5 * time.Second
)

// refuseBody answers a body too large with 413 and Connection: close, then
// reads and discards what the client still sends, at most LingerSizeMax
// bytes within LingerTimeout. Most clients write the whole body before
// they read: a connection closed with their body unread is reset, and the
// reset can destroy the 413 before they read it. A body declared larger
// than LingerSizeMax, or sent only after 100 Continue, is not read.
func (s *Server) refuseBody(w http.ResponseWriter, r *http.Request, err error) {
	if r.ProtoMajor != 1 {
		s.problem(w, r, err) // an HTTP/2 stream ends alone; its connection stays
		return
	}
	w.Header().Set("Connection", "close")
	rc := http.NewResponseController(w)
	// Reading the body after the answer is written needs full duplex.
	duplex := rc.EnableFullDuplex() == nil
	s.problem(w, r, err)
	if !duplex || r.Header.Get("Expect") != "" || r.ContentLength > LingerSizeMax {
		return
	}
	if rc.Flush() != nil {
		return
	}
	_ = rc.SetReadDeadline(time.Now().Add(LingerTimeout))
	_, _ = io.CopyN(io.Discard, r.Body, LingerSizeMax)
}

// errPathNotClean refuses a path ServeMux would redirect to its cleaned
// form (with a text/html body, before any API key is checked).
var errPathNotClean = &httpError{status: http.StatusNotFound, code: api.CodeNotFound,
	detail: "no such route: a path starts with / and has no empty, . or .. segment"}

// servedPath answers 404 NOT_FOUND, as a problem, for what ServeMux
// would answer with a redirect: a path that is not clean (//, /./, /../,
// or not starting with /, such as OPTIONS *), and a route's prefix
// without its slash (POST /v1/chains; GET /v1/chains is the chain list).
// It returns false when it answered.
func (s *Server) servedPath(w http.ResponseWriter, r *http.Request) bool {
	p := r.URL.Path
	if cleanPath(p) && (!muxRedirects[p] || r.Method == http.MethodGet || r.Method == http.MethodHead) {
		return true
	}
	if cleanPath(p) {
		s.problem(w, r, errNoRoute)
	} else {
		s.problem(w, r, errPathNotClean)
	}
	return false
}

// muxRedirects are the paths ServeMux redirects to the same path with a
// slash, because a pattern serves that path's subtree, for every method
// but GET and HEAD, which the chain list serves.
var muxRedirects = map[string]bool{strings.TrimSuffix(chainPrefix, "/"): true}

// cleanPath reports whether p is what path.Clean makes of it, as
// ServeMux checks (a trailing slash kept): rooted, without an empty, . or
// .. segment.
func cleanPath(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	for i := 1; i < len(p); {
		j := strings.IndexByte(p[i:], '/')
		seg := p[i:]
		if j >= 0 {
			seg = p[i : i+j]
		}
		if seg == "." || seg == ".." || seg == "" && j >= 0 {
			return false
		}
		if j < 0 {
			break
		}
		i += j + 1
	}
	return true
}
