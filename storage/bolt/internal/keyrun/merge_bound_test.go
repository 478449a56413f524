package keyrun

import (
	"slices"
	"testing"
)

// TestMergeableBound checks RunRecordsMax: a level whose runs exceed it
// together merges as many of its smallest as fit, none when fewer than two
// do; zero merges all.
func TestMergeableBound(t *testing.T) {
	runs := []*Run{{count: 600}, {count: 300}, {count: 100}, {count: 300}}
	for _, c := range []struct {
		max  uint64
		want []uint64 // the counts merged, in the order taken
	}{
		{0, []uint64{600, 300, 100, 300}},
		{1 << 40, []uint64{100, 300, 300, 600}},
		{1300, []uint64{100, 300, 300, 600}},
		{1299, []uint64{100, 300, 300}},
		{400, []uint64{100, 300}},
		{399, nil},
		{100, nil},
	} {
		cache := NewCache()
		cache.RunRecordsMax = c.max
		var got []uint64
		for _, r := range cache.mergeable(runs) {
			got = append(got, r.count)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("RunRecordsMax %d: mergeable takes %v, want %v", c.max, got, c.want)
		}
	}
}

// TestMergeUnderBound fills levels whose runs do not fit one merge: each
// full level merges its smallest runs into a run one level up (not the
// level of its size, which a run of the same transaction may have), the
// runs stay few, and every key is found.
func TestMergeUnderBound(t *testing.T) {
	l := newLedger(t)
	l.cache.RunRecordsMax = 3*DirectMin + 2
	for range Fanout {
		l.commit(DirectMin) // level 1: 16 records each
	}
	// Three of the eight fit: 48 records, level 1 by its size, written
	// at level 2.
	if levels, _ := l.levels(); levels[1] != Fanout-3 || levels[2] != 1 || len(levels) != 2 {
		t.Fatalf("after the first merge: levels %v", levels)
	}
	l.check(1)
	for range 40 {
		l.commit(DirectMin)
	}
	// 48 runs of 16 keys: a merge of three at the 8th, then at every third
	// (14 merges), leaving level 1 six runs; level 2 keeps its runs of 48,
	// no two of which fit one merge.
	if levels, _ := l.levels(); levels[1] != 6 || levels[2] != 14 || len(levels) != 2 {
		t.Errorf("after 48 commits: levels %v", levels)
	}
	l.check(1)
}
