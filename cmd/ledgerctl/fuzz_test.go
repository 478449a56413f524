package main

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParseExpectHead: the --expect-head parser never panics, accepts only
// what it can print back exactly, and refuses what the engine would refuse.
func FuzzParseExpectHead(f *testing.F) {
	hash := strings.Repeat("0123456789abcdef", 4)
	for _, seed := range []string{
		"acme/audit/events:5:" + hash,
		"acme:eu/x:1:" + hash,
		"a:18446744073709551615:" + strings.ToUpper(hash),
		"a:18446744073709551616:" + hash,
		"a:0:" + hash,
		":1:" + hash,
		"a::" + hash,
		"a:1:",
		"a:1:" + hash[:63],
		"a:-1:" + hash,
		"a:+1:" + hash,
		"nocolon",
		"a\x00b:1:" + hash,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		heads, err := parseExpectHeads([]string{value})
		if err != nil {
			if _, ok := err.(*usageError); !ok {
				t.Fatalf("%q: error %T %v is not a usage error", value, err, err)
			}
			return
		}
		if len(heads) != 1 {
			t.Fatalf("%q: %d heads", value, len(heads))
		}
		h := heads[0]
		if h.Seq == 0 || h.Chain == "" || !utf8.ValidString(h.Chain) {
			t.Fatalf("%q: accepted %+v", value, h)
		}
		// What was accepted prints back to the same value (hash case aside).
		printed := fmt.Sprintf("%s:%d:%s", h.Chain, h.Seq, h.Hash)
		if !strings.EqualFold(printed, value) {
			t.Fatalf("%q: parsed as %q", value, printed)
		}
	})
}
