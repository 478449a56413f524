package pgbuckets_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/ledgerworks/ledger/server/ratelimit"
)

// TestLimiterMatchesModel: a rapid state machine of requests from a few
// addresses with a few keys, through three Limiters (three instances) on
// one pgbuckets store, with the clock moving, against a model of plain
// token buckets per address and per key: a request is let through exactly
// when both its buckets hold a token, and then spends one of each;
// otherwise it is refused with 429 and the Retry-After of the longer wait
// (whole seconds, rounded up), and spends nothing.
func TestLimiterMatchesModel(t *testing.T) {
	var clock atomic.Int64 // µs
	clock.Store(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixMicro())
	s := open(t, func() time.Time { return time.UnixMicro(clock.Load()) })
	addrSpec := bucketSpec{limit: 4, burst: 3} // T = 250 ms
	keySpec := bucketSpec{limit: 10, burst: 2} // T = 100 ms
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		var instances []http.Handler
		for range 3 {
			l, err := ratelimit.New(ratelimit.Options{PerKey: keySpec.limit, KeyBurst: keySpec.burst,
				PerAddr: addrSpec.limit, AddrBurst: addrSpec.burst, Store: s, StoreTimeout: time.Minute,
				KeyID: func(r *http.Request) (string, bool) { k := r.Header.Get("X-Key"); return k, k != "" },
				Addr:  func(r *http.Request) string { return fmt.Sprintf("r%d-%s", run, r.Header.Get("X-Addr")) }})
			if err != nil {
				rt.Fatal(err)
			}
			instances = append(instances, l.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
		}
		addrs := map[string]*modelBucket{}
		keys := map[string]*modelBucket{}
		bucket := func(m map[string]*modelBucket, name string) *modelBucket {
			if m[name] == nil {
				m[name] = &modelBucket{}
			}
			return m[name]
		}
		wait := func(b *modelBucket, spec bucketSpec) int64 { // µs until a token is due
			perUs := int64(spec.limit)
			return (1e6 - b.micro + perUs - 1) / perUs
		}
		rt.Repeat(map[string]func(*rapid.T){
			"wait": func(rt *rapid.T) {
				clock.Add(rapid.Int64Range(0, 600_000).Draw(rt, "µs"))
			},
			"request": func(rt *rapid.T) {
				addr := rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "addr")
				key := rapid.SampledFrom([]string{"", "k1", "k2"}).Draw(rt, "key")
				via := rapid.IntRange(0, 2).Draw(rt, "instance")
				now := clock.Load()
				ab := bucket(addrs, addr)
				ab.refill(addrSpec, now)
				longest := int64(0)
				if ab.micro < 1e6 {
					longest = wait(ab, addrSpec)
				}
				var kb *modelBucket
				if key != "" {
					kb = bucket(keys, fmt.Sprintf("r%d-%s", run, key))
					kb.refill(keySpec, now)
					if kb.micro < 1e6 {
						longest = max(longest, wait(kb, keySpec))
					}
				}
				wantCode, wantRetry := http.StatusOK, ""
				if longest > 0 {
					wantCode = http.StatusTooManyRequests
					wantRetry = strconv.FormatInt(max(1, (longest+999_999)/1_000_000), 10)
				} else {
					ab.micro -= 1e6
					if kb != nil {
						kb.micro -= 1e6
					}
				}
				w := httptest.NewRecorder()
				r := httptest.NewRequest(http.MethodGet, "/", nil)
				r.Header.Set("X-Addr", addr)
				if key != "" {
					r.Header.Set("X-Key", fmt.Sprintf("r%d-%s", run, key))
				}
				instances[via].ServeHTTP(w, r)
				if w.Code != wantCode || w.Header().Get("Retry-After") != wantRetry {
					rt.Fatalf("request addr %s key %q at %d: %d Retry-After %q, model %d %q", addr, key, now,
						w.Code, w.Header().Get("Retry-After"), wantCode, wantRetry)
				}
			},
		})
	})
}
