//go:build unix

package cputime

import "testing"

// Process grows with the work the process does.
func TestProcessGrows(t *testing.T) {
	before := Process()
	x := uint64(1)
	for i := range 50_000_000 {
		x = x*6364136223846793005 + uint64(i)
	}
	if after := Process(); after <= before {
		t.Fatalf("CPU time did not grow over 50M multiplications: %v then %v (%d)", before, after, x)
	}
}
