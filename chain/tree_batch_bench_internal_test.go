package chain

import (
	"context"
	"fmt"
	"testing"

	"github.com/ledgerworks/ledger/storage"
)

// stateSink is a storage.Tx whose state writes go nowhere: what the
// committer's treeBatch costs without its store.
type stateSink struct {
	storage.Tx
	puts int
}

func (s *stateSink) StateGet(ctx context.Context, key []byte) ([]byte, error) {
	return nil, storage.ErrNotFound
}

func (s *stateSink) StatePut(ctx context.Context, key, value []byte) error {
	s.puts++
	return nil
}

// BenchmarkTreeBatch is the committer's tree upkeep alone for one group:
// P2's shapes, 64 chains appended once each, and one chain appended 64
// times, with every chain's range in the committer's cache. Report ns per
// append.
func BenchmarkTreeBatch(b *testing.B) {
	for _, chains := range []int{64, 1} {
		b.Run(fmt.Sprintf("chains=%d", chains), func(b *testing.B) {
			const group = 64
			ctx := context.Background()
			tb := newTreeBatch()
			stx := &stateSink{}
			names := make([]string, chains)
			seqs := make([]uint64, chains)
			for i := range names {
				names[i] = fmt.Sprintf("account/%08d", i)
			}
			var h Hash
			run := func() {
				tb.reset()
				for i := range group {
					c := i % chains
					seqs[c]++
					h[0], h[1] = byte(seqs[c]), byte(c)
					if err := tb.add(ctx, stx, names[c], seqs[c], &h); err != nil {
						b.Fatal(err)
					}
				}
				if err := tb.flush(ctx, stx); err != nil {
					b.Fatal(err)
				}
				tb.committed()
			}
			run() // every chain in the cache
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				run()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*group), "ns/append")
		})
	}
}
