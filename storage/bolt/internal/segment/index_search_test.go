package segment

import (
	"sort"
	"testing"

	"pgregory.net/rapid"
)

// TestSegmentIndexSearch checks the map's search, which starts where seq
// falls among the chain's seqs and steps or halves from there, against a
// binary search, on chains of segments of even sizes (the guess right or
// one off), of sizes drawn from a wide range, and of a few huge segments
// among small ones (guesses far off, halving): at every seq of the chain
// and past its ends or, past 20,000 seqs, at every segment's last seq and
// its neighbours. It fails when a step returns a neighbour of the answer
// or the halving starts one segment off.
func TestSegmentIndexSearch(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		segments := rapid.IntRange(0, 300).Draw(t, "segments")
		size := rapid.SampledFrom([]*rapid.Generator[int]{
			rapid.IntRange(44, 46),
			rapid.IntRange(1, 200),
			rapid.OneOf(rapid.IntRange(1, 3), rapid.IntRange(1, 3), rapid.IntRange(1000, 5000)),
		}).Draw(t, "sizes")
		first := rapid.SampledFrom([]uint64{1, 1, 1, 1000}).Draw(t, "first seq")
		x := &Index{}
		last := first - 1
		for range segments {
			last += uint64(size.Draw(t, "size"))
			x.lasts = append(x.lasts, last)
		}
		check := func(seq uint64) {
			want := sort.Search(len(x.lasts), func(i int) bool { return x.lasts[i] >= seq })
			if got := x.Search(seq); got != want {
				t.Fatalf("search(%d) = %d, want %d (lasts %v)", seq, got, want, x.lasts)
			}
		}
		if last < 20_000 {
			for seq := range last + 2 {
				check(seq)
			}
		} else { // every segment's ends and their neighbours
			for _, l := range x.lasts {
				check(l - 1)
				check(l)
				check(l + 1)
			}
		}
		check(1 << 62)
		check(^uint64(0))
	})
}
