package idempotency

import (
	"fmt"
	"hash/maphash"
	"sync/atomic"
	"testing"
)

// The filter never rules out a scope it was given, as it grows by layers
// and after a rebuild; a rebuilt one sized for its scopes rules out nearly
// all others; and a scope's key form hashes as the scope does.
func TestScopeFilter(t *testing.T) {
	// A first layer of 16 Ki bits (1,024 scopes), smaller than any the
	// store makes, so that a few thousand scopes grow a layer.
	first := &bloom{words: make([]atomic.Uint64, 256), blocks: 256 / filterBlockWords, sized: 1024}
	f := &scopeFilter{seed: maphash.MakeSeed(), layers: []*bloom{first}}
	scope := func(i int) Scope { return Scope{Operation: "POST /p", User: "u", Key: fmt.Sprint("k", i)} }
	const n = 5_000
	for i := range n {
		f.add(scope(i))
	}
	if len(f.layers) < 2 {
		t.Fatalf("a filter of %d bits holding %d scopes did not grow a layer", len(f.layers[0].words)*64, n)
	}
	for i := range n {
		if !f.mayHold(scope(i)) {
			t.Fatalf("scope %d ruled out by a layered filter", i)
		}
	}
	if got := f.added(); got != n {
		t.Fatalf("the layers were given %d scopes, want %d", got, n)
	}
	b := f.startRebuild(n)
	for i := range n {
		h1, h2, ok := f.keyHashes(scopeBytes(nil, scope(i)))
		if a1, a2 := f.hashes(scope(i)); !ok || a1 != h1 || a2 != h2 {
			t.Fatalf("scope %d: key form hashes %x %x %v, the scope %x %x", i, h1, h2, ok, a1, a2)
		}
		b.add(h1, h2)
	}
	f.add(scope(n)) // during the rebuild: goes to both
	f.finishRebuild(b, true)
	if len(f.layers) != 1 {
		t.Fatalf("a rebuilt filter has %d layers", len(f.layers))
	}
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
	t.Logf("false positives: %d of 10,000", fp)
	if _, _, ok := f.keyHashes([]byte("op\x00user")); ok {
		t.Fatal("a key form without three names hashed")
	}
}
