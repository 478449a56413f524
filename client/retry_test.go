package client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/internal/problem"
)

// script is a test server on 127.0.0.1 that answers the n-th request with
// the n-th step (the last step repeats) and records every request.
type script struct {
	t     *testing.T
	steps []func(w http.ResponseWriter, r *http.Request)
	mu    sync.Mutex
	seen  []seenRequest
	srv   *httptest.Server
}

type seenRequest struct {
	method, path, key, auth, contentType string
	body                                 []byte
}

func newScript(t *testing.T, steps ...func(w http.ResponseWriter, r *http.Request)) *script {
	t.Helper()
	s := &script{t: t, steps: steps}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		n := len(s.seen)
		s.seen = append(s.seen, seenRequest{r.Method, r.URL.Path, r.Header.Get(api.HeaderIdempotencyKey), r.Header.Get("Authorization"),
			r.Header.Get("Content-Type"), body})
		s.mu.Unlock()
		s.steps[min(n, len(s.steps)-1)](w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *script) requests() []seenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seenRequest(nil), s.seen...)
}

func (s *script) client(t *testing.T, opts Options) (*Client, *[]RetryEvent) {
	t.Helper()
	opts.BaseURL = s.srv.URL
	if opts.BackoffBase == 0 {
		opts.BackoffBase = time.Millisecond
	}
	events := &[]RetryEvent{}
	opts.OnRetry = func(e RetryEvent) { *events = append(*events, e) }
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c, events
}

func answer(status int, code string, retryAfter time.Duration) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		problem.Write(w, problem.Problem{Status: status, Code: code, Detail: "scripted " + code, RetryAfter: retryAfter,
			Extra: map[string]any{"existing_seq": "7"}})
	}
}

func created(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(api.HeaderRequestID, "req-1")
	w.WriteHeader(http.StatusCreated)
	io.WriteString(w, `{"chain":"a","seq":"3"}`+"\n")
}

// hangUp closes the connection without an answer.
func hangUp(w http.ResponseWriter, r *http.Request) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	conn.Close()
}

// cutShort promises a body it does not send, then closes the connection.
func cutShort(w http.ResponseWriter, r *http.Request) {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	buf.WriteString("HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"chain\":")
	buf.Flush()
	conn.Close()
}

type result struct {
	Chain string `json:"chain"`
	Seq   uint64 `json:"seq,string"`
}

func post(c *Client, ctx context.Context, opts ...CallOption) (result, error) {
	var out result
	err := c.do(ctx, call{method: http.MethodPost, path: "/v1/chains/a/entries", in: map[string]string{"type": "t", "payload": "cA=="},
		out: &out, keyed: true}, opts)
	return out, err
}

func TestRetriesUntilSuccessWithOneKeyAndOneBody(t *testing.T) {
	for name, first := range map[string]func(http.ResponseWriter, *http.Request){
		"503": answer(503, api.CodeStoreUnavailable, 0),
		"502 html": func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "<html>bad gateway</html>", http.StatusBadGateway)
		},
		"504":              answer(504, "GATEWAY_TIMEOUT", 0),
		"429":              answer(429, api.CodeRateLimited, 0),
		"409 in progress":  answer(409, api.CodeInProgress, 0),
		"connection reset": hangUp,
		"body cut short":   cutShort,
	} {
		t.Run(name, func(t *testing.T) {
			s := newScript(t, first, first, created)
			c, events := s.client(t, Options{Token: "lw_test.secret"})
			var info ResponseInfo
			out, err := post(c, context.Background(), WithResponseInfo(&info))
			if err != nil {
				t.Fatal(err)
			}
			if out != (result{"a", 3}) || info.Attempts != 3 || info.Status != 201 || info.RequestID != "req-1" {
				t.Fatalf("out %+v, info %+v", out, info)
			}
			reqs := s.requests()
			if len(reqs) != 3 || len(*events) != 2 {
				t.Fatalf("%d requests, %d retry events", len(reqs), len(*events))
			}
			k, err := uuid.Parse(reqs[0].key)
			if err != nil || k.Version() != 4 || info.Key != reqs[0].key {
				t.Fatalf("key %q (%v), info key %q: want one UUID v4", reqs[0].key, err, info.Key)
			}
			for i, r := range reqs {
				if r.key != reqs[0].key || !bytes.Equal(r.body, reqs[0].body) || r.auth != "Bearer lw_test.secret" ||
					r.contentType != "application/json" || r.method != "POST" || r.path != "/v1/chains/a/entries" {
					t.Fatalf("attempt %d sent %+v, attempt 1 %+v", i+1, r, reqs[0])
				}
			}
			for i, e := range *events {
				if e.Attempt != i+1 || e.Key != reqs[0].key || e.Wait < 0 || e.Wait >= time.Millisecond<<i {
					t.Fatalf("retry event %d: %+v", i, e)
				}
			}
		})
	}
}

func TestFinalAnswersAreNotRetried(t *testing.T) {
	for _, tc := range []struct {
		status int
		code   string
	}{
		{409, api.CodeKeyReused}, {409, api.CodeIdempotencyConflict}, {409, api.CodeRequestFailed}, {400, api.CodeInvalidInput},
		{400, api.CodeKeyRequired}, {401, api.CodeUnauthenticated}, {403, api.CodeForbidden}, {404, api.CodeNotFound},
		{413, api.CodePayloadTooLarge}, {500, "INTERNAL"},
	} {
		t.Run(tc.code, func(t *testing.T) {
			s := newScript(t, answer(tc.status, tc.code, time.Second), created)
			c, _ := s.client(t, Options{})
			_, err := post(c, context.Background())
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err %v, want *Error", err)
			}
			if e.Status != tc.status || e.Code != tc.code || e.Retryable || e.Attempts != 1 || e.Detail != "scripted "+tc.code ||
				e.Type != problem.TypePrefix+tc.code || e.Key == "" || e.Method != "POST" {
				t.Fatalf("error %+v", e)
			}
			if seq, ok := e.ExtraInt64("existing_seq"); !ok || seq != 7 {
				t.Fatalf("existing_seq %d %v", seq, ok)
			}
			if !errors.Is(err, &Error{Code: tc.code}) || ErrorCode(err) != tc.code {
				t.Fatalf("errors.Is by code fails for %v", err)
			}
			if n := len(s.requests()); n != 1 {
				t.Fatalf("%d requests, want 1", n)
			}
		})
	}
}

func TestAttemptsAreBounded(t *testing.T) {
	s := newScript(t, answer(503, api.CodeStoreUnavailable, 0))
	c, events := s.client(t, Options{MaxAttempts: 4})
	_, err := post(c, context.Background())
	var e *Error
	if !errors.As(err, &e) || e.Code != api.CodeStoreUnavailable || !e.Retryable || e.Attempts != 4 {
		t.Fatalf("err %v", err)
	}
	if n := len(s.requests()); n != 4 || len(*events) != 3 {
		t.Fatalf("%d requests, %d retries; want 4 and 3", n, len(*events))
	}
	if !strings.Contains(err.Error(), "after 4 attempts") {
		t.Fatalf("message %q", err)
	}
}

func TestMaxAttemptsOneNeverRetries(t *testing.T) {
	s := newScript(t, answer(503, api.CodeStoreUnavailable, 0), created)
	c, _ := s.client(t, Options{MaxAttempts: 1})
	if _, err := post(c, context.Background()); ErrorCode(err) != api.CodeStoreUnavailable || len(s.requests()) != 1 {
		t.Fatalf("err %v after %d requests", err, len(s.requests()))
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	s := newScript(t, answer(409, api.CodeInProgress, time.Second), created)
	c, events := s.client(t, Options{})
	if _, err := post(c, context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(*events) != 1 || (*events)[0].Wait < time.Second {
		t.Fatalf("retry events %+v: want one wait of at least the 1 s Retry-After", *events)
	}
	var e *Error
	if !errors.As((*events)[0].Err, &e) || e.RetryAfter != time.Second || e.Code != api.CodeInProgress {
		t.Fatalf("event error %+v", (*events)[0].Err)
	}
}

func TestRetryAfterBeyondMaxEndsTheCall(t *testing.T) {
	s := newScript(t, answer(429, api.CodeRateLimited, time.Minute), created)
	c, events := s.client(t, Options{RetryAfterMax: 10 * time.Second})
	_, err := post(c, context.Background())
	var e *Error
	if !errors.As(err, &e) || e.Code != api.CodeRateLimited || !e.Retryable || e.RetryAfter != time.Minute {
		t.Fatalf("err %v", err)
	}
	if len(s.requests()) != 1 || len(*events) != 0 {
		t.Fatalf("%d requests", len(s.requests()))
	}
}

func TestContextDeadlineBoundsRetries(t *testing.T) {
	s := newScript(t, answer(503, api.CodeStoreUnavailable, 2*time.Second))
	c, _ := s.client(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := post(c, ctx)
	var e *Error
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &e) || e.Code != api.CodeStoreUnavailable {
		t.Fatalf("err %v: want DeadlineExceeded and the last attempt's *Error", err)
	}
	if len(s.requests()) != 1 {
		t.Fatalf("%d requests: the 2 s Retry-After lies past the deadline", len(s.requests()))
	}
}

func TestCancelDuringWait(t *testing.T) {
	s := newScript(t, answer(503, api.CodeStoreUnavailable, 0))
	ctx, cancel := context.WithCancel(context.Background())
	c, _ := s.client(t, Options{BackoffBase: time.Hour, BackoffMax: time.Hour, OnRetry: nil})
	c.onRetry = func(RetryEvent) { cancel() }
	_, err := post(c, ctx)
	if !errors.Is(err, context.Canceled) || ErrorCode(err) != api.CodeStoreUnavailable {
		t.Fatalf("err %v", err)
	}
}

func TestUnreachableServerIsANetworkError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c, err := New(Options{BaseURL: "http://" + addr, MaxAttempts: 3, BackoffBase: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = post(c, context.Background())
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeNetworkError || e.Status != 0 || !e.Retryable || e.Attempts != 3 || e.Err == nil {
		t.Fatalf("err %#v", err)
	}
	var opErr *net.OpError
	if !errors.As(err, &opErr) {
		t.Fatalf("err %v does not carry the transport's error", err)
	}
}

func TestAttemptTimeoutRetries(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	s := newScript(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}, created)
	c, _ := s.client(t, Options{AttemptTimeout: 100 * time.Millisecond})
	var info ResponseInfo
	if _, err := post(c, context.Background(), WithResponseInfo(&info)); err != nil || info.Attempts != 2 {
		t.Fatalf("err %v, info %+v", err, info)
	}
}

func TestCallerKey(t *testing.T) {
	s := newScript(t, created)
	c, _ := s.client(t, Options{})
	if _, err := post(c, context.Background(), WithIdempotencyKey("po-4711-receipt")); err != nil {
		t.Fatal(err)
	}
	if _, err := post(c, context.Background(), WithIdempotencyKey("po-4711-receipt")); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", " lead", "trail ", `"quoted"`, "tab\tkey", "é", strings.Repeat("k", KeySizeMax+1)} {
		if _, err := post(c, context.Background(), WithIdempotencyKey(bad)); !errors.Is(err, ErrInvalidKey) {
			t.Fatalf("key %q: err %v, want ErrInvalidKey", bad, err)
		}
	}
	reqs := s.requests()
	if len(reqs) != 2 || reqs[0].key != "po-4711-receipt" || reqs[1].key != "po-4711-receipt" {
		t.Fatalf("requests %+v", reqs)
	}
}

func TestEachIntentGetsItsOwnKey(t *testing.T) {
	s := newScript(t, created)
	c, _ := s.client(t, Options{})
	seen := map[string]bool{}
	for range 20 {
		var info ResponseInfo
		if _, err := post(c, context.Background(), WithResponseInfo(&info)); err != nil {
			t.Fatal(err)
		}
		if seen[info.Key] {
			t.Fatalf("key %s used by two intents", info.Key)
		}
		seen[info.Key] = true
	}
}

func TestReadsSendNoKey(t *testing.T) {
	s := newScript(t, answer(503, api.CodeStoreUnavailable, 0), func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(api.HeaderReplayed, "true")
		created(w, r)
	})
	c, _ := s.client(t, Options{})
	var out result
	var info ResponseInfo
	err := c.do(context.Background(), call{method: "GET", path: "/v1/chains/a/head", out: &out}, []CallOption{WithResponseInfo(&info)})
	if err != nil || out.Seq != 3 || !info.Replayed || info.Key != "" {
		t.Fatalf("err %v out %+v info %+v", err, out, info)
	}
	for _, r := range s.requests() {
		if r.key != "" || len(r.body) != 0 || r.contentType != "" {
			t.Fatalf("read sent %+v", r)
		}
	}
}

func TestResponseTooLargeAndUndecodable(t *testing.T) {
	s := newScript(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		w.Write(bytes.Repeat([]byte("x"), 2048))
	})
	c, _ := s.client(t, Options{ResponseSizeMax: 1024})
	if _, err := post(c, context.Background()); ErrorCode(err) != CodeResponseTooLarge || len(s.requests()) != 1 {
		t.Fatalf("err %v after %d requests", err, len(s.requests()))
	}
	c2, _ := s.client(t, Options{})
	_, err := post(c2, context.Background())
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeUnexpectedResponse || e.Status != 200 || e.Retryable {
		t.Fatalf("err %v", err)
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	for _, o := range []Options{
		{}, {BaseURL: "127.0.0.1:8080"}, {BaseURL: "ftp://h"}, {BaseURL: "http://h?x=1"},
		{BaseURL: "http://h", MaxAttempts: -1}, {BaseURL: "http://h", MaxAttempts: MaxAttemptsMax + 1},
		{BaseURL: "http://h", BackoffBase: -1}, {BaseURL: "http://h", Token: "a\nb"},
	} {
		if _, err := New(o); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("New(%+v) = %v, want ErrInvalidOptions", o, err)
		}
	}
	c, err := New(Options{BaseURL: "https://erp.example/ledger/"})
	if err != nil || c.base != "https://erp.example/ledger" || c.maxAttempts != MaxAttemptsDefault {
		t.Fatalf("%v %+v", err, c)
	}
}

func TestBackoffCeiling(t *testing.T) {
	base, limit := 100*time.Millisecond, time.Second
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		if got := backoffCeiling(i+1, base, limit); got != w*time.Millisecond {
			t.Errorf("retry %d: ceiling %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
	if got := backoffCeiling(1000, time.Hour, 24*time.Hour); got != 24*time.Hour {
		t.Errorf("a large retry number: %v", got)
	}
	for range 1000 {
		if j := jitter(time.Millisecond); j < 0 || j >= time.Millisecond {
			t.Fatalf("jitter %v outside [0, 1ms)", j)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                                0,
		"0":                               0,
		"3":                               3 * time.Second,
		" 120 ":                           2 * time.Minute,
		"-1":                              0,
		"1.5":                             0,
		"soon":                            0,
		"99999999999999999999999":         retryAfterMaxParsed,
		"86401":                           retryAfterMaxParsed,
		"Tue, 01 Dec 2026 12:00:30 GMT":   30 * time.Second,
		"Tue, 01 Dec 2026 11:00:00 GMT":   0,
		"Tuesday, 01-Dec-26 12:01:00 GMT": time.Minute,
	} {
		if got := parseRetryAfter(v, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestDecodeProblem(t *testing.T) {
	e := decodeProblem(409, "application/problem+json; charset=utf-8",
		[]byte(`{"type":"urn:ledgerworks:problem:IDEMPOTENCY_CONFLICT","title":"Conflict","status":409,"code":"IDEMPOTENCY_CONFLICT","detail":"held","existing_seq":12}`))
	if e.Code != api.CodeIdempotencyConflict || e.Title != "Conflict" || e.Detail != "held" || len(e.Extra) != 1 {
		t.Fatalf("%+v", e)
	}
	if seq, ok := e.ExtraInt64("existing_seq"); !ok || seq != 12 {
		t.Fatalf("existing_seq %d", seq)
	}
	// The API writes 64-bit integers as strings; both forms are read, and
	// a member that is neither is not an integer.
	quoted := decodeProblem(409, api.MediaProblem,
		[]byte(`{"status":409,"code":"IDEMPOTENCY_CONFLICT","existing_seq":"18446744073709551615","t":"-9","x":"1e3","y":true}`))
	if seq, ok := quoted.ExtraUint64("existing_seq"); !ok || seq != 1<<64-1 {
		t.Fatalf("existing_seq %d %v", seq, ok)
	}
	if v, ok := quoted.ExtraInt64("t"); !ok || v != -9 {
		t.Fatalf("t %d %v", v, ok)
	}
	for _, name := range []string{"x", "y", "missing"} {
		if _, ok := quoted.ExtraInt64(name); ok {
			t.Fatalf("%s read as an integer", name)
		}
	}
	if _, ok := quoted.ExtraInt64("existing_seq"); ok {
		t.Fatal("2^64-1 read as an int64")
	}
	for _, tc := range []struct{ ct, body string }{
		{"text/html", "<html>\x00bad gateway\n</html>"},
		{"application/problem+json", `{"title":"no code"}`},
		{"application/problem+json", `{"code":7}`},
		{"application/problem+json", `[1,2]`},
		{"", ""},
	} {
		e := decodeProblem(502, tc.ct, []byte(tc.body))
		if e.Code != CodeUnexpectedResponse || e.Status != 502 || strings.ContainsAny(e.Detail, "\x00\n") {
			t.Errorf("%q %q: %+v", tc.ct, tc.body, e)
		}
	}
}

func TestErrorMessage(t *testing.T) {
	e := &Error{Method: "POST", Path: "/v1/purchase-receipts", Status: 409, Code: api.CodeKeyReused, Detail: "another body", Attempts: 1}
	if got, want := e.Error(), "client: POST /v1/purchase-receipts: 409 KEY_REUSED_WITH_DIFFERENT_REQUEST: another body"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
}

// REQUEST_IN_PROGRESS answers do not count toward MaxAttempts: a key held
// by another attempt is waited for, up to InProgressWaitMax in all.
func TestInProgressIsWaitedForBeyondMaxAttempts(t *testing.T) {
	inProgress := answer(409, api.CodeInProgress, time.Second)
	s := newScript(t, inProgress, inProgress, answer(503, api.CodeStorage, 0), created)
	c, events := s.client(t, Options{MaxAttempts: 2})
	if _, err := post(c, context.Background()); err != nil {
		t.Fatalf("after %d requests: %v", len(s.requests()), err)
	}
	if n := len(s.requests()); n != 4 || len(*events) != 3 {
		t.Fatalf("%d requests, %d retry events: want 4 and 3", n, len(*events))
	}
	// Without Retry-After an in-progress answer counts as an attempt.
	bare := newScript(t, answer(409, api.CodeInProgress, 0), created)
	c, _ = bare.client(t, Options{MaxAttempts: 1})
	if _, err := post(c, context.Background()); ErrorCode(err) != api.CodeInProgress || len(bare.requests()) != 1 {
		t.Fatalf("MaxAttempts 1: %v after %d requests", err, len(bare.requests()))
	}
}

func TestInProgressWaitMaxEndsTheCall(t *testing.T) {
	s := newScript(t, answer(409, api.CodeInProgress, time.Second))
	c, events := s.client(t, Options{InProgressWaitMax: 1500 * time.Millisecond})
	_, err := post(c, context.Background())
	var e *Error
	if !errors.As(err, &e) || e.Code != api.CodeInProgress || !e.Retryable {
		t.Fatalf("err %v, want the REQUEST_IN_PROGRESS answer", err)
	}
	if len(s.requests()) != 2 || len(*events) != 1 {
		t.Fatalf("%d requests, %d retry events: want 2 and 1 (a second wait of 1 s is over the 1.5 s)", len(s.requests()), len(*events))
	}
	one := newScript(t, answer(409, api.CodeInProgress, time.Second), created)
	c, _ = one.client(t, Options{MaxAttempts: 1})
	if _, err := post(c, context.Background()); ErrorCode(err) != api.CodeInProgress || len(one.requests()) != 1 {
		t.Fatalf("MaxAttempts 1 retried: %v after %d requests", err, len(one.requests()))
	}
}
