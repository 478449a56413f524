// Package keyindex holds the in-memory side of the backend's
// log-structured idempotency index: the run record (u64be chain id | key
// digest | u64be seq, RecordSize bytes, ordered by its first
// RecordPrefixSize) and what is built over records: their sort
// (SortRecords, a bucket sort by chain and digest), the blocked Bloom
// filters of a run (FilterWords, FilterAdd, FilterBytesMayContain) and of a
// whole file (Filter), the seq map beside the file's filter (SeqMap), a
// run's radix map of its chunks (Radix) and the search of a chunk
// (SearchChunk, interpolating between uniform digests).
//
// It reads and writes no file: internal/keyrun keeps the runs in their
// buckets (writes, merges, the run cache), and the backend owns the keys
// bucket and the transactions.
package keyindex
