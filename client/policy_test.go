package client

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/internal/problem"
)

// reply is one scripted answer of the policy test's server.
type reply struct {
	status int
	code   string
}

var replies = []reply{
	{201, ""}, {200, ""},
	{409, api.CodeInProgress}, {429, api.CodeRateLimited}, {502, "BAD_GATEWAY"}, {503, api.CodeStoreUnavailable},
	{504, "GATEWAY_TIMEOUT"}, {0, CodeNetworkError},
	{409, api.CodeKeyReused}, {409, api.CodeIdempotencyConflict}, {409, api.CodeRequestFailed}, {400, api.CodeInvalidInput},
	{401, api.CodeUnauthenticated}, {404, api.CodeNotFound}, {500, api.CodeStorage},
}

// TestRetryPolicyMatchesModel sends one call against a server that plays
// a random script of answers, and checks the client against the policy
// written plainly: it stops at the first success or final answer, or
// after MaxAttempts, and sends one key and one body throughout.
func TestRetryPolicyMatchesModel(t *testing.T) {
	var mu sync.Mutex
	var script []reply
	var seen []seenRequest
	s := newScript(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n := len(seen)
		seen = append(seen, seenRequest{key: r.Header.Get(api.HeaderIdempotencyKey)})
		rep := script[min(n, len(script)-1)]
		mu.Unlock()
		// A fresh connection for every attempt: Go's transport resends a
		// keyed request once by itself when a kept-alive connection dies
		// before any answer, which would play two answers of the script
		// within one attempt of the client.
		w.Header().Set("Connection", "close")
		switch {
		case rep.status == 0:
			hangUp(w, r)
		case rep.code == "":
			created(w, r)
		default:
			problem.Write(w, problem.Problem{Status: rep.status, Code: rep.code})
		}
	})
	rapid.Check(t, func(rt *rapid.T) {
		drawn := rapid.SliceOfN(rapid.SampledFrom(replies), 1, 8).Draw(rt, "script")
		maxAttempts := rapid.IntRange(1, 6).Draw(rt, "maxAttempts")
		mu.Lock()
		script, seen = drawn, nil
		mu.Unlock()
		c, _ := s.client(t, Options{MaxAttempts: maxAttempts, BackoffBase: time.Microsecond, BackoffMax: time.Microsecond})
		_, err := post(c, context.Background())

		// The model.
		attempts, want := 0, reply{}
		for attempts < maxAttempts {
			want = script[min(attempts, len(script)-1)]
			attempts++
			if want.code == "" || !(want.status == 0 || retryableStatus(want.status, want.code)) {
				break
			}
		}
		mu.Lock()
		got := append([]seenRequest(nil), seen...)
		mu.Unlock()
		if len(got) != attempts {
			rt.Fatalf("%d attempts, model %d (script %v)", len(got), attempts, script)
		}
		for _, r := range got {
			if r.key != got[0].key || r.key == "" {
				rt.Fatalf("keys %v", got)
			}
		}
		var e *Error
		switch {
		case want.code == "":
			if err != nil {
				rt.Fatalf("model succeeds, client: %v", err)
			}
		case err == nil || ErrorCode(err) != want.code:
			rt.Fatalf("client %v, model code %s", err, want.code)
		}
		if err != nil {
			e = err.(*Error)
			if e.Attempts != attempts || e.Retryable != (want.status == 0 || retryableStatus(want.status, want.code)) {
				rt.Fatalf("error %+v, model attempts %d", e, attempts)
			}
		}
	})
}
