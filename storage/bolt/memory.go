package bolt

import (
	"fmt"
	"math"
	"runtime/metrics"

	"github.com/ledgerworks/ledger/storage/bolt/internal/keyindex"
	"github.com/ledgerworks/ledger/storage/bolt/internal/keyrun"
)

// The memory bound of a handle (Options.MemoryBytesMax; see the package
// documentation, "Memory").
const (
	// MemoryBytesMaxDefault is Options.MemoryBytesMax when zero.
	MemoryBytesMaxDefault = 512 << 20
	// MemoryBytesMin is the smallest bound Open accepts.
	MemoryBytesMin = 16 << 20
	// memtableShareDen bounds MemtableBytesMax to a sixteenth of the bound:
	// two tables live, and a checkpoint's bbolt transaction holding about
	// as much again while it writes one, a quarter of the bound, doubled by
	// the Go heap's garbage.
	memtableShareDen = 16
	// memoryReserveDen is the part of what may be live kept for what the
	// handle holds besides its tables, merges and key index: the read
	// pool, the write scratch, the chains' ids, the runtime.
	memoryReserveDen = 16
	// mergeShareDen is the part of what may be live that the merges of key
	// runs may hold (keyrun.MergeBytes, StepBytes, FinishBytes).
	mergeShareDen = 3
	// heapRetainPercent is how much memory past its heap goal the Go
	// runtime keeps mapped: its scavenger returns freed pages to the
	// system down to that, in the background.
	heapRetainPercent = 10
	// gcPercentDefault is GOGC when the runtime does not say (or the
	// collector is off: the heap then grows up to GOMEMLIMIT, if set).
	gcPercentDefault = 100
)

// memoryBudget is how Options.MemoryBytesMax is shared out.
type memoryBudget struct {
	// bytesMax is Options.MemoryBytesMax, or negative when unbounded.
	bytesMax int64
	// memtableBytesMax is the bound of one memory table, counted with or
	// without the log (a handle may replay one a crash left).
	memtableBytesMax int64
	// gcPercent is the Go runtime's GOGC when the handle opened.
	gcPercent int64
	// pageBytes is the file's page size.
	pageBytes int
}

// newMemoryBudget returns the budget of a handle under its resolved
// options, for a file of pages of pageBytes.
func newMemoryBudget(opts Options, pageBytes int) memoryBudget {
	return memoryBudget{bytesMax: opts.MemoryBytesMax, memtableBytesMax: max(opts.MemtableBytesMax, 0),
		gcPercent: gcPercent(), pageBytes: pageBytes}
}

// gcPercent reads GOGC from the runtime.
func gcPercent() int64 {
	sample := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return gcPercentDefault
	}
	if p := sample[0].Value.Uint64(); p > 0 && p <= math.MaxInt32 {
		return int64(p)
	}
	return gcPercentDefault
}

// liveBytesMax is what the handle may hold live: the Go heap grows to
// (100+GOGC)% of what is live before it collects, and the runtime keeps
// heapRetainPercent more mapped, so that the process stays within
// bytesMax. Under the defaults (GOGC 100) that is 45% of the bound, 232.7
// MiB of 512.
func (m memoryBudget) liveBytesMax() int64 {
	return m.bytesMax / (100 + m.gcPercent) * 100 / (100 + heapRetainPercent) * 100 // no overflow at math.MaxInt64
}

// mergeBytesMax is the merges' share of what may be live.
func (m memoryBudget) mergeBytesMax() uint64 { return uint64(m.liveBytesMax() / mergeShareDen) }

// mergeRecordsMax is keyrun.Cache.MergeRecordsMax under the bound: the
// most records a merge in one transaction holds within the merges' share
// (keyrun.MergeBytes). A step of a merge spread over transactions holds
// less (keyrun.StepBytes of a keyrun.StepShareDen-th of them).
func (m memoryBudget) mergeRecordsMax() uint64 {
	if m.bytesMax < 0 {
		return 0
	}
	return max(keyrun.RecordsWithin(m.mergeBytesMax(), func(n uint64) uint64 { return keyrun.MergeBytes(n, m.pageBytes) }), 1)
}

// runRecordsMax is keyrun.Cache.RunRecordsMax under the bound: the most
// records of a run whose merge's last transaction holds its filter thrice
// and the freelist's bookkeeping of its sources' pages within the
// merges' share (keyrun.FinishBytes).
func (m memoryBudget) runRecordsMax() uint64 {
	if m.bytesMax < 0 {
		return 0
	}
	step := max(m.mergeRecordsMax()/keyrun.StepShareDen, 1)
	return max(keyrun.RecordsWithin(m.mergeBytesMax(), func(n uint64) uint64 { return keyrun.FinishBytes(n, step, m.pageBytes) }), 2)
}

// resolveMemory checks Options.MemoryBytesMax and Options.MemtableBytesMax
// against each other and fills in their defaults: a zero MemoryBytesMax is
// the default or what the memory tables set need, a zero MemtableBytesMax
// under a bound smaller than the default's is the largest the bound allows.
func resolveMemory(opts Options) (Options, error) {
	switch {
	case opts.MemoryBytesMax == 0:
		opts.MemoryBytesMax = max(MemoryBytesMaxDefault, opts.MemtableBytesMax*memtableShareDen)
	case opts.MemoryBytesMax < 0:
		return opts, nil
	case opts.MemoryBytesMax < MemoryBytesMin:
		return opts, fmt.Errorf("%w: MemoryBytesMax %d below MemoryBytesMin %d", ErrMemoryBound, opts.MemoryBytesMax, MemoryBytesMin)
	}
	tableMax := opts.MemoryBytesMax / memtableShareDen
	switch {
	case opts.MemtableBytesMax <= 0:
		opts.MemtableBytesMax = min(MemtableBytesMaxDefault, tableMax)
	case opts.MemtableBytesMax > tableMax:
		return opts, fmt.Errorf("%w: MemtableBytesMax %d above MemoryBytesMax/%d (%d)", ErrMemoryBound, opts.MemtableBytesMax, memtableShareDen, tableMax)
	}
	return opts, nil
}

// filterBudget is the bound of the next key filter and its seq map: what
// may be live (liveBytesMax), less the memory tables and a checkpoint's
// transaction (four tables), the merges' share and the reserve. The run
// filters take none of it: lookups read them where they lie in the file's
// map (keyrun.View), file-backed memory the kernel pages in and out.
func (m memoryBudget) filterBudget(seqMapBytesMax int64) keyindex.FilterBudget {
	if m.bytesMax < 0 {
		return keyindex.FilterBudget{SeqMapBytesMax: seqMapBytesMax, BytesMax: -1}
	}
	live := m.liveBytesMax()
	return keyindex.FilterBudget{
		SeqMapBytesMax: seqMapBytesMax,
		BytesMax:       max(live-4*m.memtableBytesMax-live/mergeShareDen-live/memoryReserveDen, 0),
	}
}
