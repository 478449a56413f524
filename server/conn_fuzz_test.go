package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"path"
	"testing"

	"github.com/ledgerworks/ledger/api"
)

// muxCleanPath is ServeMux's cleaning of a path, which redirects when it
// changes the path.
func muxCleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}

// cleanPath accepts exactly the paths ServeMux serves without a redirect.
func FuzzCleanPath(f *testing.F) {
	for _, seed := range []string{"/", "", "*", "//", "/v1/./a", "/v1/../a", "/v1/a/", "/v1/a/..", "/v1/a/.", "/v1//a",
		"/.", "/..", "/a/.b", "/a/..b/", "v1/a"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if got, want := cleanPath(p), muxCleanPath(p) == p; got != want {
			t.Fatalf("cleanPath(%q) = %v, ServeMux cleans it to %q", p, got, muxCleanPath(p))
		}
	})
}

// A write rewriteRefusal rewrites becomes one whole HTTP/1.1 answer: a
// problem+json of the same status with a code, read by an HTTP client
// with nothing left over; any other write passes unchanged.
func FuzzRewriteRefusal(f *testing.F) {
	for _, seed := range []string{
		"HTTP/1.1 431 Request Header Fields Too Large" + plainHeaders + "431 Request Header Fields Too Large",
		"HTTP/1.1 400 Bad Request" + plainHeaders + "400 Bad Request",
		"HTTP/1.1 400 Bad Request: missing required Host header" + plainHeaders + "400 Bad Request: missing required Host header",
		"HTTP/1.1 501 Not Implemented" + plainHeaders + "Unsupported transfer encoding",
		"HTTP/1.1 505 HTTP Version Not Supported: unsupported protocol version" + plainHeaders + "505 HTTP Version Not Supported: unsupported protocol version",
		"HTTP/1.1 417 Expectation Failed\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
		tlsPlainHTTP,
		"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{}",
		"HTTP/1.1 404 Not Found\r\nContent-Type: application/problem+json\r\n\r\n{}",
		`{"entries":[]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out, ok := rewriteRefusal(b)
		if !ok {
			return
		}
		if !bytes.HasPrefix(b, []byte("HTTP/1.")) {
			t.Fatalf("%q rewritten though it is no status line", b)
		}
		rd := bufio.NewReader(bytes.NewReader(out))
		resp, err := http.ReadResponse(rd, nil)
		if err != nil {
			t.Fatalf("%q → %q: %v", b, out, err)
		}
		var p api.Problem
		body := new(bytes.Buffer)
		if _, err := body.ReadFrom(resp.Body); err != nil || json.Unmarshal(body.Bytes(), &p) != nil {
			t.Fatalf("%q → %q: body %v", b, out, err)
		}
		if resp.Header.Get("Content-Type") != api.MediaProblem || p.Code == "" || p.Status != resp.StatusCode ||
			!resp.Close || rd.Buffered() != 0 || resp.StatusCode < 400 {
			t.Fatalf("%q → %q", b, out)
		}
	})
}

// The request checks before the replay guard: a Content-Type is accepted
// exactly when its media type is application/json (any case, any
// parameters that parse), and an Idempotency-Key exactly when every byte
// is printable ASCII.
func FuzzRequestHeaderChecks(f *testing.F) {
	for _, seed := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON", "",
		"text/plain", "application/json;", "application/jsonx", "application/json; a=\"b", "clé", "key-1 ", "\x7f"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		mt, _, err := mime.ParseMediaType(v)
		if want := err == nil && mt == api.MediaJSON; (checkMediaType(v) == nil) != want {
			t.Fatalf("Content-Type %q: accepted %v, media type %q (%v)", v, !want, mt, err)
		}
		want := true
		for _, c := range []byte(v) {
			want = want && c >= 0x20 && c <= 0x7e
		}
		if printableKey(v) != want {
			t.Fatalf("key %q: printable %v", v, !want)
		}
	})
}
