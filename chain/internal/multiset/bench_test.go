package multiset

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/storage"
)

// BenchmarkMultisetSum sums a batch of batchSize keyed entries (32
// hex digits each, the entry side of the key index check: each key's
// digest, then its element), beside the definition one pair at a time
// (storage.KeyDigest, then a keyed zeebo/blake3 hasher) over the same
// pairs in the same iterations; ratio is the baseline's time over the
// batch's.
func BenchmarkMultisetSum(b *testing.B) {
	random := rand.New(rand.NewPCG(11, 11))
	items := make([]Item, batchSize)
	for i := range items {
		items[i] = Item{Key: fmt.Sprintf("%016x%016x", random.Uint64(), random.Uint64()), Seq: uint64(1 + i)}
	}
	var k Key
	for i := range k {
		k[i] = byte(random.Uint32())
	}
	mh := NewHasher(&k)
	keyed := keyedHasher(b, &k)
	var baseline time.Duration
	for b.Loop() {
		var got Sum
		mh.Sum(&got, items, false)
		b.StopTimer()
		start := time.Now()
		var want Sum
		for i := range items {
			h := elementByDefinition(keyed, storage.KeyDigest(items[i].Key), items[i].Seq)
			want.addHash(&h)
		}
		baseline += time.Since(start)
		if got != want {
			b.Fatalf("batch sum %v, one at a time %v", got, want)
		}
		b.StartTimer()
	}
	perPair := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N*len(items)) }
	b.ReportMetric(perPair(b.Elapsed()), "ns/pair")
	b.ReportMetric(perPair(baseline), "one-at-a-time-ns/pair")
	b.ReportMetric(float64(baseline)/float64(b.Elapsed()), "ratio")
}

// batchSize is the hand-off of the chain package's key check
// (keyCheckBatchSize).
const batchSize = 512
