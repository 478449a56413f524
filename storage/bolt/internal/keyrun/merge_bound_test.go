package keyrun

import "testing"

// TestMayMergeBound checks MergeRecordsMax: runs whose records together
// exceed it are not merged; zero merges any.
func TestMayMergeBound(t *testing.T) {
	runs := []*Run{{count: 600}, {count: 300}, {count: 100}}
	for _, c := range []struct {
		max  uint64
		want bool
	}{{0, true}, {999, false}, {1000, true}, {1 << 40, true}} {
		cache := NewCache()
		cache.MergeRecordsMax = c.max
		if got := cache.mayMerge(runs); got != c.want {
			t.Errorf("MergeRecordsMax %d: mayMerge of 1,000 records = %v, want %v", c.max, got, c.want)
		}
	}
}
