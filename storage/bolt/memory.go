package bolt

import (
	"fmt"

	"github.com/ledgerworks/ledger/storage/bolt/internal/keyindex"
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
	// memoryReserveDen is the part of the bound kept for what the handle
	// holds besides its tables, merges and key index: the read pool, the
	// write scratch, the chains' ids, the runtime.
	memoryReserveDen = 32
	// mergeShareDen is the part of the bound a merge of key runs may hold
	// live: its records twice (the merged chunks and bbolt's pages of
	// them), an eighth of the bound, doubled by the Go heap's garbage.
	mergeShareDen = 8
	// mergeBytesPerRecord is what a merge holds per record.
	mergeBytesPerRecord = 2 * keyindex.RecordSize
)

// memoryBudget is what Options.MemoryBytesMax leaves the key index.
type memoryBudget struct {
	// bytesMax is Options.MemoryBytesMax, or negative when unbounded.
	bytesMax int64
	// memtableBytesMax is the bound of one memory table, counted with or
	// without the log (a handle may replay one a crash left).
	memtableBytesMax int64
}

// mergeRecordsMax is keyrun.Cache.MergeRecordsMax under the bound.
func (m memoryBudget) mergeRecordsMax() uint64 {
	if m.bytesMax < 0 {
		return 0
	}
	return uint64(m.bytesMax / mergeShareDen / mergeBytesPerRecord)
}

// runRecordsMax is keyrun.Cache.RunRecordsMax under the bound: the
// transaction that finishes a merge holds the run's filter twice (its
// bytes and bbolt's pages of them), within a merge's share.
func (m memoryBudget) runRecordsMax() uint64 {
	if m.bytesMax < 0 {
		return 0
	}
	return keyindex.FilterKeysMax(uint64(m.bytesMax / mergeShareDen / 2))
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

// filterBudget is the bound of the next key filter and its seq map: half
// the handle's bound (a Go heap grows to twice what is live before it
// collects, with GOGC at its default of 100), less the memory tables and a
// checkpoint's transaction (four tables), a merge's share and the reserve.
// The run filters take none of it: lookups read them where they lie in the
// file's map (keyrun.View), file-backed memory the kernel pages in and out.
func (m memoryBudget) filterBudget(seqMapBytesMax int64) keyindex.FilterBudget {
	if m.bytesMax < 0 {
		return keyindex.FilterBudget{SeqMapBytesMax: seqMapBytesMax, BytesMax: -1}
	}
	return keyindex.FilterBudget{
		SeqMapBytesMax: seqMapBytesMax,
		BytesMax:       m.bytesMax/2 - 4*m.memtableBytesMax - m.bytesMax/mergeShareDen - m.bytesMax/memoryReserveDen,
	}
}
