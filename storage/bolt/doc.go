// Package bolt is the embedded default backend of the ledger: one bbolt file,
// one writer process.
//
// # Basics
//
// Open creates the file (mode 0600) when it is missing. The file holds five
// top-level buckets:
//
//	meta     "format" -> "ledger/bolt/v1"; "next_chain_id" -> u64be
//	chains   chain name -> u64be chain id | u64be head seq | head hash (32) | i64be head time
//	entries  u64be chain id | u64be seq -> entry bytes (encoded by the chain package)
//	keys     u64be chain id | idempotency key -> u64be seq
//	state    key -> value (derived state of the domain packages)
//
// Chains get a dense numeric id when their first entry is written, so the
// entries of one chain are contiguous in the entries bucket and a chain's
// appends always land at the end of its range. The entries bucket is written
// with FillPercent 1.0 because it is append-only: pages are packed full.
//
// # Caveats
//
// bbolt allows one process to open a file for writing. Open takes an
// exclusive file lock (a read-only Open takes a shared lock) and waits up to
// Options.LockTimeout for it; then it returns an error that wraps
// storage.ErrLocked and names the file. A read-only process therefore keeps
// writers out for as long as it holds the file open: read-only commands should
// open, read and close promptly.
//
// Within the process, bbolt runs one writable transaction at a time and any
// number of read transactions beside it; a long read transaction keeps the
// pages it sees from being reused, so the file grows while it lasts.
package bolt
