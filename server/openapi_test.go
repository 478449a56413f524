package server_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/server"
)

var refPattern = regexp.MustCompile(`"\$ref":"#/components/schemas/([^"]+)"`)

// The document at /openapi.json names every route the mux serves and
// nothing else, and every operation it documents answers over HTTP.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	db := openBolt(t)
	ts := startServer(t, db, server.Options{Providers: []server.Provider{{Name: "hooks", Kind: server.ProviderGitHub,
		Tenant: "acme", Secrets: []string{"s"}}}})
	token := ts.key("acme", allScopes...)
	fixture(t, ts, token)

	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	r := ts.do(http.MethodGet, "/openapi.json", "", "", nil)
	r.decode(t, http.StatusOK, &doc)
	if doc.OpenAPI != server.OpenAPIVersion {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	// Every $ref names a schema of the document.
	var whole struct {
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(r.body, &whole); err != nil {
		t.Fatal(err)
	}
	refs := refPattern.FindAllSubmatch(r.body, -1)
	if len(refs) < len(ts.srv.Routes()) {
		t.Fatalf("%d $refs for %d routes", len(refs), len(ts.srv.Routes()))
	}
	for _, m := range refs {
		if _, ok := whole.Components.Schemas[string(m[1])]; !ok {
			t.Errorf("$ref %s names no schema", m[0])
		}
	}
	documented := map[string]bool{}
	for path, item := range doc.Paths {
		for method := range item {
			documented[strings.ToUpper(method)+" "+path] = true
		}
	}
	routes := map[string]*server.Route{}
	for _, rt := range ts.srv.Routes() {
		routes[rt.Method+" "+rt.Path] = rt
		if !documented[rt.Method+" "+rt.Path] {
			t.Errorf("route %s %s is not documented", rt.Method, rt.Path)
		}
	}
	for op := range documented {
		if routes[op] == nil {
			t.Errorf("%s is documented but is not a route", op)
		}
	}
	// Every pattern of the mux serves documented routes: its own, or the
	// chain routes it dispatches.
	for _, p := range ts.srv.MuxPatterns() {
		method, path, _ := strings.Cut(p, " ")
		if strings.HasSuffix(path, "{rest...}") {
			found := false
			for op := range documented {
				found = found || strings.HasPrefix(op, method+" "+strings.TrimSuffix(path, "{rest...}"))
			}
			if !found {
				t.Errorf("mux pattern %s serves no documented route", p)
			}
			continue
		}
		if !documented[p] {
			t.Errorf("mux pattern %s is not documented", p)
		}
	}
	// Every documented operation is served: a request to it reaches its
	// route (the access log's route, the mux's no-route answer aside).
	var ops []string
	for op := range documented {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	for i, op := range ops {
		rt := routes[op]
		var body any
		if rt.Request != nil {
			body = "{}"
		}
		res := ts.do(rt.Method, samplePath(rt), token, "probe-"+itoa(i), body)
		if res.header.Get("Content-Type") == api.MediaProblem {
			p := res.problem(t)
			if p.Code == api.CodeMethodNotAllowed || p.Code == api.CodeNotFound && p.Detail == "no such route" {
				t.Errorf("%s (%s): not served: %d %s", op, samplePath(rt), res.status, res.body)
			}
		}
	}
}
