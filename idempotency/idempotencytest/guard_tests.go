package idempotencytest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/idempotency"
)

var guardTests = []struct {
	name string
	fn   func(t *testing.T, h Harness)
}{
	{"DuplicateReplaysAndHandlerRunsOnce", testDuplicateReplays},
	{"SameKeyDifferentPayloadConflicts", testDifferentPayload},
	{"ConcurrentDuplicatesOneRunsOthersInProgress", testConcurrentDuplicates},
	{"PermanentFailurePoisons", testPermanentFailure},
	{"TransientFailureReleasesAndReexecutes", testTransientFailure},
	{"ThreeTransientFailuresPoison", testThreeTransient},
	{"StoreDownIs503", testStoreDown},
	{"CacheDownStillWorks", testCacheDown},
	{"CachedReplaysMatchTheRequestNotItsBytes", testCachedReplays},
	{"KeysIsolatedPerUserAndOperation", testIsolation},
	{"RecoverUnblocksCrashedWorkersKey", testRecoverUnblocks},
	{"CleanupFreesExpiredKey", testCleanupFrees},
	{"CaptureNeverRecordsErrorAsSuccess", testCaptureNeverRecordsErrors},
	{"HeartbeatKeepsALongHandlersLease", testHeartbeat},
	{"InProgressRetryAfterIsTheLeaseLeft", testRetryAfterLeaseLeft},
	{"RetryTakesOverAnEndedLease", testTakeOver},
	{"OutagesNeverPoison", testOutagesNeverPoison},
	{"FailedReleaseIsRetried", testReleaseRetried},
}

// server is a guarded test server on 127.0.0.1.
type server struct {
	*httptest.Server
	guard *idempotency.Guard
	clock *Clock
	runs  sync.Map // key -> *atomic.Int64
	// behave decides a request's response; nil: 201 with the run count.
	behave func(w http.ResponseWriter, r *http.Request, run int64)
}

func (s *server) runCount(key string) int64 {
	v, ok := s.runs.Load(key)
	if !ok {
		return 0
	}
	return v.(*atomic.Int64).Load()
}

func newServer(t *testing.T, store idempotency.Store, opts idempotency.Options) *server {
	t.Helper()
	s := &server{clock: NewClock()}
	opts.Store = store
	if opts.User == nil {
		opts.User = func(r *http.Request) (string, error) {
			if u := r.Header.Get("X-User"); u != "" {
				return u, nil
			}
			return "", errors.New("no X-User")
		}
	}
	if opts.Clock == nil {
		opts.Clock = s.clock.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	g, err := idempotency.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.guard = g
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		v, _ := s.runs.LoadOrStore(key, new(atomic.Int64))
		run := v.(*atomic.Int64).Add(1)
		if s.behave != nil {
			s.behave(w, r, run)
			return
		}
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/payments/"+key)
		w.Header().Set("Set-Cookie", "session=secret")
		w.Header().Set("X-Internal", "not replayed")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"run":%d,"len":%d,"pattern":%q}`, run, len(body), r.Pattern)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /payments", g.Middleware(handler))
	mux.Handle("POST /refunds", g.Middleware(handler))
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

type reply struct {
	status int
	header http.Header
	body   string
}

func (r reply) code() string {
	var p struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal([]byte(r.body), &p)
	return p.Code
}

func (s *server) do(t *testing.T, path, user, key, body string) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.Header.Set("X-User", user)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{resp.StatusCode, resp.Header, string(b)}
}

const body1 = `{"amount":"10.00","currency":"EUR"}`

func testDuplicateReplays(t *testing.T, h Harness) {
	s := newServer(t, h.Open(t), idempotency.Options{})
	first := s.do(t, "/payments", "alice", "k-1", body1)
	if first.status != 201 || first.header.Get(idempotency.ReplayedHeader) != "" {
		t.Fatalf("first: %+v", first)
	}
	for range 3 {
		again := s.do(t, "/payments", "alice", "k-1", `{ "currency": "EUR", "amount": "10.00" }`) // same JSON
		if again.status != first.status || again.body != first.body {
			t.Fatalf("replay %d %q, want %d %q", again.status, again.body, first.status, first.body)
		}
		if again.header.Get(idempotency.ReplayedHeader) != "true" || again.header.Get("Location") != "/payments/k-1" ||
			again.header.Get("Content-Type") != "application/json" {
			t.Fatalf("replay headers: %v", again.header)
		}
		if again.header.Get("Set-Cookie") != "" || again.header.Get("X-Internal") != "" {
			t.Fatalf("replay carries a header outside the allow-list: %v", again.header)
		}
	}
	if n := s.runCount("k-1"); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
	if !strings.Contains(first.body, `"pattern":"POST /payments"`) {
		t.Fatalf("the handler did not see the route pattern: %s", first.body)
	}
}

func testDifferentPayload(t *testing.T, h Harness) {
	store := h.Open(t)
	s := newServer(t, store, idempotency.Options{})
	if r := s.do(t, "/payments", "alice", "k-1", body1); r.status != 201 {
		t.Fatalf("first: %+v", r)
	}
	r := s.do(t, "/payments", "alice", "k-1", `{"amount":"11.00","currency":"EUR"}`)
	if r.status != 409 || r.code() != string(idempotency.CodeKeyReused) ||
		r.header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("reuse: %+v", r)
	}
	if n := s.runCount("k-1"); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
	// A route can map the code to 422, as the IETF draft says.
	s422 := newServer(t, store, idempotency.Options{StatusMap: idempotency.StatusMap{idempotency.CodeKeyReused: 422}})
	if r := s422.do(t, "/payments", "bob", "k-2", body1); r.status != 201 {
		t.Fatalf("first: %+v", r)
	}
	if r := s422.do(t, "/payments", "bob", "k-2", "other"); r.status != 422 || r.code() != string(idempotency.CodeKeyReused) {
		t.Fatalf("reuse with StatusMap: %+v", r)
	}
}

func testConcurrentDuplicates(t *testing.T, h Harness) {
	s := newServer(t, h.Open(t), idempotency.Options{})
	started, release := make(chan struct{}), make(chan struct{})
	s.behave = func(w http.ResponseWriter, r *http.Request, run int64) {
		if run == 1 {
			close(started)
			<-release
		}
		w.WriteHeader(201)
		fmt.Fprintf(w, "run %d", run)
	}
	firstDone := make(chan reply, 1)
	go func() { firstDone <- s.do(t, "/payments", "alice", "k-1", body1) }()
	<-started
	var wg sync.WaitGroup
	replies := make([]reply, 8)
	for i := range replies {
		wg.Add(1)
		go func() { defer wg.Done(); replies[i] = s.do(t, "/payments", "alice", "k-1", body1) }()
	}
	wg.Wait()
	for _, r := range replies {
		if r.status != 409 || r.code() != string(idempotency.CodeInProgress) || r.header.Get("Retry-After") == "" {
			t.Fatalf("concurrent duplicate: %+v", r)
		}
	}
	// The request-hash check comes before the in-progress one.
	if r := s.do(t, "/payments", "alice", "k-1", "different"); r.code() != string(idempotency.CodeKeyReused) {
		t.Fatalf("different body while in progress: %+v", r)
	}
	close(release)
	if r := <-firstDone; r.status != 201 || r.body != "run 1" {
		t.Fatalf("first: %+v", r)
	}
	if r := s.do(t, "/payments", "alice", "k-1", body1); r.status != 201 || r.body != "run 1" {
		t.Fatalf("after: %+v", r)
	}
	if n := s.runCount("k-1"); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
}

var errDeclined = errors.New("card declined")

func testPermanentFailure(t *testing.T, h Harness) {
	s := newServer(t, h.Open(t), idempotency.Options{
		IsPermanentError: func(status int, err error) bool { return errors.Is(err, errDeclined) },
	})
	s.behave = func(w http.ResponseWriter, r *http.Request, run int64) {
		idempotency.FromContext(r.Context()).Fail(errDeclined)
		w.WriteHeader(http.StatusPaymentRequired)
	}
	if r := s.do(t, "/payments", "alice", "k-1", body1); r.status != 402 {
		t.Fatalf("first: %+v", r)
	}
	for range 2 {
		if r := s.do(t, "/payments", "alice", "k-1", body1); r.status != 409 || r.code() != string(idempotency.CodeRequestFailed) {
			t.Fatalf("retry of a poisoned key: %+v", r)
		}
	}
	if n := s.runCount("k-1"); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
}

func testTransientFailure(t *testing.T, h Harness) {
	s := newServer(t, h.Open(t), idempotency.Options{})
	var attempts []int
	var mu sync.Mutex
	s.behave = func(w http.ResponseWriter, r *http.Request, run int64) {
		mu.Lock()
		attempts = append(attempts, idempotency.FromContext(r.Context()).Attempt)
		mu.Unlock()
		if run == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(201)
		io.WriteString(w, "done")
	}
	if r := s.do(t, "/payments", "alice", "k-1", body1); r.status != 503 {
		t.Fatalf("first: %+v", r)
	}
	if r := s.do(t, "/payments", "alice", "k-1", body1); r.status != 201 || r.header.Get(idempotency.ReplayedHeader) != "" {
		t.Fatalf("retry: %+v, want a fresh execution", r)
	}
	if r := s.do(t, "/payments", "alice", "k-1", body1); r.status != 201 || r.header.Get(idempotency.ReplayedHeader) != "true" {
		t.Fatalf("third: %+v, want the replay", r)
	}
	if n := s.runCount("k-1"); n != 2 || fmt.Sprint(attempts) != "[1 2]" {
		t.Fatalf("handler ran %d times with attempts %v, want 2 with [1 2]", n, attempts)
	}
}

func testThreeTransient(t *testing.T, h Harness) {
	s := newServer(t, h.Open(t), idempotency.Options{})
	s.behave = func(w http.ResponseWriter, r *http.Request, run int64) {
		idempotency.FromContext(r.Context()).Fail(errors.New("upstream timeout"))
		w.WriteHeader(http.StatusBadGateway)
	}
	for i := range 3 {
		if r := s.do(t, "/payments", "alice", "k-1", body1); r.status != 502 {
			t.Fatalf("attempt %d: %+v", i+1, r)
		}
	}
	if r := s.do(t, "/payments", "alice", "k-1", body1); r.status != 409 || r.code() != string(idempotency.CodeRequestFailed) {
		t.Fatalf("after 3 transient failures: %+v", r)
	}
	if n := s.runCount("k-1"); n != 3 {
		t.Fatalf("handler ran %d times, want 3", n)
	}
}

func testStoreDown(t *testing.T, h Harness) {
	var store idempotency.Store = DownStore{}
	if h.Unreachable != nil {
		store = h.Unreachable(t)
	}
	s := newServer(t, store, idempotency.Options{})
	r := s.do(t, "/payments", "alice", "k-1", body1)
	if r.status != 503 || r.code() != string(idempotency.CodeStoreUnavailable) || r.header.Get("Retry-After") == "" {
		t.Fatalf("store down: %+v", r)
	}
	if n := s.runCount("k-1"); n != 0 {
		t.Fatalf("handler ran %d times with the store down, want 0", n)
	}
}

func testCacheDown(t *testing.T, h Harness) {
	s := newServer(t, h.Open(t), idempotency.Options{Cache: DownCache{}})
	first := s.do(t, "/payments", "alice", "k-1", body1)
	again := s.do(t, "/payments", "alice", "k-1", body1)
	if first.status != 201 || again.body != first.body || again.header.Get(idempotency.ReplayedHeader) != "true" {
		t.Fatalf("with the cache down: %+v then %+v", first, again)
	}
	if n := s.runCount("k-1"); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
	// And with a working cache, the second retry is a cache hit.
	lru := idempotency.NewLRU(16)
	s2 := newServer(t, h.Open(t), idempotency.Options{Cache: lru})
	for range 3 {
		s2.do(t, "/payments", "alice", "k-2", body1)
	}
	if lru.Len() != 1 || s2.runCount("k-2") != 1 {
		t.Fatalf("LRU holds %d records, handler ran %d times", lru.Len(), s2.runCount("k-2"))
	}
	if r := s2.do(t, "/payments", "alice", "k-2", "other"); r.code() != string(idempotency.CodeKeyReused) {
		t.Fatalf("conflict through the cache: %+v", r)
	}
}

// A cached record replays to the same request in any of its JSON forms,
// to bodies short and long, and refuses another request.
func testCachedReplays(t *testing.T, h Harness) {
	lru := idempotency.NewLRU(16)
	s := newServer(t, h.Open(t), idempotency.Options{Cache: lru})
	long := `{"note":"` + strings.Repeat("n", 5000) + `","amount":"1.00"}`
	for _, tc := range []struct{ key, body, reordered, other string }{
		{"short", body1, `{ "currency": "EUR", "amount": "10.00" }`, `{"amount":"11.00","currency":"EUR"}`},
		{"long", long, `{"amount":"1.00", "note":"` + strings.Repeat("n", 5000) + `"}`, strings.Replace(long, "1.00", "2.00", 1)},
	} {
		first := s.do(t, "/payments", "alice", tc.key, tc.body)
		if first.status != 201 {
			t.Fatalf("%s: first: %+v", tc.key, first)
		}
		// From the store (and cached), then from the cache: the same bytes,
		// another form of the same JSON, the same bytes again.
		for i, body := range []string{tc.body, tc.body, tc.reordered, tc.body, tc.reordered} {
			r := s.do(t, "/payments", "alice", tc.key, body)
			if r.status != 201 || r.body != first.body || r.header.Get(idempotency.ReplayedHeader) != "true" ||
				r.header.Get("Location") != "/payments/"+tc.key || r.header.Get("Content-Length") != fmt.Sprint(len(first.body)) {
				t.Fatalf("%s: replay %d: %+v, first %+v", tc.key, i, r, first)
			}
		}
		if r := s.do(t, "/payments", "alice", tc.key, tc.other); r.status != 409 || r.code() != string(idempotency.CodeKeyReused) {
			t.Fatalf("%s: another request through the cache: %+v", tc.key, r)
		}
		if n := s.runCount(tc.key); n != 1 {
			t.Fatalf("%s: handler ran %d times, want 1", tc.key, n)
		}
	}
	if lru.Len() != 2 {
		t.Fatalf("LRU holds %d records, want 2", lru.Len())
	}
}

func testIsolation(t *testing.T, h Harness) {
	s := newServer(t, h.Open(t), idempotency.Options{})
	s.behave = func(w http.ResponseWriter, r *http.Request, run int64) {
		w.WriteHeader(201)
		fmt.Fprintf(w, "%s %s", r.Header.Get("X-User"), r.Pattern)
	}
	a := s.do(t, "/payments", "alice", "shared", body1)
	b := s.do(t, "/payments", "bob", "shared", `{"other":"body"}`)
	c := s.do(t, "/refunds", "alice", "shared", `{"third":"body"}`)
	if a.body != "alice POST /payments" || b.body != "bob POST /payments" || c.body != "alice POST /refunds" {
		t.Fatalf("isolation: %q %q %q", a.body, b.body, c.body)
	}
	for _, r := range []reply{a, b, c} {
		if r.status != 201 || r.header.Get(idempotency.ReplayedHeader) != "" {
			t.Fatalf("a scope saw another's record: %+v", r)
		}
	}
	if n := s.runCount("shared"); n != 3 {
		t.Fatalf("handler ran %d times, want 3", n)
	}
	if r := s.do(t, "/payments", "", "shared", body1); r.status != 401 || r.code() != string(idempotency.CodeUnauthenticated) {
		t.Fatalf("without a user: %+v", r)
	}
	if _, err := idempotency.New(idempotency.Options{Store: idempotency.NewMemoryStore()}); err == nil {
		t.Fatal("New without a user resolver succeeded")
	}
}

func testRecoverUnblocks(t *testing.T, h Harness) {
	store := h.Open(t)
	s := newServer(t, store, idempotency.Options{LeaseDuration: time.Minute})
	// A worker took the key and died: its PROCESSING record stays behind.
	now := s.clock.Now()
	canon, _ := idempotency.CanonicalJSON([]byte(body1))
	scope := idempotency.Scope{Operation: "POST /payments", User: "alice", Key: "k-1"}
	_, err := store.Create(context.Background(), idempotency.Claim{Scope: scope, RequestHash: idempotency.RequestHash(scope.Operation, canon),
		Token: "dead-worker", Now: now, LeaseExpiresAt: now.Add(time.Minute), ExpiresAt: now.Add(24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if r := s.do(t, "/payments", "alice", "k-1", body1); r.code() != string(idempotency.CodeInProgress) {
		t.Fatalf("while the dead worker's lease runs: %+v", r)
	}
	jobs := s.guard.Jobs()
	if n, err := jobs.RecoverStuckRecords(context.Background(), 0, 100); err != nil || n != 0 {
		t.Fatalf("recover before the lease ended: %d, %v", n, err)
	}
	s.clock.Advance(2 * time.Minute)
	if n, err := jobs.RecoverStuckRecords(context.Background(), 0, 100); err != nil || n != 1 {
		t.Fatalf("recover after the lease ended: %d, %v, want 1", n, err)
	}
	if r := s.do(t, "/payments", "alice", "k-1", body1); r.status != 201 || r.header.Get(idempotency.ReplayedHeader) != "" {
		t.Fatalf("after recovery: %+v", r)
	}
	if rec, err := store.Get(context.Background(), scope, s.clock.Now()); err != nil || rec.Attempt != 2 || rec.Status != idempotency.StatusSuccess {
		t.Fatalf("record after recovery: %+v, %v (the dead attempt counts as a transient failure)", rec, err)
	}
}

func testCleanupFrees(t *testing.T, h Harness) {
	store := h.Open(t)
	s := newServer(t, store, idempotency.Options{TTL: time.Hour})
	if r := s.do(t, "/payments", "alice", "k-1", body1); r.status != 201 {
		t.Fatalf("first: %+v", r)
	}
	if r := s.do(t, "/payments", "alice", "k-1", "another"); r.code() != string(idempotency.CodeKeyReused) {
		t.Fatalf("before expiry: %+v", r)
	}
	s.clock.Advance(time.Hour + time.Second)
	n, err := s.guard.Jobs().CleanupExpiredRecords(context.Background(), 100)
	if err != nil || n != 1 {
		t.Fatalf("cleanup: %d, %v, want 1", n, err)
	}
	if recs, err := store.List(context.Background(), idempotency.Scope{}, "", 10, s.clock.Now().Add(-2*time.Hour)); err != nil || len(recs) != 0 {
		t.Fatalf("records after cleanup: %v, %v", recs, err)
	}
	if r := s.do(t, "/payments", "alice", "k-1", "another"); r.status != 201 || r.header.Get(idempotency.ReplayedHeader) != "" {
		t.Fatalf("after cleanup: %+v", r)
	}
}

func testCaptureNeverRecordsErrors(t *testing.T, h Harness) {
	store := h.Open(t)
	s := newServer(t, store, idempotency.Options{ResponseSizeMax: 64, MaxRetries: 100})
	kinds := map[string]func(w http.ResponseWriter, r *http.Request){
		"500": func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500); io.WriteString(w, "boom") },
		"200+Fail": func(w http.ResponseWriter, r *http.Request) {
			idempotency.FromContext(r.Context()).Fail(errors.New("x"))
			io.WriteString(w, "ok?")
		},
		"flushed":  func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "part"); w.(http.Flusher).Flush() },
		"oversize": func(w http.ResponseWriter, r *http.Request) { w.Write(bytes.Repeat([]byte("x"), 65)) },
		"hijacked": func(w http.ResponseWriter, r *http.Request) {
			c, b, _ := w.(http.Hijacker).Hijack()
			b.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi")
			b.Flush()
			c.Close()
		},
		"panicked": func(w http.ResponseWriter, r *http.Request) { panic(http.ErrAbortHandler) },
		"429":      func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(429) },
		"controller": func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "p")
			_ = http.NewResponseController(w).Flush()
		},
	}
	s.behave = func(w http.ResponseWriter, r *http.Request, run int64) { kinds[r.Header.Get("Idempotency-Key")](w, r) }
	for key := range kinds {
		for range 2 {
			req, _ := http.NewRequest("POST", s.URL+"/payments", strings.NewReader(body1))
			req.Header.Set("X-User", "alice")
			req.Header.Set("Idempotency-Key", key)
			req.Close = true // a hijacked or aborted connection is not reused
			if resp, err := s.Client().Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			// A hijacked connection answers before the handler returns:
			// wait until the attempt has ended in the store.
			scope := idempotency.Scope{Operation: "POST /payments", User: "alice", Key: key}
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				if rec, err := store.Get(context.Background(), scope, s.clock.Now()); err != nil || rec.Status != idempotency.StatusProcessing {
					break
				}
			}
		}
		if n := s.runCount(key); n != 2 {
			t.Errorf("%s: handler ran %d times in 2 requests, want 2 (nothing stored)", key, n)
		}
		recs, err := store.List(context.Background(), idempotency.Scope{}, idempotency.StatusSuccess, 100, s.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			t.Errorf("%s: a SUCCESS record was stored: %+v", key, rec.Scope)
		}
	}
}

func testHeartbeat(t *testing.T, h Harness) {
	store := h.Open(t)
	s := newServer(t, store, idempotency.Options{Clock: time.Now, LeaseDuration: 400 * time.Millisecond, HeartbeatInterval: 50 * time.Millisecond})
	release := make(chan struct{})
	s.behave = func(w http.ResponseWriter, r *http.Request, run int64) {
		<-release
		w.WriteHeader(201)
	}
	done := make(chan reply, 1)
	go func() { done <- s.do(t, "/payments", "alice", "slow", body1) }()
	jobs := s.guard.Jobs()
	// Recovery runs throughout a handler that lasts three leases.
	for deadline := time.Now().Add(1200 * time.Millisecond); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if n, err := jobs.RecoverStuckRecords(context.Background(), 0, 100); err != nil || n != 0 {
			t.Fatalf("recovery took a live request's lease: %d, %v", n, err)
		}
	}
	close(release)
	if r := <-done; r.status != 201 {
		t.Fatalf("slow request: %+v", r)
	}
	if r := s.do(t, "/payments", "alice", "slow", body1); r.header.Get(idempotency.ReplayedHeader) != "true" || s.runCount("slow") != 1 {
		t.Fatalf("retry of the slow request: %+v, handler ran %d times", r, s.runCount("slow"))
	}
}
