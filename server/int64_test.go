package server_test

import (
	"encoding/json"
	"math/big"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/server"
)

// Every 64-bit integer of every body of the route table is tagged
// ,string: JSON numbers are exact in JavaScript only up to 2^53.
func TestInt64FieldsAreStrings(t *testing.T) {
	db := openBolt(t)
	ts := startServer(t, db, server.Options{})
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type, string)
	walk = func(tp reflect.Type, where string) {
		switch tp.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map:
			walk(tp.Elem(), where)
			return
		case reflect.Struct:
		default:
			return
		}
		if seen[tp] {
			return
		}
		seen[tp] = true
		for i := range tp.NumField() {
			f := tp.Field(i)
			tag := f.Tag.Get("json")
			k := f.Type.Kind()
			if (k == reflect.Int64 || k == reflect.Uint64) && !strings.Contains(tag, ",string") {
				t.Errorf("%s.%s (%s, %s): a 64-bit integer not encoded as a string", tp.Name(), f.Name, k, where)
			}
			if k == reflect.Int || k == reflect.Uint {
				// int is 64-bit: only the bounded counters and versions below may be numbers.
				if !map[string]bool{"Status": true, "Attempts": true, "Attempt": true, "PostgresSchema": true}[f.Name] {
					t.Errorf("%s.%s (%s): an int that is neither a status nor an attempt count", tp.Name(), f.Name, where)
				}
			}
			walk(f.Type, where)
		}
	}
	for _, rt := range ts.srv.Routes() {
		if rt.Request != nil {
			walk(reflect.TypeOf(rt.Request), rt.ID)
		}
		if rt.Response != nil {
			walk(reflect.TypeOf(rt.Response), rt.ID)
		}
	}
	walk(reflect.TypeOf(api.Problem{}), "problem")
	if len(seen) < 40 {
		t.Fatalf("walked %d types: the route table lost its bodies", len(seen))
	}

	// The document says so: every *_unix_nano and seq property is a string
	// of format int64, and no integer property says int64 or uint64.
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]map[string]any `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	ts.do(http.MethodGet, "/openapi.json", "", "", nil).decode(t, http.StatusOK, &doc)
	strings64 := 0
	for name, s := range doc.Components.Schemas {
		for prop, sc := range s.Properties {
			if sc["type"] == "integer" && sc["format"] != nil {
				t.Errorf("%s.%s: an integer of format %v", name, prop, sc["format"])
			}
			if strings.HasSuffix(prop, "_unix_nano") || strings.HasSuffix(prop, "seq") {
				if sc["type"] != "string" || sc["format"] != "int64" || sc["pattern"] == nil {
					t.Errorf("%s.%s: %v, want a string of format int64", name, prop, sc)
				}
			}
			if sc["type"] == "string" && sc["format"] == "int64" {
				strings64++
			}
		}
	}
	if strings64 < 40 {
		t.Errorf("%d string int64 properties in the document", strings64)
	}
}

var quotedDigits = regexp.MustCompile(`^"-?[0-9]+"$`)

// Over HTTP the integers are strings of the exact value; a number where a
// 64-bit integer belongs is refused with INVALID_INPUT and writes nothing.
func TestInt64OverHTTP(t *testing.T) {
	db := openBolt(t)
	ts := startServer(t, db, server.Options{})
	token := ts.key("acme", allScopes...)
	fixture(t, ts, token)

	r := ts.do(http.MethodPost, "/v1/chains/big/entries", token, "k-big", api.AppendRequest{Type: "t/v1", Payload: []byte("x")})
	var raw map[string]json.RawMessage
	r.decode(t, http.StatusCreated, &raw)
	for _, f := range []string{"seq", "time_unix_nano"} {
		if !quotedDigits.Match(raw[f]) {
			t.Errorf("append's %s is %s, want a string of digits", f, raw[f])
		}
	}
	var appended api.AppendResponse
	r.decode(t, http.StatusCreated, &appended)
	var got api.Entry
	ts.do(http.MethodGet, "/v1/chains/big/entries/1", token, "", nil).decode(t, http.StatusOK, &got)
	if got.TimeUnixNano != appended.TimeUnixNano || got.TimeUnixNano < 1<<53 {
		t.Fatalf("entry time %d, append's %d", got.TimeUnixNano, appended.TimeUnixNano)
	}
	// The string is the exact value, which a float64 would round.
	n, _ := new(big.Int).SetString(strings.Trim(string(raw["time_unix_nano"]), `"`), 10)
	if n.Int64() != got.TimeUnixNano {
		t.Fatalf("time %s, entry %d", n, got.TimeUnixNano)
	}

	// A stock reversal names its seq as a string; a number is refused.
	var receipt api.StockResult
	ts.do(http.MethodPost, "/v1/stock/receipts", token, "k-rcpt", api.StockMovementRequest{Item: "SKU-1", Location: "WH-1", Quantity: "1"}).
		decode(t, http.StatusCreated, &receipt)
	seq := receipt.Entries[0].Seq
	bad := ts.do(http.MethodPost, "/v1/stock/reversals", token, "k-rev-num", `{"chain":"stock/SKU-1/WH-1","seq":`+itoa(int(seq))+`}`)
	p := bad.wantProblem(t, http.StatusBadRequest, api.CodeInvalidInput)
	if !strings.Contains(p.Detail, "JSON string") {
		t.Errorf("detail %q does not say the integer is a string", p.Detail)
	}
	var history api.StockHistory
	ts.do(http.MethodGet, "/v1/stock/history/SKU-1/WH-1", token, "", nil).decode(t, http.StatusOK, &history)
	if n := len(history.Entries); n != 2 { // the fixture's receipt and this one
		t.Fatalf("%d entries after a refused reversal", n)
	}
	var reversed api.StockResult
	ts.do(http.MethodPost, "/v1/stock/reversals", token, "k-rev-str", `{"chain":"stock/SKU-1/WH-1","seq":"`+itoa(int(seq))+`"}`).
		decode(t, http.StatusCreated, &reversed)
	if reversed.Entries[0].OriginalSeq != seq {
		t.Fatalf("reversal of %d, want %d", reversed.Entries[0].OriginalSeq, seq)
	}

	// A conflict's existing_seq is a string too: a posting reversed twice
	// with another memo.
	var posting api.FinPosting
	ts.do(http.MethodPost, "/v1/fin/books/main/postings", token, "k-post", api.FinPostingRequest{Date: "2026-11-02",
		Lines: []api.PostingLine{{Account: "1400", Side: "debit", Amount: "1.00", Currency: "EUR"},
			{Account: "2100", Side: "credit", Amount: "1.00", Currency: "EUR"}}}).decode(t, http.StatusCreated, &posting)
	var reversal api.FinPosting
	ts.do(http.MethodPost, "/v1/fin/books/main/reversals", token, "k-rev-1", api.FinReversalRequest{Seq: posting.Seq, Memo: "a"}).
		decode(t, http.StatusCreated, &reversal)
	conflict := ts.do(http.MethodPost, "/v1/fin/books/main/reversals", token, "k-rev-2", api.FinReversalRequest{Seq: posting.Seq, Memo: "b"})
	conflict.wantProblem(t, http.StatusConflict, api.CodeIdempotencyConflict)
	if err := json.Unmarshal(conflict.body, &raw); err != nil {
		t.Fatal(err)
	}
	if want := `"` + itoa(int(reversal.Seq)) + `"`; string(raw["existing_seq"]) != want {
		t.Fatalf("existing_seq %s, want %s", raw["existing_seq"], want)
	}
}

// The document's seq parameters (path and query) are strings of digits
// too, so that a generated client never rounds one.
func TestInt64Parameters(t *testing.T) {
	db := openBolt(t)
	ts := startServer(t, db, server.Options{})
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct {
				Name   string         `json:"name"`
				In     string         `json:"in"`
				Schema map[string]any `json:"schema"`
			} `json:"parameters"`
		} `json:"paths"`
	}
	ts.do(http.MethodGet, "/openapi.json", "", "", nil).decode(t, http.StatusOK, &doc)
	seqs := 0
	for path, item := range doc.Paths {
		for method, op := range item {
			for _, p := range op.Parameters {
				// The dead letters' from is a message id, not a seq.
				cursor := p.Name == "from" && path == "/v1/outbox/dead"
				if (p.Name == "seq" || p.Name == "from" || p.Name == "at_seq") && !cursor {
					seqs++
					if p.Schema["type"] != "string" || p.Schema["format"] != "int64" {
						t.Errorf("%s %s: parameter %s (%s) is %v", method, path, p.Name, p.In, p.Schema)
					}
				}
				if p.Schema["type"] == "integer" && p.Name != "limit" {
					t.Errorf("%s %s: parameter %s is an integer", method, path, p.Name)
				}
			}
		}
	}
	if seqs < 7 {
		t.Fatalf("%d seq parameters in the document", seqs)
	}
}
