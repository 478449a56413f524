package console_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	jsclient "github.com/ledgerworks/ledger/clients/js"
	"github.com/ledgerworks/ledger/console"
)

func get(t *testing.T, method, path string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	console.Handler().ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec.Result()
}

// Every answer carries the CSP; each file has its media type; ledger.js is
// the client's own bytes; anything else is 404, a write 405.
func TestHandler(t *testing.T) {
	for path, ct := range map[string]string{"/console/": "text/html", "/console/index.html": "text/html",
		"/console/app.js": "text/javascript", "/console/style.css": "text/css", "/console/ledger.js": "text/javascript"} {
		resp := get(t, http.MethodGet, path)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), ct) || len(body) == 0 {
			t.Fatalf("%s: %d %q", path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if resp.Header.Get("Content-Security-Policy") != console.ContentSecurityPolicy || resp.Header.Get("X-Content-Type-Options") != "nosniff" ||
			resp.Header.Get("X-Frame-Options") != "DENY" {
			t.Fatalf("%s: headers %v", path, resp.Header)
		}
		if path == "/console/ledger.js" && !bytes.Equal(body, jsclient.Module) {
			t.Fatal("ledger.js is not the client's module")
		}
	}
	if !strings.HasPrefix(console.ContentSecurityPolicy, "default-src 'self';") || strings.Contains(console.ContentSecurityPolicy, "unsafe") {
		t.Fatalf("CSP %q", console.ContentSecurityPolicy)
	}
	if resp := get(t, http.MethodGet, "/console"); resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/console/" {
		t.Fatalf("/console: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, path := range []string{"/console/nope.js", "/console/static/app.js", "/console/../go.mod", "/elsewhere"} {
		if resp := get(t, http.MethodGet, path); resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Security-Policy") == "" {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
	}
	if resp := get(t, http.MethodPost, "/console/"); resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Fatalf("POST: %d", resp.StatusCode)
	}
	if resp := get(t, http.MethodHead, "/console/app.js"); resp.StatusCode != http.StatusOK {
		t.Fatalf("HEAD: %d", resp.StatusCode)
	}
}

// The page holds no inline script or style (the CSP would refuse them),
// and the scripts build no markup from strings: every value is set as
// text.
func TestNoMarkupFromData(t *testing.T) {
	page, _ := io.ReadAll(get(t, http.MethodGet, "/console/").Body)
	if regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`).Match(page) || regexp.MustCompile(`<script(?:(?:\s+(?:type="module"))*)>`).Match(page) ||
		bytes.Contains(page, []byte(" style=")) || bytes.Contains(page, []byte("<style")) || regexp.MustCompile(`\son[a-z]+=`).Match(page) {
		t.Fatalf("inline script or style in the page:\n%s", page)
	}
	app, _ := io.ReadAll(get(t, http.MethodGet, "/console/app.js").Body)
	for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "DOMParser", "createContextualFragment"} {
		if bytes.Contains(app, []byte(sink)) {
			t.Errorf("app.js uses %s", sink)
		}
	}
	if bytes.Contains(app, []byte("localStorage")) {
		t.Error("app.js uses localStorage: the key belongs in sessionStorage only")
	}
}
