package idempotencytest

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/internal/cputime"
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

// RunClients drives h in-process (no sockets) with clients concurrent POSTs
// of BenchBody, each with a new Idempotency-Key (or, with keys > 0,
// cycling over keys existing ones named prefix-0…), and reports req/s and
// the process's CPU time per request (cpu-us/req, all threads: on a shared
// machine the steadier figure). Every answer must be 201.
//
// Each client reuses one request (a fresh body reader and key per
// request, as a server's connection reuses its buffers) and a minimal
// ResponseWriter, so that the harness costs little beside the handler it
// measures: what is measured is the handler, the guard and the store,
// whatever wraps them in a real server is the same with and without the
// guard.
func RunClients(b *testing.B, h http.Handler, clients int, keys int64, prefix string) {
	b.SetParallelism(max(1, clients/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	b.ResetTimer()
	start, startCPU := time.Now(), cputime.Process()
	b.RunParallel(func(pb *testing.PB) {
		c := newBenchClient(prefix)
		for pb.Next() {
			n := benchKeys.Add(1)
			if keys > 0 {
				n %= keys
			}
			if status := c.do(h, n); status != http.StatusCreated {
				b.Fatalf("status %d: %s", status, c.w.body.Bytes())
			}
		}
	})
	elapsed, cpu := time.Since(start), cputime.Process()-startCPU
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	if cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "cpu-us/req")
	}
}

// benchClient is one client of RunClients: its request, reused, and its
// response writer.
type benchClient struct {
	req    *http.Request
	body   benchBody
	prefix []byte
	key    []string // the request's Idempotency-Key values
	w      benchWriter
}

func newBenchClient(prefix string) *benchClient {
	c := &benchClient{prefix: append([]byte(prefix), '-'), key: make([]string, 1)}
	c.req = httptest.NewRequest(http.MethodPost, "/payments", nil)
	c.req.Header["Content-Type"] = []string{"application/json"}
	c.req.Header["Idempotency-Key"] = c.key
	c.w.header = http.Header{}
	return c
}

// do sends BenchBody with key prefix-n to h and returns the status.
func (c *benchClient) do(h http.Handler, n int64) int {
	c.key[0] = string(strconv.AppendInt(c.prefix, n, 10))
	c.body.Reset(BenchBody)
	c.req.Body = &c.body
	c.req.GetBody = nil
	c.req.ContentLength = int64(len(BenchBody))
	c.w.reset()
	h.ServeHTTP(&c.w, c.req)
	return c.w.status
}

// benchBody is a request body over BenchBody.
type benchBody struct{ bytes.Reader }

func (*benchBody) Close() error { return nil }

// benchWriter is the least ResponseWriter: a header, a status, a body.
type benchWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *benchWriter) reset() {
	clear(w.header)
	w.status = 0
	w.body.Reset()
}

func (w *benchWriter) Header() http.Header { return w.header }

func (w *benchWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *benchWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.body.Write(p)
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
