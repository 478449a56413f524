package console

import (
	"embed"
	"net/http"
	"path"
	"strings"

	jsclient "github.com/ledgerworks/ledger/clients/js"
)

// Prefix is the path the console is served under.
const Prefix = "/console/"

// ContentSecurityPolicy is sent with every response of the console: only
// the server's own origin for scripts, styles, images and requests, no
// inline script or style, no plugins, no framing, no <base> rewriting.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

//go:embed static
var static embed.FS

// file is one served file: its bytes and media type.
type file struct {
	body        []byte
	contentType string
}

// files maps a path under Prefix to its file; "" is the page itself.
var files = func() map[string]file {
	m := map[string]file{"ledger.js": {jsclient.Module, "text/javascript; charset=utf-8"}}
	types := map[string]string{".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
		".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
	entries, err := static.ReadDir("static")
	if err != nil {
		panic("console: " + err.Error()) // the embedded directory is part of the binary
	}
	for _, e := range entries {
		b, err := static.ReadFile("static/" + e.Name())
		if err != nil {
			panic("console: " + err.Error())
		}
		ct, ok := types[path.Ext(e.Name())]
		if !ok {
			panic("console: no media type for " + e.Name())
		}
		m[e.Name()] = file{b, ct}
	}
	m[""] = m["index.html"]
	return m
}()

// Handler serves the console under Prefix (and redirects the bare
// /console to it). Every response carries ContentSecurityPolicy and
// headers that keep the pages from being sniffed, framed or cached
// stale; a path that is not one of the console's files is 404.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path == strings.TrimSuffix(Prefix, "/") {
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
			return
		}
		f, ok := files[strings.TrimPrefix(r.URL.Path, Prefix)]
		if !ok || !strings.HasPrefix(r.URL.Path, Prefix) {
			http.NotFound(w, r)
			return
		}
		h.Set("Content-Type", f.contentType)
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			w.Write(f.body) //nolint:errcheck // a client gone away is nothing to report
		}
	})
}
