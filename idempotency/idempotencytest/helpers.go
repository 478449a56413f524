package idempotencytest

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// WaitFile waits up to 30 s for the file at path (written by a child
// process of a crash test) and returns its content.
func WaitFile(t testing.TB, path string) []byte {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil {
			return b
		}
	}
	t.Fatalf("%s did not appear", path)
	return nil
}

// BenchBody is the benchmarks' 200-byte JSON request body.
var BenchBody = func() []byte {
	b := []byte(`{"amount":"123.45","currency":"EUR","creditor":"DE89370400440532013000","reference":"invoice 2026-0001","note":"`)
	b = append(b, strings.Repeat("x", 200-len(b)-2)...)
	return append(b, `"}`...)
}()

var benchKeys atomic.Int64

// RunClients drives h in-process (httptest, no sockets) with clients
// concurrent POSTs of BenchBody, each with a new Idempotency-Key (or, with
// keys > 0, cycling over keys existing ones named prefix-0…), and reports
// req/s. Every answer must be 201.
func RunClients(b *testing.B, h http.Handler, clients int, keys int64, prefix string) {
	b.SetParallelism(max(1, clients/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := benchKeys.Add(1)
			if keys > 0 {
				n %= keys
			}
			req := httptest.NewRequest(http.MethodPost, "/payments", bytes.NewReader(BenchBody))
			req.Header.Set("Idempotency-Key", fmt.Sprintf("%s-%d", prefix, n))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusCreated {
				b.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
}

// Seed sends one request for each of keys keys named prefix-0… to h, so
// that RunClients can replay them.
func Seed(h http.Handler, keys int, prefix string) {
	for i := range keys {
		req := httptest.NewRequest(http.MethodPost, "/payments", bytes.NewReader(BenchBody))
		req.Header.Set("Idempotency-Key", fmt.Sprintf("%s-%d", prefix, i))
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
}
