package client_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/client"
	"github.com/ledgerworks/ledger/server"
	"github.com/ledgerworks/ledger/server/ratelimit"
	"github.com/ledgerworks/ledger/server/servertest"
)

// benchCallers is the number of concurrent clients of the benchmarks.
const benchCallers = 64

// benchPayload is the entry every benchmark request appends: a 120-byte
// JSON event.
var benchPayload = []byte(`{"event":"goods.received","po":"PO-0004711","item":"FLOUR-405","location":"WH-1","quantity":"10","unit_cost":"2.50"}`)

// openBenchDB opens a fresh embedded ledger for one benchmark.
func openBenchDB(b *testing.B) *chain.DB {
	b.Helper()
	db, err := chain.Open(filepath.Join(b.TempDir(), "ledger.db"), chain.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}

// drive runs op for 0..n-1 from benchCallers goroutines and returns the
// wall time and the 99th percentile of one op's latency.
func drive(b *testing.B, n int, op func(i int) error) (time.Duration, time.Duration) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	latencies := make([][]time.Duration, benchCallers)
	errs := make(chan error, benchCallers)
	start := time.Now()
	for w := range benchCallers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, n/benchCallers+1)
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				t0 := time.Now()
				if err := op(i); err != nil {
					errs <- err
					return
				}
				lat = append(lat, time.Since(t0))
			}
			latencies[w] = lat
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	all := slices.Concat(latencies...)
	slices.Sort(all)
	return elapsed, all[min(len(all)-1, len(all)*99/100)]
}

// benchClient is a client of url whose keys are k-0, k-1, … in call order,
// so that two runs of one workload send the same requests.
func benchClient(b *testing.B, url, token string) *client.Client {
	b.Helper()
	c, err := client.New(client.Options{BaseURL: url, Token: token, MaxAttempts: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.CloseIdleConnections)
	return c
}

func appendOp(ctx context.Context, c *client.Client, prefix string) func(i int) error {
	return func(i int) error {
		_, err := c.AppendEntry(ctx, fmt.Sprintf("bench/c%d", i%benchCallers),
			api.AppendRequest{Type: "bench.event/v1", Payload: benchPayload}, client.WithIdempotencyKey(fmt.Sprintf("%s-%d", prefix, i)))
		return err
	}
}

func reportHTTP(b *testing.B, n int, got, gotP99, base, baseP99 time.Duration) {
	b.ReportMetric(float64(n)/got.Seconds(), "req/s")
	b.ReportMetric(float64(gotP99.Microseconds()), "p99-us")
	b.ReportMetric(float64(n)/base.Seconds(), "bare-req/s")
	b.ReportMetric(float64(baseP99.Microseconds()), "bare-p99-us")
	b.ReportMetric(base.Seconds()/got.Seconds(), "ratio")
}

// benchServer serves the full stack of ledgerctl serve on db over
// loopback (servertest.Start): rate limit (per key and per address, set
// far above the load so that it counts every request and refuses none),
// API key, scope, replay guard on the ledger's own store, handler, request
// ids, metrics, and the access log (to a logger that discards it). It
// returns the URL and a token of tenant acme.
func benchServer(b *testing.B, db *chain.DB) (string, string) {
	b.Helper()
	token := servertest.Key(b, db, tenant, apikey.ScopeRead, apikey.ScopeWrite)
	r := servertest.Start(b, server.Options{DB: db,
		RateLimit: ratelimit.Options{PerKey: 1e6, KeyBurst: 1 << 20, PerAddr: 1e6, AddrBurst: 1 << 20}})
	return r.URL, token
}

// checkAppended fails the benchmark unless db's chains bench/c0… of tenant
// acme hold n entries in all.
func checkAppended(b *testing.B, db *chain.DB, n int) {
	b.Helper()
	total := uint64(0)
	for i := range min(n, benchCallers) {
		name, _ := chain.ScopedName(tenant, "bench", fmt.Sprintf("c%d", i))
		h, err := db.Head(context.Background(), name)
		if err != nil {
			b.Fatal(err)
		}
		total += h.Seq
	}
	if total != uint64(n) {
		b.Fatalf("%d entries appended, want %d", total, n)
	}
}

// BenchmarkServeAppend: 64 concurrent clients over loopback HTTP/1.1 with
// keep-alive, each request a new key appending one entry, on the embedded
// default (bbolt with its write-ahead log, every answer durable). The
// baseline, measured first in the same run, is the bare handler
// (servertest.BareAppend) appending the same entries. Metrics: req/s and p99-us of
// the full stack, bare-req/s and bare-p99-us, ratio = full ÷ bare.
func BenchmarkServeAppend(b *testing.B) {
	ctx := context.Background()
	n := max(b.N, 2*benchCallers)
	bareDB := openBenchDB(b)
	bare := benchClient(b, servertest.Serve(b, servertest.BareAppend(bareDB, tenant)), "")
	base, baseP99 := drive(b, n, appendOp(ctx, bare, "k"))
	checkAppended(b, bareDB, n)

	db := openBenchDB(b)
	url, token := benchServer(b, db)
	c := benchClient(b, url, token)
	b.ResetTimer()
	got, gotP99 := drive(b, n, appendOp(ctx, c, "k"))
	b.StopTimer()
	checkAppended(b, db, n)
	reportHTTP(b, n, got, gotP99, base, baseP99)
}

// BenchmarkServeReplay: the same 64 clients retry requests that finished
// (the same key and body), which the replay guard answers from its
// records without running the handler. The baseline is the bare handler
// answering the same retries from the ledger's UNIQUE(chain, key). Every
// replay is checked: Idempotent-Replayed true, and nothing appended.
func BenchmarkServeReplay(b *testing.B) {
	ctx := context.Background()
	n := max(b.N, 2*benchCallers)
	seeded := min(n, 10_000) // the guard's cache holds IdempotencyCacheSizeDefault records
	bareDB := openBenchDB(b)
	bare := benchClient(b, servertest.Serve(b, servertest.BareAppend(bareDB, tenant)), "")
	drive(b, seeded, appendOp(ctx, bare, "k"))
	base, baseP99 := drive(b, n, func(i int) error { return appendOp(ctx, bare, "k")(i % seeded) })
	checkAppended(b, bareDB, seeded)

	db := openBenchDB(b)
	url, token := benchServer(b, db)
	c := benchClient(b, url, token)
	drive(b, seeded, appendOp(ctx, c, "k"))
	replay := func(i int) error {
		i %= seeded
		var info client.ResponseInfo
		_, err := c.AppendEntry(ctx, fmt.Sprintf("bench/c%d", i%benchCallers), api.AppendRequest{Type: "bench.event/v1", Payload: benchPayload},
			client.WithIdempotencyKey(fmt.Sprintf("k-%d", i)), client.WithResponseInfo(&info))
		if err == nil && !info.Replayed {
			err = fmt.Errorf("key k-%d: answered without Idempotent-Replayed", i)
		}
		return err
	}
	b.ResetTimer()
	got, gotP99 := drive(b, n, replay)
	b.StopTimer()
	checkAppended(b, db, seeded)
	reportHTTP(b, n, got, gotP99, base, baseP99)
}
