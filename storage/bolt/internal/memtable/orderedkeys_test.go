package memtable

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// orderedKeys against a sorted slice: every scan, forward and reverse,
// bounded or not, yields the model's keys in [start, end), each with the
// value of its first insert, across chunk splits.
func TestOrderedKeysMatchesASortedSet(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var o orderedKeys[string]
		var model []string
		key := rapid.Custom(func(t *rapid.T) string { return fmt.Sprintf("k%04d", rapid.IntRange(0, 3000).Draw(t, "k")) })
		for range rapid.IntRange(0, 40).Draw(t, "rounds") {
			for _, k := range rapid.SliceOfN(key, 0, 200).Draw(t, "inserts") {
				o.insert(k, "v"+k)
				o.insert(k, "again") // a held key keeps its value
				if i, found := slices.BinarySearch(model, k); !found {
					model = slices.Insert(model, i, k)
				}
			}
			start := key.Draw(t, "start")
			var end []byte
			if rapid.Bool().Draw(t, "bounded") {
				end = []byte(key.Draw(t, "end"))
			}
			reverse := rapid.Bool().Draw(t, "reverse")
			limit := rapid.IntRange(1, 5000).Draw(t, "limit")
			var got, want []string
			o.scan(start, end, reverse, func(k, v string) bool {
				if v != "v"+k {
					t.Fatalf("key %q has value %q", k, v)
				}
				got = append(got, k)
				return len(got) < limit
			})
			for _, k := range model {
				if k >= start && (end == nil || k < string(end)) {
					want = append(want, k)
				}
			}
			if reverse {
				slices.Reverse(want)
			}
			want = want[:min(len(want), limit)]
			if !slices.Equal(got, want) {
				t.Fatalf("scan(%q, %q, reverse %v, limit %d): %d keys, want %d", start, end, reverse, limit, len(got), len(want))
			}
		}
		for _, ch := range o.chunks {
			if len(ch) == 0 || len(ch) > orderedChunkMax {
				t.Fatalf("chunk of %d keys", len(ch))
			}
		}
	})
}
