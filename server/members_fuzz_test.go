package server

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/idempotency"
)

// decodeAs decodes body as the handlers do, into a new value of t.
func decodeAs(t reflect.Type, body []byte) (any, error) {
	c := &call{r: httptest.NewRequest("POST", "/", nil), body: body, read: true}
	v := reflect.New(t)
	if err := c.decode(v.Interface()); err != nil {
		return nil, err
	}
	return v.Elem().Interface(), nil
}

// reorder writes the JSON document data again with every object's members
// in reverse order and every string escaped as encoding/json escapes it: a
// body of the same canonical form written otherwise. ok is false when data
// is not one JSON document.
func reorder(data []byte) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var out bytes.Buffer
	var walk func(depth int) bool
	walk = func(depth int) bool {
		tok, err := dec.Token()
		if err != nil || depth > 64 {
			return false
		}
		switch d := tok.(type) {
		case json.Delim:
			if d == '[' {
				out.WriteByte('[')
				for i := 0; dec.More(); i++ {
					if i > 0 {
						out.WriteByte(',')
					}
					if !walk(depth + 1) {
						return false
					}
				}
				_, err := dec.Token()
				out.WriteByte(']')
				return err == nil
			}
			var members [][]byte
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return false
				}
				saved := out
				out = bytes.Buffer{}
				kb, _ := json.Marshal(k)
				out.Write(kb)
				out.WriteByte(':')
				if !walk(depth + 1) {
					return false
				}
				members = append(members, out.Bytes())
				out = saved
			}
			if _, err := dec.Token(); err != nil {
				return false
			}
			out.WriteByte('{')
			for i := len(members) - 1; i >= 0; i-- {
				out.Write(members[i])
				if i > 0 {
					out.WriteByte(',')
				}
			}
			out.WriteByte('}')
			return true
		case json.Number:
			out.WriteString(d.String())
		default:
			b, _ := json.Marshal(d)
			out.Write(b)
		}
		return true
	}
	if !walk(0) {
		return nil, false
	}
	if _, err := dec.Token(); err == nil {
		return nil, false
	}
	return out.Bytes(), true
}

// Two bodies the replay guard hashes alike decode to the same request, or
// are both refused, and checkMembers reads every valid JSON document: a replay answers only the request that was made. Each
// input is checked against its canonical form and its members reversed,
// and against the second input, as a stock movement, a raw entry and a
// journal posting (nested objects in an array).
func FuzzBodyHashDecode(f *testing.F) {
	for _, seed := range [][2]string{
		{`{"item":"SKU-1","location":"WH-1","quantity":"1","Quantity":"500"}`, `{"item":"SKU-1","location":"WH-1","Quantity":"500","quantity":"1"}`},
		{`{"type":"a","Type":"b","payload":"e30="}`, `{"Type":"b","type":"a","payload":"e30="}`},
		{`{"date":"2026-01-02","lines":[{"account":"1400","amount":"1","Amount":"2"}]}`, `{"lines":[{"Amount":"2","account":"1400","amount":"1"}],"date":"2026-01-02"}`},
		{`{"item":"SKU-1","location":"WH-1","quantity":"1"}`, `{"quantity":"1","location":"WH-1","item":"SKU-1"}`},
		{`{"type":"a","payload":"e30=","type":"b"}`, `{"payload":"e30=","type":"b","type":"a"}`},
		{`{"item":"\u0053KU","quantity":"1","quantit\u0079":"2"}`, `{"item":"SKU"}`},
		{`{"type":"a","\u212Aey":"x"}`, `{"type":"a","key":"x"}`},
	} {
		f.Add(seed[0], seed[1])
	}
	types := []reflect.Type{reflect.TypeFor[api.StockMovementRequest](), reflect.TypeFor[api.AppendRequest](),
		reflect.TypeFor[api.FinPostingRequest]()}
	fields := func(b []byte) []byte {
		out, _ := idempotency.DefaultRequestFields(nil, b)
		return out
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		bodies := [][]byte{[]byte(a), []byte(b), fields([]byte(a))}
		if r, ok := reorder([]byte(a)); ok {
			bodies = append(bodies, r)
		}
		for _, typ := range types {
			if json.Valid(bodies[0]) && checkMembers(bodies[0], typ) == errNotJSON {
				t.Fatalf("%q: valid JSON that checkMembers cannot read", bodies[0])
			}
			first, firstErr := decodeAs(typ, bodies[0])
			for _, other := range bodies[1:] {
				if !bytes.Equal(fields(bodies[0]), fields(other)) {
					continue
				}
				v, err := decodeAs(typ, other)
				if (err == nil) != (firstErr == nil) || err == nil && !reflect.DeepEqual(first, v) {
					t.Fatalf("%s: same hash, different requests:\n%q → %+v %v\n%q → %+v %v",
						typ, bodies[0], first, firstErr, other, v, err)
				}
			}
			if firstErr != nil && strings.Contains(firstErr.Error(), "Go ") {
				t.Fatalf("%q: the error names a Go type: %v", bodies[0], firstErr)
			}
		}
	})
}
