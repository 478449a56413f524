package idempotency

import (
	"reflect"
	"strings"
	"testing"
)

// The guard's default hash, canonicalised straight into the hash's input
// from pooled buffers, equals RequestHash of DefaultRequestFields, for
// JSON, for what is not JSON, and for nested objects that reuse the
// members' scratch space.
func FuzzDefaultRequestHash(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[true,null,"x"]}`, `{ "a" : { "d":1.50, "c":"\u00e9", "b":{"z":1,"y":2} }, "0":[{"k":1,"j":2}] }`,
		`[]`, `"s"`, `{"a":1,"a":2}`, `{"a":`, "\"\xff\"", ``, `not json`, `{"\u0041":1,"A":2}`,
		`{"` + strings.Repeat("k", 2000) + `":[` + strings.Repeat(`{"b":1,"a":2},`, 300) + `0]}`} {
		f.Add("POST /payments", []byte(s))
	}
	f.Fuzz(func(t *testing.T, op string, body []byte) {
		fields, _ := DefaultRequestFields(nil, body)
		want := RequestHash(op, fields)
		for range 2 { // the second run reuses the pooled buffers
			if got := requestHash(op, body, true); got != want {
				t.Fatalf("requestHash(%q, %q) = %x, RequestHash of the default fields %x", op, body, got, want)
			}
		}
	})
}

// encodedRecordLen is the exact length of encodeRecord's form, which
// putFinal allocates once.
func TestEncodedRecordLen(t *testing.T) {
	recs := []Record{
		{Status: StatusProcessing, Token: "t1"},
		{Status: StatusFailed, Token: "t2", Failure: "boom", Attempt: 3},
		{Status: StatusSuccess, Token: "t3", Response: &Response{Status: 201, Body: []byte(`{"seq":1}`),
			Header: map[string][]string{"Content-Type": {"application/json"}, "Link": {"<a>", "<b>"}}}},
		{Status: StatusSuccess, Response: &Response{Status: 204}},
	}
	for _, r := range recs {
		if got, want := encodedRecordLen(&r), len(encodeRecord(nil, &r)); got != want {
			t.Errorf("encodedRecordLen(%+v) = %d, encoded %d bytes", r, got, want)
		}
		dec, err := decodeRecord(r.Scope, encodeRecord(nil, &r))
		if err != nil || dec.Status != r.Status || dec.Token != r.Token {
			t.Errorf("decodeRecord(encodeRecord(%+v)) = %+v, %v", r, dec, err)
		}
	}
}

// decodeRecord rejects what is not a record without panicking, and what it
// accepts encodes back to a record it decodes the same.
func FuzzDecodeRecord(f *testing.F) {
	recs := []Record{
		{Status: StatusFailed, Token: "t", Failure: "boom", Attempt: 2},
		{Status: StatusSuccess, Token: "t", Response: &Response{Status: 201, Body: []byte(`{"seq":1}`),
			Header: map[string][]string{"Content-Type": {"application/json"}, "Link": {"<a>", "<b>"}}}},
	}
	for _, r := range recs {
		b := encodeRecord(nil, &r)
		f.Add(b)
		f.Add(b[:len(b)-1])
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := decodeRecord(Scope{}, b)
		if err != nil {
			return
		}
		again, err := decodeRecord(Scope{}, encodeRecord(nil, &rec))
		if err != nil || !reflect.DeepEqual(again, rec) {
			t.Fatalf("decodeRecord(%x) = %+v; encoded and decoded again: %+v, %v", b, rec, again, err)
		}
	})
}
