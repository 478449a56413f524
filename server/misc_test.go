package server_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"github.com/ledgerworks/ledger/apikey"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/server"
	"github.com/ledgerworks/ledger/server/ratelimit"
)

// Past its bucket a key gets 429 RATE_LIMITED with Retry-After, before
// the key is checked or anything is written.
func TestRateLimit(t *testing.T) {
	db := openBolt(t)
	ts := startServer(t, db, server.Options{RateLimit: ratelimit.Options{PerKey: 1, KeyBurst: 2}})
	token := ts.key("acme", writer...)
	codes := map[int]int{}
	var limited response
	for range 4 {
		r := ts.do(http.MethodGet, "/v1/chains/c/head", token, "", nil)
		codes[r.status]++
		if r.status == http.StatusTooManyRequests {
			limited = r
		}
	}
	if codes[http.StatusNotFound] != 2 || codes[http.StatusTooManyRequests] != 2 {
		t.Fatalf("statuses %v: want the burst of 2 answered, 2 refused", codes)
	}
	limited.wantProblem(t, http.StatusTooManyRequests, api.CodeRateLimited)
	if limited.header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	// Another key has its own bucket.
	if r := ts.do(http.MethodGet, "/v1/chains/c/head", ts.key("acme", writer...), "", nil); r.status != http.StatusNotFound {
		t.Fatalf("another key: %d", r.status)
	}
}

// A forged token that names a real key's id (ids are not secret) spends its
// address's tokens, not the key's: the key still gets its whole burst.
func TestRateLimitForgedTokenSparesTheKey(t *testing.T) {
	db := openBolt(t)
	ts := startServer(t, db, server.Options{RateLimit: ratelimit.Options{PerKey: 1, KeyBurst: 2}})
	token := ts.key("acme", writer...)
	id, ok := apikey.TokenKeyID(token)
	if !ok {
		t.Fatalf("token %q names no key id", token)
	}
	forged := token[:len(token)-4] + "AAAA"
	if forged == token {
		forged = token[:len(token)-4] + "BBBB"
	}
	if got, _ := apikey.TokenKeyID(forged); got != id {
		t.Fatalf("the forged token names %q, want %q", got, id)
	}
	for range 4 {
		if r := ts.do(http.MethodGet, "/v1/chains/c/head", forged, "", nil); r.status != http.StatusUnauthorized {
			t.Fatalf("forged token: %d, want 401", r.status)
		}
	}
	for i := range 2 {
		if r := ts.do(http.MethodGet, "/v1/chains/c/head", token, "", nil); r.status != http.StatusNotFound {
			t.Fatalf("the key's request %d after the forgeries: %d, want its burst answered", i, r.status)
		}
	}
}

// The metrics handler serves the HTTP, guard, engine and outbox series; the request
// id of a request is echoed (or made) and a body past the limit is 413.
func TestMetricsRequestIDAndBodyLimit(t *testing.T) {
	reg := prometheus.NewRegistry()
	em := server.NewEngineMetrics(reg)
	db, err := chain.Open(t.TempDir()+"/l.db", chain.Options{Metrics: em})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ts := startServer(t, db, server.Options{Registry: reg, BodySizeMax: 1024})
	token := ts.key("acme", writer...)
	ts.do(http.MethodPost, "/v1/chains/c/entries", token, "k", api.AppendRequest{Type: "t", Payload: []byte("p")})
	ts.do(http.MethodPost, "/v1/chains/c/entries", token, "k", api.AppendRequest{Type: "t", Payload: []byte("p")})
	body := scrape(t, ts)
	for _, series := range []string{`ledger_http_requests_total{code="201",route="POST /v1/chains/{name}/entries"} 2`,
		`idempotency_requests_total{outcome="replayed"} 1`, "ledger_group_commits_total",
		"ledger_http_request_duration_seconds_bucket"} {
		if !strings.Contains(body, series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, ts.url+"/healthz", nil)
	req.Header.Set(api.HeaderRequestID, "trace-42")
	resp, err := ts.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get(api.HeaderRequestID) != "trace-42" {
		t.Fatalf("request id %q", resp.Header.Get(api.HeaderRequestID))
	}
	big := api.AppendRequest{Type: "t", Payload: make([]byte, 2048)}
	ts.do(http.MethodPost, "/v1/chains/c/entries", token, "big", big).wantProblem(t, http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge)
	// A chunked body (no Content-Length) is measured too.
	req, _ = http.NewRequest(http.MethodPost, ts.url+"/v1/chains/c/entries", io.MultiReader(strings.NewReader(`{"type":"t","payload":"`),
		strings.NewReader(strings.Repeat("A", 4096)+`"}`)))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set(api.HeaderIdempotencyKey, "chunked")
	resp, err = ts.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked body past the limit: %d", resp.StatusCode)
	}
	var h api.Head
	ts.do(http.MethodGet, "/v1/chains/c/head", token, "", nil).decode(t, http.StatusOK, &h)
	if h.Seq != 1 {
		t.Fatalf("head %+v", h)
	}
}

// With a certificate the server answers HTTPS.
func TestTLS(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	srv, err := server.New(server.Options{DB: openBolt(t), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	hs := srv.HTTPServer(server.Timeouts{})
	hs.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- srv.Serve(ctx, hs, ln, time.Second, func(l net.Listener) error { return hs.ServeTLS(l, "", "") })
	}()
	pool := x509.NewCertPool()
	parsed, _ := x509.ParseCertificate(der)
	pool.AddCert(parsed)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get("https://" + ln.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.TLS == nil {
		t.Fatalf("%d over TLS %v", resp.StatusCode, resp.TLS != nil)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A path served for other methods is 405 with Allow; an unknown one is 404.
func TestMethodNotAllowed(t *testing.T) {
	ts := startServer(t, openBolt(t), server.Options{})
	token := ts.key("acme", writer...)
	for _, c := range []struct{ method, path, allow string }{
		{http.MethodPost, "/v1/chains/c/head", "GET"},
		{http.MethodDelete, "/v1/chains/c/entries", "GET, POST"},
		{http.MethodPut, "/v1/stock/items", "GET, POST"},
		{http.MethodGet, "/v1/purchase-receipts", "POST"},
	} {
		r := ts.do(c.method, c.path, token, "k", nil)
		r.wantProblem(t, http.StatusMethodNotAllowed, api.CodeMethodNotAllowed)
		if !strings.HasPrefix(r.header.Get("Allow"), c.allow) {
			t.Errorf("%s %s: Allow %q, want %q", c.method, c.path, r.header.Get("Allow"), c.allow)
		}
	}
	ts.do(http.MethodGet, "/v1/nothing", token, "", nil).wantProblem(t, http.StatusNotFound, api.CodeNotFound)
	ts.do(http.MethodGet, "/v1/chains/c/other", token, "", nil).wantProblem(t, http.StatusNotFound, api.CodeNotFound)
}
