package bolt

import (
	"math"
	"testing"

	"github.com/ledgerworks/ledger/storage/bolt/internal/keyrun"
)

// TestMemoryBudgetShares checks how bounds are shared out, under several
// GOGC settings and page sizes: the heap that what may be live grows to
// (with GOGC's garbage and the runtime's retained pages) stays within the
// bound; a merge in one transaction, a step of a spread merge, and the
// last transaction of a merge into a run of RunRecordsMax records each
// hold no more than the merges' share (keyrun's costs, which
// TestMergeCosts checks against what they allocate); and the tables, the
// merges, the reserve and the index together hold no more than may be
// live.
func TestMemoryBudgetShares(t *testing.T) {
	for _, bound := range []int64{MemoryBytesMin, 48 << 20, MemoryBytesMaxDefault, 8 << 30, math.MaxInt64} {
		for _, gc := range []int64{50, 100, 200} {
			for _, page := range []int{4096, 16384} {
				opts, err := resolveMemory(Options{MemoryBytesMax: bound})
				if err != nil {
					t.Fatal(err)
				}
				m := newMemoryBudget(opts, page)
				m.gcPercent = gc
				live := m.liveBytesMax()
				if heap := live / 100 * (100 + gc) / 100 * (100 + heapRetainPercent); live <= 0 || heap > bound {
					t.Errorf("bound %d, GOGC %d: a heap of %d", bound, gc, heap)
				}
				share := m.mergeBytesMax()
				merge, run := m.mergeRecordsMax(), m.runRecordsMax()
				step := max(merge/keyrun.StepShareDen, 1)
				for _, c := range []struct {
					what  string
					bytes uint64
				}{
					{"a merge of MergeRecordsMax", keyrun.MergeBytes(merge, page)},
					{"a step", keyrun.StepBytes(step)},
					{"the end of a merge into a run of RunRecordsMax", keyrun.FinishBytes(run, step, page)},
				} {
					if c.bytes > share {
						t.Errorf("bound %d, GOGC %d, pages of %d: %s holds %d bytes, the merges' share %d", bound, gc, page, c.what, c.bytes, share)
					}
				}
				if bound < 1<<40 && keyrun.FinishBytes(run+1, step, page) <= share {
					t.Errorf("bound %d, GOGC %d: RunRecordsMax %d is not the most that fits", bound, gc, run)
				}
				index := m.filterBudget(-1).BytesMax
				if used := 4*m.memtableBytesMax + int64(share) + live/memoryReserveDen + index; index > 0 && used > live {
					t.Errorf("bound %d, GOGC %d: %d bytes shared out of %d live", bound, gc, used, live)
				}
				if bound == MemoryBytesMaxDefault && gc == 100 && page == 4096 {
					t.Logf("default: %d live, merges %d (MergeRecordsMax %d, RunRecordsMax %d), index %d", live, share, merge, run, index)
				}
			}
		}
	}
}
