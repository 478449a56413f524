// Package memtable holds the write-ahead log's committed transactions that
// are not yet in the bbolt file: per chain, its entries in seq order with
// the head after each and an index of their idempotency keys (KeyTable),
// and the state puts and deletes in key order (one version per commit).
// Every item carries the LSN of its commit and a reader sees only the
// commits up to the LSN of its view, so a snapshot costs nothing to take.
//
// A Table is applied to by one writer (Apply, with the Operations of a
// commit record, internal/commitrec) and read by any number of readers,
// which copy bounded chunks under its lock (EntriesChunk, StateChunk) and
// never hold it while they yield to a caller. The backend's checkpoint
// reads a frozen table through Walk.
package memtable
