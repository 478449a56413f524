package client_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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

// run is what drive measured.
type run struct {
	wall, p99, cpu time.Duration // cpu: the process's user and system time
}

// processCPU returns the CPU time the process has used, every goroutine's
// (clients, server, engine, garbage collector).
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// drive runs op for 0..n-1 from benchCallers goroutines and returns the
// wall time, the 99th percentile of one op's latency and the CPU time.
func drive(b *testing.B, n int, op func(w, i int) error) run {
	b.Helper()
	cpu0 := processCPU(b)
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
				if err := op(w, i); err != nil {
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
	cpu := processCPU(b) - cpu0
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	all := slices.Concat(latencies...)
	slices.Sort(all)
	return run{wall: elapsed, p99: all[min(len(all)-1, len(all)*99/100)], cpu: cpu}
}

// A driver sends benchmark appends to one server from benchCallers
// goroutines: append(w, chain, key) is goroutine w's request and reports
// whether the answer was a replay.
type driver interface {
	append(w int, chain, key string) (replayed bool, err error)
}

// newDriver returns the driver named kind ("client" or "raw") for url.
func newDriver(b *testing.B, kind, url, token string) driver {
	b.Helper()
	if kind == "raw" {
		return newRawDriver(b, url, token)
	}
	c, err := client.New(client.Options{BaseURL: url, Token: token, MaxAttempts: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.CloseIdleConnections)
	return clientDriver{c}
}

// clientDriver sends through the Go client: what an ERP's process spends.
type clientDriver struct{ c *client.Client }

func (d clientDriver) append(_ int, name, key string) (bool, error) {
	var info client.ResponseInfo
	_, err := d.c.AppendEntry(context.Background(), name, api.AppendRequest{Type: benchType, Payload: benchPayload},
		client.WithIdempotencyKey(key), client.WithResponseInfo(&info))
	return info.Replayed, err
}

// rawDriver writes each request's bytes on its goroutine's own keep-alive
// connection and reads the answer with http.ReadResponse: a load
// generator's cost (as wrk's), so that the server gets the CPU the Go
// client's transport would take.
type rawDriver struct {
	conns []*rawConn
	auth  string
	body  []byte
}

type rawConn struct {
	conn net.Conn
	br   *bufio.Reader
	buf  []byte
}

func newRawDriver(b *testing.B, url, token string) *rawDriver {
	b.Helper()
	body, err := json.Marshal(api.AppendRequest{Type: benchType, Payload: benchPayload})
	if err != nil {
		b.Fatal(err)
	}
	d := &rawDriver{body: body}
	if token != "" {
		d.auth = "Authorization: Bearer " + token + "\r\n"
	}
	for range benchCallers {
		conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { conn.Close() })
		d.conns = append(d.conns, &rawConn{conn: conn, br: bufio.NewReader(conn)})
	}
	return d
}

func (d *rawDriver) append(w int, name, key string) (bool, error) {
	rc := d.conns[w]
	rc.buf = append(rc.buf[:0], "POST /v1/chains/"...)
	rc.buf = append(rc.buf, name...)
	rc.buf = append(rc.buf, "/entries HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"...)
	rc.buf = append(rc.buf, d.auth...)
	rc.buf = append(rc.buf, "Idempotency-Key: "...)
	rc.buf = append(rc.buf, key...)
	rc.buf = append(rc.buf, "\r\nContent-Length: "...)
	rc.buf = strconv.AppendInt(rc.buf, int64(len(d.body)), 10)
	rc.buf = append(rc.buf, "\r\n\r\n"...)
	rc.buf = append(rc.buf, d.body...)
	if _, err := rc.conn.Write(rc.buf); err != nil {
		return false, err
	}
	resp, err := http.ReadResponse(rc.br, nil)
	if err != nil {
		return false, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err == nil && resp.StatusCode != http.StatusCreated {
		err = fmt.Errorf("%s %s: status %d", name, key, resp.StatusCode)
	}
	return resp.Header.Get(api.HeaderReplayed) == "true", err
}

// appendOp appends request i of the workload: key k-i on chain c(i mod 64).
func appendOp(d driver, wantReplay bool) func(w, i int) error {
	return func(w, i int) error {
		key := "k-" + strconv.Itoa(i)
		replayed, err := d.append(w, "bench/c"+strconv.Itoa(i%benchCallers), key)
		if err == nil && wantReplay && !replayed {
			err = fmt.Errorf("key %s: answered without Idempotent-Replayed", key)
		}
		return err
	}
}

// reportHTTP reports the full stack's and the baseline's throughput, p99
// latency and CPU time a request (clients and server together: on a busy
// machine the CPU time moves less than the wall time), and the ratios.
func reportHTTP(b *testing.B, n int, got, base run) {
	b.ReportMetric(float64(n)/got.wall.Seconds(), "req/s")
	b.ReportMetric(float64(got.p99.Microseconds()), "p99-us")
	b.ReportMetric(float64(got.cpu.Microseconds())/float64(n), "cpu-us/req")
	b.ReportMetric(float64(n)/base.wall.Seconds(), "bare-req/s")
	b.ReportMetric(float64(base.p99.Microseconds()), "bare-p99-us")
	b.ReportMetric(float64(base.cpu.Microseconds())/float64(n), "bare-cpu-us/req")
	b.ReportMetric(base.wall.Seconds()/got.wall.Seconds(), "ratio")
	b.ReportMetric(base.cpu.Seconds()/got.cpu.Seconds(), "cpu-ratio")
}

// profileCPU writes a CPU profile to the file SERVE_BENCH_CPUPROFILE names
// (prefixed with the benchmark's name) until stop is called; nothing when
// it is unset. It covers the full stack's timed requests only, not the
// baseline's.
func profileCPU(b *testing.B) (stop func()) {
	path := os.Getenv("SERVE_BENCH_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	name := strings.NewReplacer("/", "-", "=", "-").Replace(b.Name())
	f, err := os.Create(filepath.Join(filepath.Dir(path), name+"-"+filepath.Base(path)))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
	}
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

// The drivers of the HTTP benchmarks: "client" sends through the Go
// client (its cost shares the 2 cores with the server's), "raw" writes
// prebuilt requests on 64 keep-alive connections, as a load generator does.
var benchDrivers = []string{"client", "raw"}

// benchType is the type of every benchmark entry.
const benchType = "bench.event/v1"

// BenchmarkServeAppend: 64 concurrent clients over loopback HTTP/1.1 with
// keep-alive, each request a new key appending one entry, on the embedded
// default (bbolt with its write-ahead log, every answer durable). The
// baseline, measured first in the same run, is the bare handler
// (servertest.BareAppend) appending the same entries on its own ledger.
// Metrics: req/s, p99-us and cpu-us/req of the full stack, the same of the
// bare handler, ratio (full ÷ bare throughput) and cpu-ratio (bare ÷ full
// CPU time a request).
func BenchmarkServeAppend(b *testing.B) {
	for _, kind := range benchDrivers {
		b.Run("driver="+kind, func(b *testing.B) {
			n := max(b.N, 2*benchCallers)
			bareDB := openBenchDB(b)
			base := drive(b, n, appendOp(newDriver(b, kind, servertest.Serve(b, servertest.BareAppend(bareDB, tenant)), ""), false))
			checkAppended(b, bareDB, n)

			db := openBenchDB(b)
			url, token := benchServer(b, db)
			d := newDriver(b, kind, url, token)
			b.ResetTimer()
			stop := profileCPU(b)
			got := drive(b, n, appendOp(d, false))
			stop()
			b.StopTimer()
			checkAppended(b, db, n)
			reportHTTP(b, n, got, base)
		})
	}
}

// BenchmarkServeReplay: the same clients retry requests that finished (the
// same key and body), which the replay guard answers from its records
// without running the handler; every answer must carry
// Idempotent-Replayed: true, and nothing is appended. The baseline is the
// bare handler answering the same retries from the ledger's
// UNIQUE(chain, key).
func BenchmarkServeReplay(b *testing.B) {
	for _, kind := range benchDrivers {
		b.Run("driver="+kind, func(b *testing.B) {
			n := max(b.N, 2*benchCallers)
			seeded := min(n, 10_000) // the guard's cache holds IdempotencyCacheSizeDefault records
			cycle := func(op func(w, i int) error) func(w, i int) error {
				return func(w, i int) error { return op(w, i%seeded) }
			}
			bareDB := openBenchDB(b)
			bare := newDriver(b, kind, servertest.Serve(b, servertest.BareAppend(bareDB, tenant)), "")
			drive(b, seeded, appendOp(bare, false))
			base := drive(b, n, cycle(appendOp(bare, false)))
			checkAppended(b, bareDB, seeded)

			db := openBenchDB(b)
			url, token := benchServer(b, db)
			d := newDriver(b, kind, url, token)
			drive(b, seeded, appendOp(d, false))
			b.ResetTimer()
			stop := profileCPU(b)
			got := drive(b, n, cycle(appendOp(d, true)))
			stop()
			b.StopTimer()
			checkAppended(b, db, seeded)
			reportHTTP(b, n, got, base)
		})
	}
}
