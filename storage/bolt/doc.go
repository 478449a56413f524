// Package bolt is the embedded default backend of the ledger: one bbolt file,
// one writer process.
//
// # Basics
//
// Open creates the file (mode 0600) when it is missing. The file holds six
// top-level buckets:
//
//	meta      "format" -> "ledger/bolt/v2"; "next_chain_id" -> u64be;
//	          "recent_keys" -> u64be (how many keys the keys bucket holds)
//	chains    chain name -> u64be chain id | u64be head seq | head hash (32) | i64be head time
//	entries   u64be chain id | u64be seq -> entry bytes (encoded by the chain package)
//	keys      u64be chain id | idempotency key -> u64be seq (recent keys)
//	key_runs  u8 level | u64be txid -> bucket of one run:
//	            u64be chain id | key digest (16) of its last record -> up to 120 records
//	              of u64be chain id | key digest (16) | u64be seq, sorted
//	            "filter" -> Bloom filter of the run's records; "count" -> u64be
//	state     key -> value (derived state of the domain packages)
//
// Chains get a dense numeric id when their first entry is written, so the
// entries of one chain are contiguous in the entries bucket and a chain's
// appends always land at the end of its range. The entries bucket is written
// with FillPercent 1.0 because it is append-only: pages are packed full.
//
// The idempotency index is log-structured, because a random key inserted
// into one large B-tree dirties a page of its own and an index of a million
// keys then costs a page write per appended entry. A transaction with fewer
// than KeyRunDirectMin (16) new keys puts them into the keys bucket (exact keys);
// when it holds KeyRecentMax keys they are written out as one sorted run of
// digests (KeyDigest). A transaction with more new keys writes them as a run
// directly. Runs are immutable; when a level (floor(log8(records))) holds
// KeyRunFanout runs they are merged into one run of a higher level in the
// same transaction. A lookup checks the transaction's own new keys, the keys
// bucket, then each run whose filter (about 1% false positives, cached in
// memory at about 1.25 bytes per key) may hold the key, the highest levels
// first. A handle opened for writing also keeps one filter over every
// committed key of the file, the keys bucket and all runs (keyfilter.go): it
// is asked first, and its "no" proves a key new in one cache line instead of
// a probe per run. It is built by the first write transaction that looks a
// key up, from that transaction's snapshot, and after each commit takes the
// commit's new keys; a rolled-back transaction leaves it as it was, and a
// failed commit drops it (the next write transaction builds it again). Keys
// never leave the index and only the process holding the exclusive lock
// writes the file, so it cannot miss a key. A read-only handle has none. A digest stands for
// a key, so the chain package checks that the entry it finds holds the key
// it asked for: a collision of 128-bit digests could refuse a key, never
// answer for another. Files of the previous layout (ledger/bolt/v1, keys
// bucket only) are upgraded when opened for writing. Tests that damage a file
// on purpose reach entries through ChainID and EntryKey, and the index
// through KeySeq and SetKeySeq, which find a key in either part.
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
//
// bbolt trusts the file and panics on a damaged page. The backend recovers
// those panics (recover.go): a transaction that met one returns an error
// matching storage.ErrCorrupt from then on and is never committed. A
// writable open of an existing file first walks it read-only, because bbolt
// rebuilds its freelist (the file keeps none) on a goroutine of its own where
// a panic cannot be recovered; the walk costs about 50 ms per million
// entries. After a recovered panic the damaged file's memory map stays
// mapped until the process ends.
//
// The first write transaction of a handle that looks a key up builds the
// in-memory filter of every key: it reads every record of the index once.
// Measured with the page cache warm on the 2-core machine of
// docs/PERFORMANCE.md while other work ran (files of the benchmark, one
// keyed entry each): 35 to 50 ms at 1,000,000 keys (the open, with its walk,
// took 320 ms) and 1.2 to 1.4 s at 10,000,000 (the open took 3.1 to 3.3 s).
// The filter is sized for twice the keys it holds, 1.25 to 2.5 bytes per key
// (12.5 to 25 MiB at 10,000,000), and rebuilt the same way by the first
// write transaction after it has filled, so that transaction pays the read
// of the index again: at each doubling of the keys, about once per key over
// the life of a file.
package bolt
