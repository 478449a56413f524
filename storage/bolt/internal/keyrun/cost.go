package keyrun

import "github.com/ledgerworks/ledger/storage/bolt/internal/keyindex"

// What a merge holds on the heap while its transaction lives, for the
// backend's memory budget to charge: every part of it that grows with the
// records merged or the size of a run.

// FreedPageBytes is what bbolt's freelist holds for each page a
// transaction frees: the page's id and the id of the transaction that
// allocated it in the pending list (8 bytes each, in slices that grow by
// doubling), its entry in the map of free and pending pages, and its id
// in the list of free pages once released, the old list and the new one
// both live while it is rebuilt. The file keeps no freelist
// (NoFreelistSync), so nothing is written for it.
const FreedPageBytes = 96

// freedBytes is what freeing the pages of runs of records holds: their
// chunks and filters (records × RecordSize and FilterBytes, packed full)
// in pages of pageBytes.
func freedBytes(records uint64, pageBytes int) uint64 {
	pages := (records*keyindex.RecordSize+keyindex.FilterBytes(records))/uint64(max(pageBytes, 1)) + 1
	return pages * FreedPageBytes
}

// MergeBytes is what a merge of records in one transaction (View.merge)
// holds: the merged records, bbolt's pages of them, and a copy of them
// when the commit grows the file's map (bbolt copies every value its
// nodes hold out of the old map first); the new run's filter four times
// (its words, its bytes, bbolt's pages and copy of them); its radix map;
// the freelist's bookkeeping of the sources' pages, in pages of
// pageBytes; and the leaves bbolt rewrites.
func MergeBytes(records uint64, pageBytes int) uint64 {
	return 3*records*keyindex.RecordSize + 4*keyindex.FilterBytes(records) +
		radixBytes(records) + freedBytes(records, pageBytes) + leavesBytes(min(records, keyindex.ChunkRecords))
}

// leavesBytes is what bbolt rewrites of a run of chunks of chunkRecords
// it adds to, besides the new chunks, and copies again when the commit
// grows the map: the last leaves and the branch above, which measure
// (TestMergeCosts) at about four chunks.
func leavesBytes(chunkRecords uint64) uint64 { return 8 * chunkRecords * keyindex.RecordSize }

// StepBytes is what a step of a merge in progress that writes records
// holds (View.Step): the records, bbolt's pages of them and their copy
// when the commit grows the map, and the output's leaves rewritten. The
// output's filter is not built until the merge finishes.
func StepBytes(records uint64) uint64 {
	return 3*records*keyindex.RecordSize + leavesBytes(StepChunkRecords(records))
}

// FinishBytes is what the transaction that finishes a merge of records,
// written in steps of stepRecords, holds (finishMerge): the new run's filter three times (its bytes,
// bbolt's pages of them, their copy when the commit grows the map), the
// freelist's bookkeeping of the sources' pages, in pages of pageBytes,
// and the run's leaves rewritten where the filter goes. The output's
// chunks are read where they lie in the file's map.
func FinishBytes(records, stepRecords uint64, pageBytes int) uint64 {
	return 3*keyindex.FilterBytes(records) + freedBytes(records, pageBytes) + leavesBytes(StepChunkRecords(stepRecords))
}

// radixBytes is the radix map of a run of records written in a
// transaction: 2 bytes per keyindex radix bucket of 32 records, and a
// slice header and a count per chunk.
func radixBytes(records uint64) uint64 {
	chunks := records/keyindex.ChunkRecords + 1
	return records/16 + chunks*(24+8+16)
}

// RecordsWithin returns the most records n for which cost(n) is at most
// bytes (0 when not even one fits); cost grows with n.
func RecordsWithin(bytes uint64, cost func(records uint64) uint64) uint64 {
	low, high := uint64(0), min(bytes/2+1, 1<<48) // every cost is at least 2 bytes a record
	for low < high {
		middle := low + (high-low+1)/2
		if cost(middle) <= bytes {
			low = middle
		} else {
			high = middle - 1
		}
	}
	return low
}
