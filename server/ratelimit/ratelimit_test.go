package ratelimit_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/ledgerworks/ledger/internal/problem"
	"github.com/ledgerworks/ledger/server/ratelimit"
)

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// serve starts the limiter in front of a handler that answers 204 on a
// real listener on 127.0.0.1. The client address is the X-Test-Addr
// header, so one test can act as many clients.
func serve(t *testing.T, opts ratelimit.Options) (*ratelimit.Limiter, string) {
	t.Helper()
	if opts.Addr == nil {
		opts.Addr = func(r *http.Request) string {
			if a := r.Header.Get("X-Test-Addr"); a != "" {
				return a
			}
			return ratelimit.ClientAddr(r)
		}
	}
	l, err := ratelimit.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(l.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})))
	t.Cleanup(srv.Close)
	return l, srv.URL
}

// get sends one request as addr with the key's token (none when key is "").
func get(t *testing.T, url, addr, key string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if addr != "" {
		req.Header.Set("X-Test-Addr", addr)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+token(key))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// token is a well-formed token naming the key id (16 hex digits).
func token(id string) string {
	return "lwk_" + id + "_" + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
}

func TestRefusesWithRetryAfter(t *testing.T) {
	clock := newFakeClock()
	_, url := serve(t, ratelimit.Options{PerAddr: rate.Every(10 * time.Second), AddrBurst: 2, Now: clock.Now})
	for i := range 2 {
		if resp := get(t, url, "", ""); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("request %d: %d", i, resp.StatusCode)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third request: %d", resp.StatusCode)
	}
	if got := resp.Header.Get("Retry-After"); got != "10" {
		t.Fatalf("Retry-After %q, want 10", got)
	}
	if ct := resp.Header.Get("Content-Type"); ct != problem.ContentType {
		t.Fatalf("Content-Type %q", ct)
	}
	var body problem.Body
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Code != ratelimit.Code || body.Status != 429 {
		t.Fatalf("body %+v %v", body, err)
	}
	// A refusal spends nothing: after one interval exactly one request passes.
	clock.Advance(10 * time.Second)
	if resp := get(t, url, "", ""); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("after the wait: %d", resp.StatusCode)
	}
	if resp := get(t, url, "", ""); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second after the wait: %d", resp.StatusCode)
	}
	if retry, _ := strconv.Atoi(get(t, url, "", "").Header.Get("Retry-After")); retry != 10 {
		t.Fatalf("Retry-After %d", retry)
	}
}

func TestLoopbackAddress(t *testing.T) {
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	for remote, want := range map[string]string{
		"127.0.0.1:5000":             "127.0.0.1",
		"[::ffff:10.0.0.1]:1":        "10.0.0.1",
		"[2001:db8:1:2:3:4:5:6]:443": "2001:db8:1:2::/64",
		"[fe80::1%eth0]:80":          "fe80::/64",
		"not an address":             "not an address",
	} {
		req.RemoteAddr = remote
		if got := ratelimit.ClientAddr(req); got != want {
			t.Errorf("ClientAddr(%q) = %q, want %q", remote, got, want)
		}
	}
	if host, _, _ := net.SplitHostPort("127.0.0.1:1"); host != "127.0.0.1" {
		t.Fatal(host)
	}
}
