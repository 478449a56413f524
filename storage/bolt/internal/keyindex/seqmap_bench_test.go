package keyindex

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
)

// BenchmarkKeysCommitted measures what the seq map adds to the filter's
// update after a commit (runCache.keysCommitted): 1,000,000 keys of one
// chain, in the order of a checkpoint's sorted records, added to a filter
// sized as P1's last one is (built at 589,837 keys), with and without its
// map. The filter alone is the baseline: what every commit paid before.
func BenchmarkKeysCommitted(b *testing.B) {
	const keys = 1_000_000
	random := rand.New(rand.NewPCG(1, 2))
	digests := make([][]byte, keys)
	for i := range digests {
		digests[i] = binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, random.Uint64()), random.Uint64())
	}
	slices.SortFunc(digests, bytes.Compare)
	for _, c := range []struct {
		name           string
		seqMapBytesMax int64
	}{{"filter", -1}, {"filter+map", SeqMapBytesMaxDefault}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				f := NewFilter(589_837, FilterBudget{SeqMapBytesMax: c.seqMapBytesMax, BytesMax: -1})
				for seq, d := range digests {
					f.Add(7, d, uint64(seq))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/keys, "ns/key")
		})
	}
}
