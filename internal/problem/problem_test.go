package problem

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"
)

func TestWrite(t *testing.T) {
	rec := httptest.NewRecorder()
	Write(rec, Problem{Status: 429, Code: "RATE_LIMITED", Detail: "slow down", RetryAfter: 1500 * time.Millisecond,
		Extra: map[string]any{"existing_seq": 7}})
	if rec.Code != 429 || rec.Header().Get("Content-Type") != ContentType || rec.Header().Get("Retry-After") != "2" {
		t.Fatalf("status %d, headers %v", rec.Code, rec.Header())
	}
	var got map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"type": TypePrefix + "RATE_LIMITED", "title": "Too Many Requests", "status": 429.0,
		"code": "RATE_LIMITED", "detail": "slow down", "existing_seq": 7.0}
	if len(got) != len(want) {
		t.Fatalf("body %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s = %v, want %v", k, got[k], v)
		}
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int64{time.Nanosecond: 1, time.Second: 1, time.Second + 1: 2, 0: 1} {
		if got := RetryAfterSeconds(d); got != want {
			t.Errorf("RetryAfterSeconds(%v) = %d, want %d", d, got, want)
		}
	}
}
