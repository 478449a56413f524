package keyindex

import (
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestSortRecords sorts random runs, of one chain or many, with uniform,
// clustered or repeated digests, and compares the result with a
// comparison sort of the same records: the same prefixes in the same
// order, and the same records (records with one prefix may come in any
// order, as in any unstable sort).
func TestSortRecords(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 6000).Draw(t, "records")
		chains := rapid.SampledFrom([]int{1, 3, 64, bucketSortChainsMax + 1, 10_000}).Draw(t, "chains")
		digests := rapid.SampledFrom([]string{"uniform", "clustered", "repeated"}).Draw(t, "digests")
		seed := rapid.Uint64().Draw(t, "seed")
		keys := make([]RecordKey, n)
		for i := range keys {
			x := splitmixForTest(seed + uint64(i))
			k := RecordKey{chainID: 1 + splitmixForTest(x)%uint64(chains)*7919, digestHigh: x,
				digestLow: splitmixForTest(^x), seq: uint64(i + 1)}
			switch digests {
			case "clustered": // one bucket's worth of leading bits
				k.digestHigh = 0xabcd<<48 | x>>40
			case "repeated":
				k.digestHigh, k.digestLow = x%5, x%3
			}
			keys[i] = k
		}
		records := make([]byte, n*RecordSize)
		for i, k := range keys {
			k.put(records[i*RecordSize:])
		}
		want := slices.Clone(keys)
		slices.SortFunc(want, CompareRecords)
		SortRecords(records)
		got := make([]RecordKey, n)
		for i := range got {
			got[i] = LoadRecord(records[i*RecordSize:])
		}
		for i := range got {
			if CompareRecords(got[i], want[i]) != 0 {
				t.Fatalf("record %d of %d: %+v, want the prefix of %+v", i, n, got[i], want[i])
			}
		}
		bySeq := func(a, b RecordKey) int { return cmpUint64(a.seq, b.seq) }
		slices.SortFunc(got, bySeq)
		slices.SortFunc(want, bySeq)
		if !slices.Equal(got, want) {
			t.Fatalf("the sorted records are not the records given")
		}
	})
}

// TestBucketSortChains checks the bound on chains: bucketSort takes
// bucketSortChainsMax chains and refuses one more.
func TestBucketSortChains(t *testing.T) {
	for _, chains := range []int{bucketSortChainsMax, bucketSortChainsMax + 1} {
		records := make([]byte, chains*RecordSize)
		for i := range chains {
			RecordKey{chainID: uint64(chains - i), digestHigh: splitmixForTest(uint64(i))}.put(records[i*RecordSize:])
		}
		sorted, ok := bucketSort(records)
		if ok != (chains <= bucketSortChainsMax) {
			t.Fatalf("%d chains: bucketSort reported %v", chains, ok)
		}
		if ok && (!slices.IsSortedFunc(sorted, CompareRecords) || len(sorted) != chains) {
			t.Fatalf("%d chains: %d records, sorted %v", chains, len(sorted), slices.IsSortedFunc(sorted, CompareRecords))
		}
	}
}

func splitmixForTest(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// BenchmarkSortRecords sorts a checkpoint's run of uniform digests on one
// chain and on 64, beside a comparison sort of the same records in the
// same run; "ratio" is the comparison sort's time over sortRecords' (higher
// is better).
func BenchmarkSortRecords(b *testing.B) {
	for _, chains := range []int{1, 64} {
		b.Run(map[int]string{1: "one-chain", 64: "64-chains"}[chains], func(b *testing.B) {
			const n = 200_000
			source := make([]byte, n*RecordSize)
			for i := range n {
				x := splitmixForTest(uint64(i))
				RecordKey{chainID: 1 + uint64(i%chains), digestHigh: x, digestLow: ^x, seq: uint64(i)}.put(source[i*RecordSize:])
			}
			records := make([]byte, len(source))
			var sorting, comparing float64
			for b.Loop() {
				copy(records, source)
				start := time.Now()
				SortRecords(records)
				sorting += float64(time.Since(start))
				copy(records, source)
				start = time.Now()
				sortRecordsByComparison(records)
				comparing += float64(time.Since(start))
			}
			b.ReportMetric(sorting/float64(b.N)/n, "ns/record")
			b.ReportMetric(comparing/float64(b.N)/n, "comparison-ns/record")
			b.ReportMetric(comparing/sorting, "ratio")
		})
	}
}
