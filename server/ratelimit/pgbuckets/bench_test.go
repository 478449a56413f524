package pgbuckets_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerworks/ledger/internal/cputime"
	"github.com/ledgerworks/ledger/server/ratelimit"
	"github.com/ledgerworks/ledger/server/ratelimit/pgbuckets"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// discard is a ResponseWriter that keeps nothing.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(int)             {}

// BenchmarkSharedBuckets is what sharing the buckets through PostgreSQL
// costs a request: the limiter with its buckets in memory, the same
// limiter on a pgbuckets store, and the floor of any shared limit, one
// `SELECT 1` round trip on a pool of the same size (the baseline), in
// front of a handler that does nothing, taking turns in rounds of 1,000
// requests from 64 goroutines, every request passing. keys-64 spreads the
// requests over 64 keys (one row each), one-key sends them all with one
// key (one hot row); +addr also limits the client address (two statements
// a request). us/req is the wall time per request of the 64 together,
// cpu-us/req the process's CPU time (the database's is not counted); the
// shared-… figures are the store's, memory-… the buckets in memory's, the
// others the round trip's; ratio is the store's time over the round
// trip's:
//
//	source .ci/postgres.sh
//	go test -run '^$' -bench SharedBuckets -benchtime 20000x ./server/ratelimit/pgbuckets
func BenchmarkSharedBuckets(b *testing.B) {
	store := open(b, nil)
	cfg, err := pgxpool.ParseConfig(pgtest.URL(b))
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = 8 // as open's store
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	for _, c := range []struct {
		name string
		keys int
		addr bool
	}{{"keys-64", 64, false}, {"one-key", 1, false}, {"keys-64+addr", 64, true}} {
		b.Run(c.name, func(b *testing.B) {
			var handlers [3]http.Handler
			handlers[2] = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var one int
				if err := pool.QueryRow(r.Context(), "SELECT 1").Scan(&one); err != nil {
					b.Error(err)
				}
				w.WriteHeader(http.StatusNoContent)
			})
			for i, s := range []ratelimit.Store{nil, store} {
				o := ratelimit.Options{PerKey: pgbuckets.RateMax, KeyBurst: ratelimit.BurstMax, Store: s,
					KeyID: func(r *http.Request) (string, bool) { return r.Header.Get("X-Key"), true }}
				if c.addr {
					o.PerAddr, o.AddrBurst = pgbuckets.RateMax, ratelimit.BurstMax
				}
				l, err := ratelimit.New(o)
				if err != nil {
					b.Fatal(err)
				}
				handlers[i] = l.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.WriteHeader(http.StatusNoContent)
				}))
			}
			const goroutines, round = 64, 1000
			var took, cpu [3]time.Duration
			var refused atomic.Int64
			b.ResetTimer()
			for first := 0; first < b.N; first += round {
				n := min(round, b.N-first)
				for k := range 3 {
					var next atomic.Int64
					var wg sync.WaitGroup
					start, startCPU := time.Now(), cputime.Process()
					for g := range goroutines {
						wg.Add(1)
						go func() {
							defer wg.Done()
							req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/v1/x", nil)
							req.RemoteAddr = "127.0.0.1:40000"
							req.Header.Set("X-Key", fmt.Sprint("key-", g%c.keys))
							w := &discard{h: http.Header{}}
							for next.Add(1) <= int64(n) {
								w.h = http.Header{}
								handlers[k].ServeHTTP(w, req)
								if w.h.Get("Retry-After") != "" {
									refused.Add(1)
								}
							}
						}()
					}
					wg.Wait()
					took[k] += time.Since(start)
					cpu[k] += cputime.Process() - startCPU
				}
			}
			b.StopTimer()
			if refused.Load() > 0 {
				b.Fatalf("%d requests refused", refused.Load())
			}
			us := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) }
			b.ReportMetric(us(took[0]), "memory-us/req")
			b.ReportMetric(us(took[1]), "shared-us/req")
			b.ReportMetric(us(took[2]), "us/req")
			b.ReportMetric(us(cpu[0]), "memory-cpu-us/req")
			b.ReportMetric(us(cpu[1]), "shared-cpu-us/req")
			b.ReportMetric(us(cpu[2]), "cpu-us/req")
			b.ReportMetric(float64(b.N)/took[1].Seconds(), "shared-req/s")
			b.ReportMetric(took[1].Seconds()/took[2].Seconds(), "ratio")
		})
	}
}
