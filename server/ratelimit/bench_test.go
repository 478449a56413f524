package ratelimit_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/internal/cputime"
	"github.com/ledgerworks/ledger/server/ratelimit"
)

// discard is a ResponseWriter that keeps nothing, so the benchmarks
// measure the guards, not a recorder.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(int)             {}

// bare is the handler the guards stand in front of: it does nothing.
var bare = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })

// benchKey returns an Authenticator of a fresh ledger file holding one key,
// and the key's token; both are closed when the benchmark ends.
func benchKey(b *testing.B) (*apikey.Authenticator, string) {
	db, err := chain.Open(filepath.Join(b.TempDir(), "ledger.db"), chain.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	_, token, err := apikey.Create(context.Background(), db, apikey.CreateRequest{Tenant: "acme", Scopes: []apikey.Scope{apikey.ScopeRead}})
	if err != nil {
		b.Fatal(err)
	}
	auth, err := apikey.NewAuthenticator(db, apikey.AuthOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(auth.Close)
	return auth, token
}

// BenchmarkGuards is the cost of the first two guards of the server, the
// rate limiter and the API key check, in front of a handler that does
// nothing, beside the bare handler (the baseline) in the same run, with
// every request passing (no refusal). Compare the cpu-ns/op (the
// process's CPU time per request, which a shared machine inflates less
// than the wall clock) of the sub-benchmarks:
//
//	go test -run '^$' -bench BenchmarkGuards -cpu 2 ./server/ratelimit
func BenchmarkGuards(b *testing.B) {
	auth, token := benchKey(b)
	limiter := func(keyID func(*http.Request) (string, bool)) *ratelimit.Limiter {
		l, err := ratelimit.New(ratelimit.Options{PerKey: 1e9, KeyBurst: ratelimit.BurstMax, PerAddr: 1e9, AddrBurst: ratelimit.BurstMax, KeyID: keyID})
		if err != nil {
			b.Fatal(err)
		}
		return l
	}
	for _, c := range []struct {
		name string
		h    http.Handler
	}{
		{"bare", bare},
		{"apikey", apikey.Middleware(auth)(bare)},
		{"ratelimit+apikey", limiter(nil).Middleware(apikey.Middleware(auth)(bare))},
		{"ratelimit(KeyIDOf)+apikey", limiter(auth.KeyIDOf).Middleware(apikey.Middleware(auth)(bare))},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := cputime.Process()
			b.RunParallel(func(pb *testing.PB) {
				req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/v1/x", nil)
				req.RemoteAddr = "127.0.0.1:40000"
				req.Header.Set("Authorization", "Bearer "+token)
				w := &discard{h: http.Header{}}
				for pb.Next() {
					c.h.ServeHTTP(w, req)
				}
			})
			b.ReportMetric(float64(cputime.Process()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkGuardsLoopback is the same comparison over real HTTP/1.1 with
// keep-alive on 127.0.0.1, 64 concurrent clients: what the two guards add
// to a whole request (client and server in one process), beside the bare
// handler in the same run. Compare the cpu-ns/op and req/s of the
// sub-benchmarks:
//
//	go test -run '^$' -bench BenchmarkGuardsLoopback -cpu 2 ./server/ratelimit
func BenchmarkGuardsLoopback(b *testing.B) {
	auth, token := benchKey(b)
	l, err := ratelimit.New(ratelimit.Options{PerKey: 1e9, KeyBurst: ratelimit.BurstMax, PerAddr: 1e9, AddrBurst: ratelimit.BurstMax})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		h    http.Handler
	}{
		{"bare", bare},
		{"ratelimit+apikey", l.Middleware(apikey.Middleware(auth)(bare))},
	} {
		b.Run(c.name, func(b *testing.B) {
			srv := httptest.NewServer(c.h)
			defer srv.Close()
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}}
			defer client.CloseIdleConnections()
			b.SetParallelism(32) // with -cpu 2: 64 clients
			start, cpu := time.Now(), cputime.Process()
			b.RunParallel(func(pb *testing.PB) {
				req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
				req.Header.Set("Authorization", "Bearer "+token)
				for pb.Next() {
					resp, err := client.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusNoContent {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
			b.ReportMetric(float64(cputime.Process()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
