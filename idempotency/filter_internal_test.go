package idempotency

import (
	"fmt"
	"hash/maphash"
	"testing"
)

// The filter never rules out a scope it was given, and a rebuilt one sized
// for its scopes rules out nearly all others.
func TestScopeFilter(t *testing.T) {
	f := &scopeFilter{seed: maphash.MakeSeed(), cur: newBloom(0)}
	scope := func(i int) Scope { return Scope{Operation: "POST /p", User: "u", Key: fmt.Sprint("k", i)} }
	const n = 100_000
	full := false
	for i := range n {
		full = f.add(scope(i)) || full
	}
	if !full {
		t.Fatalf("a filter of %d bits holding %d scopes does not ask for a rebuild", f.cur.mask+1, n)
	}
	b := f.startRebuild(n)
	for i := range n {
		b.add(f.hashes(scope(i)))
	}
	f.add(scope(n)) // during the rebuild: goes to both
	f.finishRebuild(b, true)
	for i := range n + 1 {
		if !f.mayHold(scope(i)) {
			t.Fatalf("scope %d ruled out", i)
		}
	}
	fp := 0
	for i := n + 1; i < n+10_001; i++ {
		if f.mayHold(scope(i)) {
			fp++
		}
	}
	if fp > 100 {
		t.Fatalf("%d of 10,000 unknown scopes may be held, want at most 1%%", fp)
	}
}
