package pgstore

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
)

// TestHeaderJSON: headerJSON writes what json.Marshal writes for every
// header, the one it encodes itself and keeps included, and a kept
// encoding is answered only for the same key and value.
func TestHeaderJSON(t *testing.T) {
	s := &Store{}
	headers := []http.Header{
		{"Content-Type": {"application/json"}},
		{"Content-Type": {"application/json"}}, // the kept one
		{"Content-Type": {"application/problem+json"}},
		{"Content-Type": {"text/html; charset=utf-8"}},
		{"Location": {"/v1/a?b=1&c=2"}}, // & is escaped for HTML
		{"X-A": {"<b>"}},
		{"X-Quote": {`say "hi"`}},
		{"X-Backslash": {`a\b`}},
		{"X-Control": {"a\tb"}},
		{"X-Utf8": {"café"}},
		{"X-Empty": {""}},
		{"X-Two": {"a", "b"}},
		{"X-None": {}},
		{"A": {"1"}, "B": {"2"}},
		{},
		nil,
	}
	for _, h := range headers {
		got, err := s.headerJSON(h)
		if err != nil {
			t.Fatalf("headerJSON(%v): %v", h, err)
		}
		want, _ := json.Marshal(h)
		if !bytes.Equal(got, want) {
			t.Errorf("headerJSON(%v) = %s, want %s", h, got, want)
		}
	}
	// After a header of another key, and after another value of the same
	// key, the kept encoding is not answered for them.
	for _, h := range []http.Header{{"Content-Type": {"application/json"}}, {"X-Other": {"application/json"}},
		{"Content-Type": {"application/xml"}}, {"Content-Type": {"application/json"}}} {
		got, _ := s.headerJSON(h)
		if want, _ := json.Marshal(h); !bytes.Equal(got, want) {
			t.Errorf("headerJSON(%v) = %s, want %s", h, got, want)
		}
	}
}

// TestHeaderJSONAllocs: the header every write of a server answers with is
// encoded without an allocation once kept.
func TestHeaderJSONAllocs(t *testing.T) {
	s := &Store{}
	h := http.Header{"Content-Type": {"application/json"}}
	if _, err := s.headerJSON(h); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = s.headerJSON(h) }); n != 0 {
		t.Fatalf("headerJSON of the kept header: %v allocations, want 0", n)
	}
}
