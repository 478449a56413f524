package server

import (
	"net/http"
	"slices"
	"strings"

	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/console"
)

// Route is one operation of the API: the one table the mux, the guard
// stack and the OpenAPI document are built from.
type Route struct {
	Method string
	// Path is the OpenAPI path: /v1/stock/balances/{item}/{location}.
	// {name} of a chain route may contain "/".
	Path    string
	ID      string // operationId, such as stock.receipts.create
	Tag     string
	Summary string
	// Scope is the API key scope the route needs; "" for a route without
	// an API key (health, the document, webhooks).
	Scope apikey.Scope
	// Guarded routes require Idempotency-Key and run through the replay
	// guard.
	Guarded bool
	// Request is a zero value of the body's type; nil without a body.
	Request any
	// Response is a zero value of the success body's type; nil for a body
	// that is not JSON.
	Response any
	// Status is the success status.
	Status int
	// Query are the query parameters.
	Query []Param

	// read answers a read; raw writes its own response.
	read func(c *call) (any, error)
	raw  func(c *call)
	// write checks and parses the request (reading the ledger as it
	// needs) and returns what to run in the write's transaction; its error
	// refuses the request before anything is written.
	write func(c *call) (func(tx txn) (any, error), error)
	// pattern is the mux pattern when it differs from Method Path (the
	// chain routes share one).
	pattern string
}

// Param is a query parameter.
type Param struct {
	// Type is string, integer (a small one, such as limit), boolean, or
	// int64: a 64-bit integer (a seq), a string of digits in the document.
	Name, Type, Description string
}

// PathParams returns the names of the route's path parameters in order.
func (r *Route) PathParams() []string {
	var out []string
	for _, seg := range strings.Split(r.Path, "/") {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			out = append(out, strings.Trim(seg, "{}"))
		}
	}
	return out
}

// Pattern returns the ServeMux pattern the route is served under.
func (r *Route) Pattern() string {
	if r.pattern != "" {
		return r.pattern
	}
	return r.Method + " " + r.Path
}

// Routes returns the route table, in document order.
func (s *Server) Routes() []*Route { return s.routes }

// routeKey names a route for metrics and logs.
func (r *Route) routeKey() string { return r.Method + " " + r.Path }

// chainPattern is the mux pattern of every chain route of a method: the
// ServeMux cannot put a multi-segment wildcard before a suffix, so the
// chain routes are told apart by their last segments (chainRoute).
const chainPrefix = "/v1/chains/"

// chainRoute finds the chain route of a request under chainPrefix and its
// chain name and seq: …/entries, …/entries/{seq} and …/head, read from the
// end, so that a chain may be named anything (even a/entries).
func chainRoute(routes map[string]*Route, method, rest string) (rt *Route, name, seq string) {
	i := strings.LastIndexByte(rest, '/')
	if i < 0 {
		return nil, "", ""
	}
	before, last := rest[:i], rest[i+1:]
	switch last {
	case "entries":
		return routes[chainKey(method, chainEntriesPath)], before, ""
	case "head":
		return routes[chainKey(method, chainHeadPath)], before, ""
	}
	if j := strings.LastIndexByte(before, '/'); j >= 0 && before[j+1:] == "entries" {
		return routes[chainKey(method, chainEntryPath)], before[:j], last
	}
	return nil, "", ""
}

// The chain routes' paths, and their route keys for the methods the chain
// routes have, so that finding a request's route allocates nothing.
const (
	chainEntriesPath = "/v1/chains/{name}/entries"
	chainHeadPath    = "/v1/chains/{name}/head"
	chainEntryPath   = "/v1/chains/{name}/entries/{seq}"
)

var chainKeys = map[string]map[string]string{
	http.MethodGet:  {chainEntriesPath: "GET " + chainEntriesPath, chainHeadPath: "GET " + chainHeadPath, chainEntryPath: "GET " + chainEntryPath},
	http.MethodPost: {chainEntriesPath: "POST " + chainEntriesPath, chainHeadPath: "POST " + chainHeadPath, chainEntryPath: "POST " + chainEntryPath},
}

// chainKey is method+" "+path.
func chainKey(method, path string) string {
	if k, ok := chainKeys[method][path]; ok {
		return k
	}
	return method + " " + path
}

// chainDispatcher serves the chain routes of one method.
func (s *Server) chainDispatcher(method string, handlers map[*Route]http.Handler) http.Handler {
	routes := map[string]*Route{}
	for _, rt := range s.routes {
		if strings.HasPrefix(rt.Path, chainPrefix) {
			routes[rt.routeKey()] = rt
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rt, name, seq := chainRoute(routes, method, r.PathValue("rest"))
		if rt == nil || name == "" {
			var allow []string
			for _, m := range allowMethods {
				if other, name, _ := chainRoute(routes, m, r.PathValue("rest")); m != method && other != nil && name != "" {
					allow = append(allow, m)
				}
			}
			if len(allow) == 0 {
				s.problem(w, r, errNoRoute)
				return
			}
			w.Header().Set("Allow", strings.Join(allow, ", "))
			s.problem(w, r, errMethodNotAllowed)
			return
		}
		r.SetPathValue("name", name)
		if seq != "" {
			r.SetPathValue("seq", seq)
		}
		handlers[rt].ServeHTTP(w, r)
	})
}

// buildMux registers every route: its handler behind the API key check,
// its scope and, when guarded, the replay guard. It returns the patterns
// registered, for the test that holds the document to the mux.
func (s *Server) buildMux() (*http.ServeMux, []string) {
	mux := http.NewServeMux()
	var patterns []string
	handlers := map[*Route]http.Handler{}
	chainMethods := map[string]bool{}
	for _, rt := range s.routes {
		h := s.routeHandler(rt)
		if rt.pattern != "" {
			handlers[rt] = h
			chainMethods[rt.Method] = true
			continue
		}
		mux.Handle(rt.Pattern(), h)
		patterns = append(patterns, rt.Pattern())
	}
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		if chainMethods[m] {
			p := m + " " + chainPrefix + "{rest...}"
			mux.Handle(p, s.chainDispatcher(m, handlers))
			patterns = append(patterns, p)
		}
	}
	// The console's pages (package console): static files, no route of the
	// API and no API key (the pages sign in with one).
	mux.Handle("GET /console", console.Handler())
	mux.Handle("GET "+console.Prefix, console.Handler())
	// What no pattern serves: the catch-all finds whether the path is
	// served for other methods (405) or not at all (404). It is registered
	// last and is no route of the table.
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { s.unmatched(mux, w, r) })
	return mux, patterns
}

// allowMethods are the methods the catch-all tries for Allow.
var allowMethods = []string{http.MethodGet, http.MethodPost, http.MethodDelete}

// unmatched answers a request no route matches with a problem: 405
// METHOD_NOT_ALLOWED (with Allow) when the path is served for other
// methods, else 404 NOT_FOUND.
func (s *Server) unmatched(mux *http.ServeMux, w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range allowMethods {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := mux.Handler(probe); pattern != "" && pattern != "/" {
			allow = append(allow, m)
		}
	}
	if len(allow) == 0 {
		s.problem(w, r, errNoRoute)
		return
	}
	if slices.Contains(allow, http.MethodGet) {
		allow = append(allow, http.MethodHead)
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	s.problem(w, r, errMethodNotAllowed)
}
