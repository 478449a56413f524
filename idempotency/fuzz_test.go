package idempotency_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ledgerworks/ledger/idempotency"
	"github.com/ledgerworks/ledger/idempotency/idempotencytest"
)

// FuzzParseKey: the parser never panics; an accepted key is within the
// limits and forms a valid scope; a bare key and its quoted form agree.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"abc", `"abc"`, `"a\"b\\c"`, "", `""`, " k ", "a\x00b", `"a\x"`, `"unterminated`,
		strings.Repeat("k", 255), strings.Repeat("k", 256), "ключ", `"ключ"`, "\x7f", "a\tb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		key, err := idempotency.ParseKey(v)
		if err != nil {
			if idempotency.ErrorCode(err) != idempotency.CodeKeyInvalid {
				t.Fatalf("ParseKey(%q): error %v without KEY_INVALID", v, err)
			}
			return
		}
		if key == "" || len(key) > idempotency.KeySizeMax || !utf8.ValidString(key) {
			t.Fatalf("ParseKey(%q) = %q outside the limits", v, key)
		}
		if err := (idempotency.Scope{Operation: "op", User: "u", Key: key}).Validate(); err != nil {
			t.Fatalf("ParseKey(%q) = %q, not a valid scope: %v", v, key, err)
		}
		ascii := true
		for i := 0; i < len(key); i++ {
			ascii = ascii && key[i] >= 0x20 && key[i] <= 0x7e
		}
		if ascii {
			quoted := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
			if back, err := idempotency.ParseKey(quoted); err != nil || back != key {
				t.Fatalf("quoted form %q of %q parses to %q, %v", quoted, key, back, err)
			}
		}
	})
}

// FuzzCanonicalJSON: canonical output is JSON meaning the same as the
// input, and canonicalising it again changes nothing.
func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[true,null,"x"]}`, `{ "a" : { "d":1.50, "c":"\u00e9" } }`, `[]`, `"s"`, `1e3`,
		`{"a":1,"a":2}`, `{"a":`, `[1,2]x`, "\"\xff\"", `{"<":"&"}`, `-0`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := idempotency.CanonicalJSON(data)
		if err != nil {
			return
		}
		if !json.Valid(c) {
			t.Fatalf("CanonicalJSON(%q) = %q, not JSON", data, c)
		}
		again, err := idempotency.CanonicalJSON(c)
		if err != nil || !bytes.Equal(again, c) {
			t.Fatalf("not idempotent: %q -> %q -> %q (%v)", data, c, again, err)
		}
		if !reflect.DeepEqual(decode(t, data), decode(t, c)) {
			t.Fatalf("meaning changed: %q -> %q", data, c)
		}
	})
}

func decode(t *testing.T, b []byte) any {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return v
}

func BenchmarkCanonicalJSON(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := idempotency.CanonicalJSON(idempotencytest.BenchBody); err != nil {
			b.Fatal(err)
		}
	}
}
