package server_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/server"
	"github.com/ledgerworks/ledger/server/ratelimit"
	"github.com/ledgerworks/ledger/server/servertest"
)

// discardWriter keeps nothing, so that the benchmark measures the
// handlers, not a recorder.
type discardWriter struct {
	h      http.Header
	status int
}

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(status int)      { d.status = status }

func stackCPU() time.Duration {
	var u syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// discardExporter exports nothing: the traced sub-benchmarks measure what
// making, recording and batching the spans costs, not a collector.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// BenchmarkStack is the CPU a raw append costs in the handlers, without
// the network: the full stack of ledgerctl serve (rate limit, API key,
// scope, replay guard, handler, request id, metrics, a discarding access
// log) called in-process beside the bare handler (servertest.BareAppend),
// in the same run, 64 goroutines, each request a new key (append) or a
// retry of a finished one (replay). Compare cpu-ns/op and allocs/op of
// the sub-benchmarks. The traced ones are the full stack with every
// request sampled (a span each for the request, the guard, the ledger
// transaction) and a batching processor in front of an exporter that
// discards: what tracing at 100% costs a request.
//
//	go test -run '^$' -bench BenchmarkStack -cpu 2 ./server
func BenchmarkStack(b *testing.B) {
	open := func(b *testing.B, tp trace.TracerProvider) *chain.DB {
		db, err := chain.Open(filepath.Join(b.TempDir(), "ledger.db"), chain.Options{Logger: slog.New(slog.DiscardHandler), TracerProvider: tp})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { db.Close() })
		return db
	}
	full := func(b *testing.B, db *chain.DB, tp trace.TracerProvider) (http.Handler, string) {
		token := servertest.Key(b, db, "acme", apikey.ScopeRead, apikey.ScopeWrite)
		srv, err := server.New(server.Options{DB: db, Logger: slog.New(slog.DiscardHandler), TracerProvider: tp,
			RateLimit: ratelimit.Options{PerKey: 1e9, KeyBurst: ratelimit.BurstMax, PerAddr: 1e9, AddrBurst: ratelimit.BurstMax}})
		if err != nil {
			b.Fatal(err)
		}
		if err := srv.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = srv.Stop(context.Background()) })
		return srv.Handler(), token
	}
	for _, c := range []struct {
		name   string
		bare   bool
		replay bool
		traced bool
	}{{"bare-append", true, false, false}, {"full-append", false, false, false}, {"traced-append", false, false, true},
		{"bare-replay", true, true, false}, {"full-replay", false, true, false}, {"traced-replay", false, true, true}} {
		b.Run(c.name, func(b *testing.B) {
			var tp trace.TracerProvider
			if c.traced {
				sdk := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(discardExporter{}))
				b.Cleanup(func() { _ = sdk.Shutdown(context.Background()) })
				tp = sdk
			}
			db := open(b, tp)
			var h http.Handler
			token := ""
			if c.bare {
				h = servertest.BareAppend(db, "acme")
			} else {
				h, token = full(b, db, tp)
			}
			const seeded = 4096
			if c.replay {
				w := &discardWriter{h: http.Header{}}
				for k := range int64(seeded) {
					serveAppend(b, h, token, 64, k, w)
				}
			}
			var next atomic.Int64
			runStack(b, func(w *discardWriter) {
				k := next.Add(1) - 1
				if c.replay {
					k %= seeded
				}
				serveAppend(b, h, token, 64, k, w)
			})
		})
	}
}

// stackBody is the raw append the stack benchmarks send.
var stackBody = []byte(`{"type":"bench.event/v1","payload":"eyJldmVudCI6Imdvb2RzLnJlY2VpdmVkIiwicG8iOiJQTy0wMDA0NzExIn0="}`)

// serveAppend sends h the raw append of key to chain key%chains, with its
// bearer token unless empty, and fails b unless h answered 201 Created.
func serveAppend(b *testing.B, h http.Handler, token string, chains, key int64, w *discardWriter) {
	r, _ := http.NewRequest(http.MethodPost, "http://bench/v1/chains/bench/c"+strconv.FormatInt(key%chains, 10)+"/entries", bytes.NewReader(stackBody))
	r.RemoteAddr = "127.0.0.1:40000"
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", "k-"+strconv.FormatInt(key, 10))
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	r.Body = io.NopCloser(bytes.NewReader(stackBody))
	clear(w.h)
	w.status = 0
	h.ServeHTTP(w, r)
	if w.status != http.StatusCreated {
		b.Errorf("key %d: status %d", key, w.status)
	}
}

// runStack times serve on 64 goroutines (with -cpu 2), each with a writer
// of its own, and reports the process's CPU a request beside the
// allocations.
func runStack(b *testing.B, serve func(w *discardWriter)) {
	b.SetParallelism(32) // with -cpu 2: 64 goroutines
	b.ReportAllocs()
	b.ResetTimer()
	cpu := stackCPU()
	b.RunParallel(func(pb *testing.PB) {
		w := &discardWriter{h: http.Header{}}
		for pb.Next() {
			serve(w)
		}
	})
	b.ReportMetric(float64(stackCPU()-cpu)/float64(b.N), "cpu-ns/op")
}
