package client

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func FuzzDecodeProblem(f *testing.F) {
	f.Add(409, "application/problem+json", []byte(`{"type":"urn:ledgerworks:problem:KEY_REUSED_WITH_DIFFERENT_REQUEST","status":409,"code":"KEY_REUSED_WITH_DIFFERENT_REQUEST","detail":"d"}`))
	f.Add(502, "text/html", []byte("<html>bad gateway</html>"))
	f.Add(429, "application/json; charset=utf-8", []byte(`{"code":"RATE_LIMITED","existing_seq":"x","title":3}`))
	f.Add(409, "application/problem+json", []byte(`{"code":"IDEMPOTENCY_CONFLICT","existing_seq":"18446744073709551615","n":-1}`))
	f.Fuzz(func(t *testing.T, status int, contentType string, body []byte) {
		e := decodeProblem(status, contentType, body)
		if e.Code == "" || e.Status != status {
			t.Fatalf("code %q status %d", e.Code, e.Status)
		}
		if e.Code == CodeUnexpectedResponse && e.Extra == nil {
			if !utf8.ValidString(e.Detail) || strings.ContainsAny(e.Detail, "\x00\r\n") || len(e.Detail) > 3*problemDetailMax {
				t.Fatalf("detail %q", e.Detail)
			}
		}
		for _, name := range []string{"type", "title", "status", "code", "detail"} {
			if _, ok := e.Extra[name]; ok {
				t.Fatalf("standard member %s in Extra", name)
			}
		}
		// existing_seq is read in either form, and a value read as both
		// signed and unsigned is the same number.
		for name := range e.Extra {
			s, okS := e.ExtraInt64(name)
			u, okU := e.ExtraUint64(name)
			if okS && okU && s >= 0 && uint64(s) != u {
				t.Fatalf("%s: int64 %d, uint64 %d", name, s, u)
			}
		}
		_ = e.Error()
	})
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"", "0", "120", "-3", "1e3", "Tue, 01 Dec 2026 12:00:30 GMT", "99999999999999999999"} {
		f.Add(s)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		if d := parseRetryAfter(v, now); d < 0 || d > retryAfterMaxParsed {
			t.Fatalf("parseRetryAfter(%q) = %v", v, d)
		}
	})
}
