package keyindex

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestSearchChunk checks the search in a run's chunk, which compares
// words, against a binary search over the records' bytes, on chunks of one
// chain or several, with uniform digests and with digests bunched at the
// ends of the range, for targets that are in the chunk, between its
// records and outside it.
func TestSearchChunk(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		// Chunks of the size files written before hold, and a few times
		// it: the interpolation's ranges reach searchBinaryMax often (the
		// large chunks are TestSearchChunkLarge's).
		n := rapid.IntRange(0, 4*ChunkRecordsV1).Draw(t, "records")
		chains := rapid.IntRange(1, 3).Draw(t, "chains")
		digest := rapid.OneOf(
			rapid.Uint64(),
			rapid.Uint64Range(0, 16),
			rapid.Uint64Range(^uint64(0)-16, ^uint64(0)),
		)
		records := make([]RecordKey, n)
		for i := range records {
			records[i] = RecordKey{
				chainID:    uint64(rapid.IntRange(1, chains).Draw(t, "chain")),
				digestHigh: digest.Draw(t, "high"),
				digestLow:  rapid.Uint64Range(0, 3).Draw(t, "low"),
				seq:        uint64(i + 1),
			}
		}
		slices.SortFunc(records, CompareRecords)
		records = slices.CompactFunc(records, func(a, b RecordKey) bool { return CompareRecords(a, b) == 0 })
		chunk := make([]byte, len(records)*RecordSize)
		for i, r := range records {
			r.put(chunk[i*RecordSize:])
		}
		// Every record, each record's neighbours on either side (between
		// records, or past the ends), and a drawn target.
		var targets []Prefix
		for _, r := range records {
			p := Prefix{r.chainID, r.digestHigh, r.digestLow}
			targets = append(targets, p, Prefix{p.ChainID, p.DigestHigh, p.DigestLow - 1}, Prefix{p.ChainID, p.DigestHigh, p.DigestLow + 1},
				Prefix{p.ChainID, p.DigestHigh - 1, p.DigestLow}, Prefix{p.ChainID, p.DigestHigh + 1, p.DigestLow})
		}
		targets = append(targets, Prefix{uint64(rapid.IntRange(0, chains+1).Draw(t, "target chain")), digest.Draw(t, "target high"), rapid.Uint64Range(0, 4).Draw(t, "target low")})
		for _, want := range targets {
			var target [RecordPrefixSize]byte
			binary.BigEndian.PutUint64(target[0:], want.ChainID)
			binary.BigEndian.PutUint64(target[8:], want.DigestHigh)
			binary.BigEndian.PutUint64(target[16:], want.DigestLow)
			if LoadPrefix(target[:], 0) != want {
				t.Fatalf("loadPrefix of the target = %+v, want %+v", LoadPrefix(target[:], 0), want)
			}
			expected := sort.Search(len(records), func(i int) bool {
				return string(chunk[i*RecordSize:i*RecordSize+RecordPrefixSize]) >= string(target[:])
			})
			if got := SearchChunk(chunk, want); got != expected {
				t.Fatalf("searchChunk(%+v) = %d, want %d (%d records)", want, got, expected, len(records))
			}
		}
	})
}

// binarySearchChunk is searchChunk without interpolation: the search the
// chunks of keyChunkRecordsV1 records had, the baseline of
// BenchmarkSearchChunk.
func binarySearchChunk(chunk []byte, want Prefix) int {
	return searchChunkRange(chunk, 0, len(chunk)/RecordSize, want)
}

// uniformChunk returns a sorted chunk of n records of one chain with
// pseudo-random digests (as BLAKE3's are), and their prefixes.
func uniformChunk(n int, chainID uint64, seed uint64) ([]byte, []Prefix) {
	records := make([]RecordKey, n)
	x := seed | 1
	next := func() uint64 { // xorshift64*
		x ^= x >> 12
		x ^= x << 25
		x ^= x >> 27
		return x * 0x2545f4914f6cdd1d
	}
	for i := range records {
		records[i] = RecordKey{chainID: chainID, digestHigh: next(), digestLow: next(), seq: uint64(i + 1)}
	}
	slices.SortFunc(records, CompareRecords)
	chunk := make([]byte, n*RecordSize)
	prefixes := make([]Prefix, n)
	for i, r := range records {
		r.put(chunk[i*RecordSize:])
		prefixes[i] = Prefix{r.chainID, r.digestHigh, r.digestLow}
	}
	return chunk, prefixes
}

// TestSearchChunkEdges checks the interpolating search at the edges of
// full-size chunks of uniform digests: the first and last records, targets
// below the first and above the last (of the same chain, and of the chains
// before and after it), records sharing their digest's high word, and a
// chunk whose digests all share it (no interpolation possible).
func TestSearchChunkEdges(t *testing.T) {
	for _, n := range []int{1, 2, searchBinaryMax, searchBinaryMax + 1, ChunkRecordsV1, 1000, ChunkRecords} {
		chunk, prefixes := uniformChunk(n, 5, uint64(n))
		first, last := prefixes[0], prefixes[n-1]
		cases := []struct {
			name string
			want Prefix
			at   int
		}{
			{"first", first, 0},
			{"last", last, n - 1},
			{"below the first", Prefix{5, first.DigestHigh, first.DigestLow - 1}, 0},
			{"lowest digest", Prefix{5, 0, 0}, 0},
			{"above the last", Prefix{5, last.DigestHigh, last.DigestLow + 1}, n},
			{"highest digest", Prefix{5, ^uint64(0), ^uint64(0)}, n},
			{"chain before", Prefix{4, ^uint64(0), ^uint64(0)}, 0},
			{"chain after", Prefix{6, 0, 0}, n},
		}
		if last.DigestLow != ^uint64(0) {
			cases[4].at = n
		}
		for i := range min(n, 64) {
			j := i * (n - 1) / max(min(n, 64)-1, 1)
			cases = append(cases, struct {
				name string
				want Prefix
				at   int
			}{fmt.Sprintf("record %d", j), prefixes[j], j})
		}
		for _, c := range cases {
			if got := SearchChunk(chunk, c.want); got != c.at {
				t.Errorf("%d records, %s: searchChunk = %d, want %d", n, c.name, got, c.at)
			}
			if got := binarySearchChunk(chunk, c.want); got != c.at {
				t.Errorf("%d records, %s: the binary search = %d, want %d", n, c.name, got, c.at)
			}
			if got := NewRadix([][]byte{chunk}).search(0, chunk, c.want); got != c.at {
				t.Errorf("%d records, %s: the radix search = %d, want %d", n, c.name, got, c.at)
			}
		}
	}
	// Records that share their digest's high word (with one another, and in
	// a chunk where all of them do) are ordered by the low word.
	for _, shared := range []int{2, 100, ChunkRecords} {
		chunk, prefixes := uniformChunk(ChunkRecords, 5, 99)
		start := ChunkRecords/2 - shared/2
		high := prefixes[start].DigestHigh
		for i := start; i < start+shared; i++ {
			prefixes[i].DigestHigh = high
		}
		if shared == ChunkRecords {
			for i := range prefixes {
				prefixes[i].DigestHigh = 7
			}
		}
		slices.SortFunc(prefixes, func(a, b Prefix) int {
			return CompareRecords(RecordKey{a.ChainID, a.DigestHigh, a.DigestLow, 0}, RecordKey{b.ChainID, b.DigestHigh, b.DigestLow, 0})
		})
		for i, p := range prefixes {
			RecordKey{p.ChainID, p.DigestHigh, p.DigestLow, uint64(i)}.put(chunk[i*RecordSize:])
		}
		for i := 0; i < len(prefixes); i += 1 + i%7 { // every record near the start, then a sample
			p := prefixes[i]
			if got := SearchChunk(chunk, p); got != i {
				t.Fatalf("%d records sharing a high word: searchChunk(record %d) = %d", shared, i, got)
			}
			if got := SearchChunk(chunk, Prefix{p.ChainID, p.DigestHigh, p.DigestLow + 1}); p.DigestLow != ^uint64(0) && got != binarySearchChunk(chunk, Prefix{p.ChainID, p.DigestHigh, p.DigestLow + 1}) {
				t.Fatalf("%d records sharing a high word: searchChunk(past record %d) = %d", shared, i, got)
			}
		}
	}
}

// TestSearchChunkLarge is TestSearchChunk's check on chunks of up to
// keyChunkRecords records of one chain or several, whose digests are
// uniform or bunched, for every record and a drawn target.
func TestSearchChunkLarge(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, ChunkRecords).Draw(t, "records")
		chains := rapid.IntRange(1, 3).Draw(t, "chains")
		bunched := rapid.Bool().Draw(t, "bunched")
		chunk, prefixes := uniformChunk(n, 1, rapid.Uint64().Draw(t, "seed"))
		for i := range prefixes {
			prefixes[i].ChainID = uint64(1 + i*chains/n) // sorted stretches of each chain
			if bunched {
				prefixes[i].DigestHigh >>= 60 // sixteen values: long runs of equal high words
			}
		}
		slices.SortFunc(prefixes, func(a, b Prefix) int {
			return CompareRecords(RecordKey{a.ChainID, a.DigestHigh, a.DigestLow, 0}, RecordKey{b.ChainID, b.DigestHigh, b.DigestLow, 0})
		})
		prefixes = slices.Compact(prefixes)
		chunk = chunk[:len(prefixes)*RecordSize]
		for i, p := range prefixes {
			RecordKey{p.ChainID, p.DigestHigh, p.DigestLow, uint64(i)}.put(chunk[i*RecordSize:])
		}
		// Every record of a small chunk; of a large one, the first, the
		// last and a few hundred drawn.
		targets := prefixes
		if len(prefixes) > 500 {
			targets = []Prefix{prefixes[0], prefixes[len(prefixes)-1]}
			for range 300 {
				targets = append(targets, prefixes[rapid.IntRange(0, len(prefixes)-1).Draw(t, "record")])
			}
		}
		records := len(targets)
		radix := NewRadix([][]byte{chunk})
		targets = append(slices.Clone(targets), Prefix{
			uint64(rapid.IntRange(0, chains+1).Draw(t, "target chain")),
			rapid.Uint64().Draw(t, "target high"),
			rapid.Uint64().Draw(t, "target low"),
		})
		for i, want := range targets {
			expected := binarySearchChunk(chunk, want)
			if i < records && (expected == len(prefixes) || prefixes[expected] != want) {
				t.Fatalf("the binary search does not find record %+v", want)
			}
			if got := SearchChunk(chunk, want); got != expected {
				t.Fatalf("searchChunk(%+v) = %d, want %d (%d records)", want, got, expected, len(prefixes))
			}
			if got := radix.search(0, chunk, want); got != expected {
				t.Fatalf("the radix search(%+v) = %d, want %d (%d records, mapped %v)", want, got, expected, len(prefixes), radix.Starts[0] != nil)
			}
			for _, near := range []Prefix{{want.ChainID, want.DigestHigh, want.DigestLow - 1}, {want.ChainID, want.DigestHigh, want.DigestLow + 1}} {
				if got, expected := radix.search(0, chunk, near), binarySearchChunk(chunk, near); got != expected {
					t.Fatalf("the radix search(%+v) = %d, want %d (%d records)", near, got, expected, len(prefixes))
				}
			}
			// Both neighbours of a record, between it and the next.
			for _, near := range []Prefix{{want.ChainID, want.DigestHigh, want.DigestLow - 1}, {want.ChainID, want.DigestHigh, want.DigestLow + 1}} {
				if got, expected := SearchChunk(chunk, near), binarySearchChunk(chunk, near); got != expected {
					t.Fatalf("searchChunk(%+v) = %d, want %d (%d records)", near, got, expected, len(prefixes))
				}
			}
		}
	})
}

// BenchmarkSearchChunk searches random records of 64 MiB of full chunks
// (more than the processor's caches hold) with searchChunk, beside the
// binary search over the same chunks and targets in the same run, and
// reports the ratio of their times ("x-binary").
func BenchmarkSearchChunk(b *testing.B) {
	const chunks = 64
	data := make([][]byte, chunks)
	prefixes := make([][]Prefix, chunks)
	for i := range data {
		data[i], prefixes[i] = uniformChunk(ChunkRecords, 1, uint64(i+1))
	}
	target := func(i int) (int, Prefix) {
		h := uint64(i) * 0x9e3779b97f4a7c15
		c := int(h>>58) % chunks
		return c, prefixes[c][int(h>>20)%ChunkRecords]
	}
	// searches looks up a target per iteration and returns the time of one.
	searches := func(b *testing.B, search func(chunk []byte, want Prefix) int) time.Duration {
		i := 0
		for b.Loop() {
			c, want := target(i)
			if search(data[c], want) >= ChunkRecords {
				b.Fatal("not found")
			}
			i++
		}
		return b.Elapsed() / time.Duration(b.N)
	}
	var binary time.Duration
	b.Run("binary", func(b *testing.B) { binary = searches(b, binarySearchChunk) })
	b.Run("interpolation", func(b *testing.B) {
		if each := searches(b, SearchChunk); binary > 0 {
			b.ReportMetric(float64(each)/float64(binary), "x-binary")
		}
	})
}

// FuzzSearchChunk searches chunks of any bytes, as a damaged or hostile
// file may hold: the search must end inside the chunk without a panic, and
// on a sorted chunk find what the binary search finds.
func FuzzSearchChunk(f *testing.F) {
	sorted, prefixes := uniformChunk(300, 2, 7)
	f.Add(sorted, uint64(2), prefixes[150].DigestHigh, prefixes[150].DigestLow)
	f.Add(sorted, uint64(2), prefixes[299].DigestHigh+1, uint64(0))
	f.Add(sorted, uint64(1), uint64(0), uint64(0))
	reversed := slices.Clone(sorted)
	for i := range 300 {
		copy(reversed[i*RecordSize:], sorted[(299-i)*RecordSize:(300-i)*RecordSize])
	}
	f.Add(reversed, uint64(2), prefixes[10].DigestHigh, prefixes[10].DigestLow)
	f.Add([]byte{}, uint64(0), uint64(0), uint64(0))
	f.Fuzz(func(t *testing.T, data []byte, chainID, high, low uint64) {
		chunk := data[:len(data)/RecordSize*RecordSize]
		n := len(chunk) / RecordSize
		want := Prefix{chainID, high, low}
		got := SearchChunk(chunk, want)
		if got < 0 || got > n {
			t.Fatalf("searchChunk = %d of %d records", got, n)
		}
		radix := NewRadix([][]byte{chunk}).search(0, chunk, want)
		if radix < 0 || radix > n {
			t.Fatalf("the radix search = %d of %d records", radix, n)
		}
		for i := 1; i < n; i++ {
			if !LoadPrefix(chunk, i-1).Less(LoadPrefix(chunk, i)) {
				return // not sorted: any index is an answer
			}
		}
		if expected := binarySearchChunk(chunk, want); got != expected || radix != expected {
			t.Fatalf("searchChunk = %d, the radix search %d, the binary search %d (%d records)", got, radix, expected, n)
		}
	})
}

// search is searchNear without the byte loaded ahead of need.
func (x *Radix) search(i int, chunk []byte, want Prefix) int {
	at, _ := x.SearchNear(i, chunk, want)
	return at
}
