package bolt

import "testing"

// TestChainIDsBound checks that the map of chain ids stops at ChainIDsMax
// and then no longer claims to hold every chain, so that the probe asks the
// file about a chain it lacks instead of ruling its keys out.
func TestChainIDsBound(t *testing.T) {
	var c chainIDs
	c.complete.Store(true)
	c.add("a", 1)
	c.add("a", 1)
	if id, ok := c.get("a"); !ok || id != 1 || c.count.Load() != 1 || !c.complete.Load() {
		t.Fatalf("after adding a twice: id %d %v, count %d, complete %v", id, ok, c.count.Load(), c.complete.Load())
	}
	c.count.Store(ChainIDsMax)
	c.add("b", 2)
	if _, ok := c.get("b"); ok || c.complete.Load() {
		t.Fatalf("a full map took b (%v) or stayed complete (%v)", ok, c.complete.Load())
	}
	if id, ok := c.get("a"); !ok || id != 1 {
		t.Fatalf("a full map lost a: %d %v", id, ok)
	}
	c.add("a", 1) // known names stay known, and cost nothing
	if c.complete.Load() {
		t.Fatal("complete again")
	}
}
