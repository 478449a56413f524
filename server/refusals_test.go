package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/server"
)

// Every answer of the API port is application/problem+json with a code,
// over a raw connection, whoever writes it: ServeMux's redirects of paths
// with //, /./ and /../ (and of /v1/chains) are taken over before it runs,
// OPTIONS * reaches the handler, and net/http's own refusals of requests
// it cannot parse are rewritten on the connection.
func TestEveryRefusalIsAProblem(t *testing.T) {
	ts := startServer(t, openBolt(t), server.Options{})
	addr := strings.TrimPrefix(ts.url, "http://")
	const host = "Host: ledger\r\n"
	for _, tc := range []struct {
		name, request string
		status        int
		code          string
	}{
		{"double slash", "GET //v1/stock/items HTTP/1.1\r\n" + host + "\r\n", 404, api.CodeNotFound},
		{"dot segment", "GET /v1/./stock/items HTTP/1.1\r\n" + host + "\r\n", 404, api.CodeNotFound},
		{"dot-dot segment", "GET /v1/stock/../stock/items HTTP/1.1\r\n" + host + "\r\n", 404, api.CodeNotFound},
		{"escaped dot-dot", "GET /v1/chains/a%2F..%2Fb/entries HTTP/1.1\r\n" + host + "\r\n", 404, api.CodeNotFound},
		{"trailing dot-dot", "POST /v1/chains/x/.. HTTP/1.1\r\n" + host + "Content-Length: 0\r\n\r\n", 404, api.CodeNotFound},
		{"subtree without slash", "POST /v1/chains HTTP/1.1\r\n" + host + "Content-Length: 0\r\n\r\n", 404, api.CodeNotFound},
		{"OPTIONS *", "OPTIONS * HTTP/1.1\r\n" + host + "\r\n", 404, api.CodeNotFound},
		{"malformed escape", "GET /v1/%zz HTTP/1.1\r\n" + host + "\r\n", 400, api.CodeInvalidInput},
		{"control byte in a header", "GET /v1/stock/items HTTP/1.1\r\n" + host + "X-A: a\x01b\r\n\r\n", 400, api.CodeInvalidInput},
		{"header without a colon", "GET /v1/stock/items HTTP/1.1\r\n" + host + "nocolon\r\n\r\n", 400, api.CodeInvalidInput},
		{"no Host", "GET /v1/stock/items HTTP/1.1\r\n\r\n", 400, api.CodeInvalidInput},
		{"oversized headers", "GET /v1/stock/items HTTP/1.1\r\n" + host + "X-Big: " + strings.Repeat("a", 80<<10) + "\r\n\r\n",
			431, api.CodeHeadersTooLarge},
		{"unknown transfer coding", "POST /v1/chains/a/entries HTTP/1.1\r\n" + host + "Transfer-Encoding: gzip, chunked\r\n\r\n",
			501, api.CodeUnsupportedProtocol},
		{"HTTP version", "GET /v1/stock/items HTTP/2.0\r\n" + host + "\r\n", 505, api.CodeUnsupportedProtocol},
		{"unknown Expect", "GET /v1/stock/items HTTP/1.1\r\n" + host + "Expect: magic\r\n\r\n", 417, api.CodeUnsupportedProtocol},
		{"no route", "GET /nowhere HTTP/1.1\r\n" + host + "\r\n", 404, api.CodeNotFound},
		{"no API key", "GET /v1/stock/items HTTP/1.1\r\n" + host + "\r\n", 401, api.CodeUnauthenticated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body, err := rawRequest(addr, tc.request, nil)
			if err != nil {
				t.Fatal(err)
			}
			var p api.Problem
			if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != api.MediaProblem {
				t.Fatalf("%d %q %q, want %d %s", resp.StatusCode, resp.Header.Get("Content-Type"), body, tc.status, api.MediaProblem)
			}
			if err := json.Unmarshal(body, &p); err != nil || p.Code != tc.code || p.Status != tc.status {
				t.Fatalf("body %q: %v, want code %s", body, err, tc.code)
			}
			if loc := resp.Header.Get("Location"); loc != "" {
				t.Fatalf("Location %q", loc)
			}
		})
	}
	// A clean path still serves.
	r := ts.do(http.MethodGet, "/v1/stock/items", ts.key("acme", allScopes...), "", nil)
	if r.status != http.StatusOK {
		t.Fatalf("GET /v1/stock/items: %d %s", r.status, r.body)
	}
}
