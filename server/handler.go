package server

import (
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/zeebo/blake3"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/idempotency"
)

// guardUser is the replay guard's user: the key's tenant and id, so that a
// key can never replay (or collide with) another key's requests.
func guardUser(r *http.Request) (string, error) {
	k, ok := apikey.FromContext(r.Context())
	if !ok {
		return "", apikey.ErrUnauthenticated
	}
	return k.Tenant + "/" + k.ID, nil
}

// guardOperation is the replay guard's operation: the method and the path,
// so that one key used on two chains (or two routes) names two requests.
// A path too long for a scope is shortened to its route and a digest.
func guardOperation(r *http.Request) string {
	op := r.Method + " " + r.URL.EscapedPath()
	if len(op) <= idempotency.OperationSizeMax {
		return op
	}
	sum := blake3.Sum256([]byte(op))
	return r.Method + " " + r.Pattern + " " + hex.EncodeToString(sum[:16])
}

// routeHandler composes a route's stack, outermost first: the rate limit,
// the API key, the scope, the replay guard (guarded routes), the handler.
func (s *Server) routeHandler(rt *Route) http.Handler {
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.serveRoute(rt, w, r) })
	if s.opts.RouteHook != nil {
		h = s.opts.RouteHook(rt.ID, h)
	}
	if rt.Guarded {
		g := s.guard
		if rt.ID == "apikeys.create" {
			g = s.keyGuard
		}
		h = g.Middleware(h)
	}
	if rt.Scope != "" {
		h = s.checkRequest(rt, h)
		h = s.requireScope(rt.Scope, h)
		h = apikey.MiddlewareFunc(s.authenticate)(h)
	}
	if strings.HasPrefix(rt.Path, "/v1/") {
		h = s.limiter.Middleware(h)
	}
	return s.withRoute(rt, h)
}

// withRoute names the route in the request's info, for the access log and
// the metrics.
func (s *Server) withRoute(rt *Route, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if in := infoOf(r.Context()); in != nil {
			in.route = rt
		}
		next.ServeHTTP(w, r)
	})
}

// requireScope refuses a key without the scope with 403 FORBIDDEN.
func (s *Server) requireScope(scope apikey.Scope, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, ok := apikey.FromContext(r.Context())
		if !ok {
			s.problem(w, r, apikey.ErrUnauthenticated)
			return
		}
		if in := infoOf(r.Context()); in != nil {
			in.tenant, in.keyID = k.Tenant, k.ID
		}
		if !k.Has(scope) {
			s.problem(w, r, &httpError{status: http.StatusForbidden, code: api.CodeForbidden,
				detail: fmt.Sprintf("the key lacks the %s scope", scope)})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// checkRequest refuses, before the replay guard stores an answer for the
// key, what no retry with the same key could fix: an Idempotency-Key
// outside printable ASCII (400 KEY_INVALID; the guard's own parsing takes
// UTF-8), and a body without Content-Type application/json on a route
// that reads one (415 UNSUPPORTED_MEDIA_TYPE).
func (s *Server) checkRequest(rt *Route, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rt.Guarded {
			for _, v := range r.Header.Values(api.HeaderIdempotencyKey) {
				if !printableKey(v) {
					s.problem(w, r, &idempotency.Error{Code: idempotency.CodeKeyInvalid,
						Detail: "key holds a byte outside printable ASCII"})
					return
				}
			}
		}
		if rt.Request != nil && r.ContentLength != 0 {
			if err := checkMediaType(r.Header.Get("Content-Type")); err != nil {
				s.problem(w, r, err)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// printableKey reports whether an Idempotency-Key is printable ASCII
// (spaces allowed; net/http trims them around the value).
func printableKey(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return false
		}
	}
	return true
}

// checkMediaType accepts application/json, with parameters (charset).
func checkMediaType(ct string) error {
	if ct == api.MediaJSON { // the common case parses nothing
		return nil
	}
	if ct == "" {
		return &httpError{status: http.StatusUnsupportedMediaType, code: api.CodeUnsupportedMedia,
			detail: "a body needs Content-Type: " + api.MediaJSON}
	}
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != api.MediaJSON {
		return &httpError{status: http.StatusUnsupportedMediaType, code: api.CodeUnsupportedMedia,
			detail: fmt.Sprintf("Content-Type %q: want %s", ct, api.MediaJSON)}
	}
	return nil
}

// serveRoute runs the route's handler.
func (s *Server) serveRoute(rt *Route, w http.ResponseWriter, r *http.Request) {
	c := &call{s: s, w: w, r: r, ctx: r.Context(), guard: idempotency.FromContext(r.Context())}
	if k, ok := apikey.FromContext(r.Context()); ok {
		c.key, c.tenant = k, k.Tenant
	}
	switch {
	case rt.raw != nil:
		rt.raw(c)
	case rt.read != nil:
		v, err := rt.read(c)
		if err != nil {
			s.problem(w, r, err)
			return
		}
		writeJSON(w, rt.Status, v)
	case rt.write != nil:
		s.runWrite(c, rt)
	}
}

// runWrite runs a write in one ledger transaction. With a store that can
// (LedgerStore, or a pgstore bound to the ledger), the guard's SUCCESS
// record commits in that same transaction (Context.Update); otherwise the
// transaction commits and the guard stores the response it then captures. Either way a retry whose
// record was lost writes nothing twice: every key the write uses is
// derived from the request's scope (call.op).
func (s *Server) runWrite(c *call, rt *Route) {
	if c.guard == nil {
		panic("server: a write route without the guard") // the route table marks every write guarded
	}
	run, err := rt.write(c)
	if err != nil {
		s.problem(c.w, c.r, err)
		return
	}
	resp, err := c.guard.Update(c.ctx, func(tx *chain.Tx) (idempotency.Response, error) {
		v, err := run(tx)
		if err != nil {
			return idempotency.Response{}, err
		}
		return idempotency.Response{Status: rt.Status, Header: jsonHeader, Body: marshal(v)}, nil
	})
	if errors.Is(err, idempotency.ErrTxUnsupported) {
		var v any
		err = s.db.Update(c.ctx, func(tx *chain.Tx) error {
			var err error
			v, err = run(tx)
			return err
		})
		if err != nil {
			s.problem(c.w, c.r, err)
			return
		}
		writeJSON(c.w, rt.Status, v)
		return
	}
	if err != nil {
		s.problem(c.w, c.r, err)
		return
	}
	idempotency.WriteResponse(c.w, resp)
}
