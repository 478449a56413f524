package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/api"
)

// chainRoute reads a chain route's name and seq from the end of the path,
// so the route it finds, its name and its seq always rebuild the path, and
// a name may be anything (even "a/entries"); it never panics.
func FuzzChainRoute(f *testing.F) {
	for _, seed := range []string{"orders/entries", "a/b/entries/5", "x/head", "entries", "a/entries/entries",
		"/entries", "", "a//head", "entries/1", "a/entries/entries/7", "héllo/%2F/head"} {
		f.Add(seed)
	}
	routes := map[string]*Route{}
	for _, p := range []string{"/v1/chains/{name}/entries", "/v1/chains/{name}/entries/{seq}", "/v1/chains/{name}/head"} {
		rt := &Route{Method: http.MethodGet, Path: p}
		routes[rt.routeKey()] = rt
	}
	f.Fuzz(func(t *testing.T, rest string) {
		rt, name, seq := chainRoute(routes, http.MethodGet, rest)
		if rt == nil {
			if seq != "" {
				t.Fatalf("%q: no route but seq %q", rest, seq)
			}
			return
		}
		suffix := strings.TrimPrefix(rt.Path, "/v1/chains/{name}")
		rebuilt := name + strings.Replace(suffix, "{seq}", seq, 1)
		if rebuilt != rest {
			t.Fatalf("%q: route %s name %q seq %q rebuild %q", rest, rt.Path, name, seq, rebuilt)
		}
		if !strings.Contains(suffix, "{seq}") && seq != "" {
			t.Fatalf("%q: route %s with seq %q", rest, rt.Path, seq)
		}
	})
}

// The hand-written encoding of an append's answer is the bytes
// encoding/json writes (marshal's general path), whatever the chain name.
func FuzzAppendResponseJSON(f *testing.F) {
	for _, seed := range []string{"orders", "a/b", `q"uote`, `back\slash`, "tab\there", "héllo", "\u2028", "<&>", "\xff", ""} {
		f.Add(seed, uint64(7), int64(-1))
	}
	f.Fuzz(func(t *testing.T, name string, seq uint64, at int64) {
		a := api.AppendResponse{Chain: name, Seq: seq, Hash: strings.Repeat("ab", 32), TimeUnixNano: at}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(a); err != nil {
			t.Fatal(err)
		}
		if got := marshal(a); !bytes.Equal(got, b.Bytes()) {
			t.Fatalf("marshal %q\nwant %q", got, b.Bytes())
		}
	})
}

// A raw append's body read without a decoder (parseAppendBody) is the
// request decode reads from the same bytes, and a body decode refuses is
// never read by it.
func FuzzAppendBody(f *testing.F) {
	for _, seed := range []string{`{"type":"load/v1","payload":"eyJuIjoxfQ=="}`, ` { "payload" : "" , "type" : "t" } `,
		`{"type":"t"}`, `{}`, `{"type":"a","type":"b"}`, `{"Type":"t","payload":"AA=="}`, `{"type":"t","payload":"AA="}`,
		`{"type":"t","payload":"A\nA=="}`, `{"type":"t\u0041"}`, `{"type":"t","payload":null}`, `{"type":"t","x":1}`,
		`{"type":"t"} {}`, `{"type":"t",}`, "{\"type\":\"\xff\"}", `[]`, ``, `{"payload":"AAB="}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var fast api.AppendRequest
		if !parseAppendBody(body, &fast) {
			return
		}
		r := httptest.NewRequest(http.MethodPost, "/v1/chains/c/entries", bytes.NewReader(body))
		r.Header.Set("Content-Type", api.MediaJSON)
		var general api.AppendRequest
		if err := (&call{r: r}).decode(&general); err != nil {
			t.Fatalf("%q: read without a decoder as %+v, refused by decode: %v", body, fast, err)
		}
		if !reflect.DeepEqual(fast, general) {
			t.Fatalf("%q: read without a decoder as %+v, decoded as %+v", body, fast, general)
		}
	})
}

// The bodies clients send are read without a decoder: the fast path is
// taken, not only correct when taken.
func TestAppendBodyCommonForms(t *testing.T) {
	for body, want := range map[string]api.AppendRequest{
		`{"type":"load/v1","payload":"eyJuIjoxfQ=="}`:       {Type: "load/v1", Payload: []byte(`{"n":1}`)},
		"{\n  \"payload\": \"\",\n  \"type\": \"x y\"\n}\n": {Type: "x y", Payload: []byte{}},
		`{"type":"order.created"}`:                          {Type: "order.created"},
	} {
		var got api.AppendRequest
		if !parseAppendBody([]byte(body), &got) || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: read %v as %+v, want %+v", body, parseAppendBody([]byte(body), &api.AppendRequest{}), got, want)
		}
	}
}
