package pgbuckets_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"
	"pgregory.net/rapid"

	"github.com/ledgerworks/ledger/server/ratelimit"
	"github.com/ledgerworks/ledger/server/ratelimit/pgbuckets"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// open returns a store on a fresh schema, migrated, dropped after the
// test, with the clock now (the database's when nil).
func open(t testing.TB, now func() time.Time) *pgbuckets.Store {
	t.Helper()
	ctx := context.Background()
	url := pgtest.URL(t)
	schema := pgtest.NewSchema(t, url)
	if _, err := pgbuckets.Open(ctx, url, pgbuckets.Options{Schema: schema}); !errors.Is(err, pgbuckets.ErrSchema) {
		t.Fatalf("Open of an unmigrated schema: %v, want ErrSchema", err)
	}
	if err := pgbuckets.Migrate(ctx, url, schema); err != nil {
		t.Fatal(err)
	}
	s, err := pgbuckets.Open(ctx, url, pgbuckets.Options{Schema: schema, Migrate: true, MaxConns: 8, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// modelBucket is the plain token bucket the store must agree with, in
// millionths of a token: it refills 1e6/T of them a microsecond (every T
// used here divides 1e6) up to burst tokens, and a request takes a whole
// token.
type modelBucket struct {
	micro int64 // millionths of a token
	at    int64 // µs of the last refill
	fresh bool  // never used: full
}

type bucketSpec struct {
	name  string
	limit rate.Limit
	burst int
}

func (s bucketSpec) bucket() ratelimit.Bucket {
	return ratelimit.Bucket{Name: []byte(s.name), Limit: s.limit, Burst: s.burst}
}

func (b *modelBucket) refill(spec bucketSpec, now int64) {
	capacity := int64(spec.burst) * 1e6
	if !b.fresh {
		b.micro, b.at, b.fresh = capacity, now, true
		return
	}
	perUs := int64(spec.limit) // 1e6/T millionths a µs, T = 1e6/limit
	b.micro = min(capacity, b.micro+(now-b.at)*perUs)
	b.at = now
}

// TestTakeMatchesTokenBucket: a rapid state machine of Take, Give, Sweep
// and the clock moving, on buckets of different rates and bursts, against
// the plain token bucket: every answer and every wait is the model's, to
// the microsecond.
func TestTakeMatchesTokenBucket(t *testing.T) {
	var clock atomic.Int64 // µs
	clock.Store(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixMicro())
	s := open(t, func() time.Time { return time.UnixMicro(clock.Load()) })
	ctx := context.Background()
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		specs := []bucketSpec{
			{fmt.Sprintf("r%d/a", run), 10, 10},
			{fmt.Sprintf("r%d/b", run), 4, 1},
			{fmt.Sprintf("r%d/c", run), 1000, 3},
		}
		model := make([]modelBucket, len(specs))
		spent := make([]int, len(specs)) // takes not given back, for Give
		rt.Repeat(map[string]func(*rapid.T){
			"wait": func(rt *rapid.T) {
				clock.Add(rapid.Int64Range(0, 400_000).Draw(rt, "µs"))
			},
			"take": func(rt *rapid.T) {
				i := rapid.IntRange(0, len(specs)-1).Draw(rt, "bucket")
				now := clock.Load()
				model[i].refill(specs[i], now)
				wantOK := model[i].micro >= 1e6
				var wantWait time.Duration
				if wantOK {
					model[i].micro -= 1e6
					spent[i]++
				} else {
					perUs := int64(specs[i].limit)
					wantWait = time.Duration((1e6-model[i].micro+perUs-1)/perUs) * time.Microsecond
				}
				taken, err := s.Take(ctx, []ratelimit.Bucket{specs[i].bucket()})
				if err != nil {
					rt.Fatal(err)
				}
				ok, wait := taken[0].OK, taken[0].Wait
				if ok != wantOK || wait != wantWait {
					rt.Fatalf("bucket %s at %d: ok %v wait %v, model ok %v wait %v (%d millionths)",
						specs[i].name, now, ok, wait, wantOK, wantWait, model[i].micro)
				}
			},
			"give": func(rt *rapid.T) {
				i := rapid.IntRange(0, len(specs)-1).Draw(rt, "bucket")
				if spent[i] == 0 {
					rt.Skip("nothing to give back")
				}
				spent[i]--
				model[i].refill(specs[i], clock.Load())
				model[i].micro = min(int64(specs[i].burst)*1e6, model[i].micro+1e6)
				if err := s.Give(ctx, []ratelimit.Bucket{specs[i].bucket()}); err != nil {
					rt.Fatal(err)
				}
			},
			"sweep": func(rt *rapid.T) {
				if _, err := s.Sweep(ctx); err != nil {
					rt.Fatal(err)
				}
			},
		})
	})
	if s.Swept() == 0 {
		t.Error("no sweep deleted a full bucket's row")
	}
}

// TestInvalidBuckets: names, rates and bursts out of bounds, and calls
// with no bucket or too many, are refused with ErrInvalidBucket before any
// statement, and nothing is spent.
func TestInvalidBuckets(t *testing.T) {
	s := open(t, nil)
	ctx := context.Background()
	good := ratelimit.Bucket{Name: []byte("good"), Limit: 1, Burst: 1}
	for _, b := range []ratelimit.Bucket{
		{Name: nil, Limit: 1, Burst: 1}, {Name: make([]byte, pgbuckets.BucketSizeMax+1), Limit: 1, Burst: 1},
		{Name: []byte("k"), Limit: 0, Burst: 1}, {Name: []byte("k"), Limit: -1, Burst: 1},
		{Name: []byte("k"), Limit: pgbuckets.RateMax * 2, Burst: 1}, {Name: []byte("k"), Limit: rate.Inf, Burst: 1},
		{Name: []byte("k"), Limit: 1, Burst: 0}, {Name: []byte("k"), Limit: 1, Burst: ratelimit.BurstMax + 1},
	} {
		if _, err := s.Take(ctx, []ratelimit.Bucket{good, b}); !errors.Is(err, pgbuckets.ErrInvalidBucket) {
			t.Errorf("Take(%d bytes, %v, %d) = %v, want ErrInvalidBucket", len(b.Name), b.Limit, b.Burst, err)
		}
		if err := s.Give(ctx, []ratelimit.Bucket{b}); !errors.Is(err, pgbuckets.ErrInvalidBucket) {
			t.Errorf("Give(%d bytes, %v, %d) = %v, want ErrInvalidBucket", len(b.Name), b.Limit, b.Burst, err)
		}
	}
	if _, err := s.Take(ctx, nil); !errors.Is(err, pgbuckets.ErrInvalidBucket) {
		t.Errorf("Take of no bucket: %v", err)
	}
	many := make([]ratelimit.Bucket, pgbuckets.TakeBucketsMax+1)
	for i := range many {
		many[i] = good
	}
	if _, err := s.Take(ctx, many); !errors.Is(err, pgbuckets.ErrInvalidBucket) {
		t.Errorf("Take of %d buckets: %v", len(many), err)
	}
	// The good bucket of the refused calls was never spent: its one token
	// is there.
	if taken, err := s.Take(ctx, []ratelimit.Bucket{good}); err != nil || !taken[0].OK {
		t.Fatalf("after the refusals: %+v %v", taken, err)
	}
}

// TestInstancesShareTheRate: three Limiters, as three server instances,
// on one store and the database's clock; 120 requests of one key spread
// over them from 12 goroutines are accepted at most burst + rate ×
// elapsed times in all (one instance alone would allow that much, three
// with buckets in memory three times as much), and the address limit
// holds across them alike.
func TestInstancesShareTheRate(t *testing.T) {
	s := open(t, nil)
	const perKey, burst, requests = 10, 10, 120
	var limiters []http.Handler
	var instances []*ratelimit.Limiter
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	for range 3 {
		// A timeout far above any statement's: a Take that timed out
		// would fall back to the instance's own bucket.
		l, err := ratelimit.New(ratelimit.Options{PerKey: perKey, KeyBurst: burst, Store: s, StoreTimeout: time.Minute,
			KeyID: func(r *http.Request) (string, bool) { return r.Header.Get("X-Key"), true }})
		if err != nil {
			t.Fatal(err)
		}
		limiters = append(limiters, l.Middleware(ok))
		instances = append(instances, l)
	}
	var accepted, refused atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for g := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < requests; i += 12 {
				w := httptest.NewRecorder()
				r := httptest.NewRequest(http.MethodGet, "/", nil)
				r.Header.Set("X-Key", "key-1")
				limiters[i%3].ServeHTTP(w, r)
				switch w.Code {
				case http.StatusNoContent:
					accepted.Add(1)
				case http.StatusTooManyRequests:
					refused.Add(1)
					if w.Header().Get("Retry-After") == "" {
						t.Error("429 without Retry-After")
					}
				default:
					t.Errorf("status %d", w.Code)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	for i, l := range instances {
		if n := l.Stats().StoreErrors; n != 0 {
			t.Fatalf("instance %d: %d store errors", i, n)
		}
	}
	// Every statement ran between start and now, by the one clock of
	// this machine that the database reads too.
	allowed := burst + perKey*elapsed.Seconds()
	t.Logf("accepted %d, refused %d in %v (allowed at most %.2f)", accepted.Load(), refused.Load(), elapsed, allowed)
	if float64(accepted.Load()) > allowed || accepted.Load() < burst || accepted.Load()+refused.Load() != requests {
		t.Fatalf("accepted %d, refused %d of %d in %v: want %d to %.2f accepted", accepted.Load(), refused.Load(),
			requests, elapsed, burst, allowed)
	}
}

// TestRefusedRequestGivesBack: with a key limit and an address limit, a
// request the key's bucket refuses gives its address token back, in the
// shared bucket too.
func TestRefusedRequestGivesBack(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixMicro())
	s := open(t, func() time.Time { return time.UnixMicro(clock.Load()) })
	l, err := ratelimit.New(ratelimit.Options{PerKey: 1, KeyBurst: 1, PerAddr: 1, AddrBurst: 2, Store: s,
		KeyID: func(r *http.Request) (string, bool) { return r.Header.Get("X-Key"), true }})
	if err != nil {
		t.Fatal(err)
	}
	h := l.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	send := func(key string) int {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("X-Key", key)
		h.ServeHTTP(w, r)
		return w.Code
	}
	// a spends the key a's token and one of the address's two; the
	// second a is refused by its key and gives the address token back,
	// so b still finds one.
	for i, c := range []struct {
		key  string
		want int
	}{{"a", 200}, {"a", 429}, {"a", 429}, {"b", 200}, {"c", 429}} {
		if got := send(c.key); got != c.want {
			t.Fatalf("request %d (key %s): %d, want %d", i, c.key, got, c.want)
		}
	}
}

// TestStoreFailureFallsBackToProcess: when the store fails (its pool
// closed), requests are limited by the process's own buckets: no 500, no
// 503, and the failures are counted.
func TestStoreFailureFallsBackToProcess(t *testing.T) {
	s := open(t, nil)
	s.Close()
	l, err := ratelimit.New(ratelimit.Options{PerKey: 1, KeyBurst: 2, Store: s,
		KeyID: func(r *http.Request) (string, bool) { return "k", true }})
	if err != nil {
		t.Fatal(err)
	}
	h := l.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	var codes []int
	for range 3 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
		codes = append(codes, w.Code)
	}
	if fmt.Sprint(codes) != "[200 200 429]" {
		t.Fatalf("codes %v, want [200 200 429] (the process's bucket of 2)", codes)
	}
	if st := l.Stats(); st.StoreErrors != 3 {
		t.Fatalf("StoreErrors %d, want 3", st.StoreErrors)
	}
}
