package ratelimit_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
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

// The key and address limits are independent: a key is held to its rate
// from any number of addresses, an address to its rate with any number of
// keys, and a request that names no key only to its address's.
func TestKeyAndAddressLimitsAreIndependent(t *testing.T) {
	clock := newFakeClock()
	_, url := serve(t, ratelimit.Options{PerKey: rate.Every(time.Minute), KeyBurst: 3,
		PerAddr: rate.Every(time.Minute), AddrBurst: 5, Now: clock.Now})
	const key1, key2 = "0000000000000001", "0000000000000002"
	// key1 from three addresses: three pass, the fourth is the key's limit.
	for i, addr := range []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"} {
		if resp := get(t, url, addr, key1); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("key1 request %d: %d", i, resp.StatusCode)
		}
	}
	if resp := get(t, url, "10.0.0.4", key1); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "60" {
		t.Fatalf("key1 beyond its burst from a fresh address: %d %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// Address 10.0.0.4 spent nothing on the refusal: five requests with
	// other keys (or none) pass, the sixth is the address's limit.
	for i, key := range []string{key2, key2, key2, "", ""} {
		if resp := get(t, url, "10.0.0.4", key); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("address request %d: %d", i, resp.StatusCode)
		}
	}
	if resp := get(t, url, "10.0.0.4", ""); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("address beyond its burst: %d", resp.StatusCode)
	}
	// key2 spent its three tokens above; from a fresh address it is refused.
	if resp := get(t, url, "10.0.0.9", key2); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("key2 beyond its burst: %d", resp.StatusCode)
	}
	// A minute later each bucket holds one token again.
	clock.Advance(time.Minute)
	if resp := get(t, url, "10.0.0.9", key1); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("key1 after a minute: %d", resp.StatusCode)
	}
}

// A Limiter keeps at most MaxTracked limiters of each kind however many
// clients it meets.
func TestTrackedLimitersAreBounded(t *testing.T) {
	l, url := serve(t, ratelimit.Options{PerKey: 1, KeyBurst: 1, PerAddr: 1, AddrBurst: 1, MaxTracked: 3})
	for i := range 20 {
		get(t, url, fmt.Sprintf("10.1.0.%d", i), fmt.Sprintf("%016x", i))
	}
	if s := l.Stats(); s.TrackedAddrs != 3 || s.TrackedKeys != 3 {
		t.Fatalf("stats %+v, want 3 of each", s)
	}
	// The most recently used survive: 10.1.0.19 is still empty.
	if resp := get(t, url, "10.1.0.19", ""); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("the most recent address lost its limiter: %d", resp.StatusCode)
	}
}

// Concurrent requests over loopback: exactly the burst passes.
func TestConcurrentBurst(t *testing.T) {
	clock := newFakeClock() // time stands still: no token is refilled
	l, url := serve(t, ratelimit.Options{PerKey: 1, KeyBurst: 25, Now: clock.Now})
	var passed, refused atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				switch get(t, url, "", "00000000000000aa").StatusCode {
				case http.StatusNoContent:
					passed.Add(1)
				case http.StatusTooManyRequests:
					refused.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if passed.Load() != 25 || refused.Load() != 55 || l.Stats().Refused != 55 {
		t.Fatalf("passed %d, refused %d (stats %+v), want 25 and 55", passed.Load(), refused.Load(), l.Stats())
	}
}

func TestOptionsBounds(t *testing.T) {
	for _, opts := range []ratelimit.Options{
		{PerKey: -1, KeyBurst: 1},
		{PerKey: 1},
		{PerAddr: 1, AddrBurst: ratelimit.BurstMax + 1},
		{PerAddr: rate.Inf, AddrBurst: 1},
		{MaxTracked: -1},
		{MaxTracked: ratelimit.MaxTrackedLimit + 1},
	} {
		if _, err := ratelimit.New(opts); !errors.Is(err, ratelimit.ErrInvalidOptions) {
			t.Errorf("New(%+v): %v", opts, err)
		}
	}
	// The zero value limits nothing.
	_, url := serve(t, ratelimit.Options{})
	for range 50 {
		if resp := get(t, url, "", "0000000000000001"); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("zero options refused: %d", resp.StatusCode)
		}
	}
}
