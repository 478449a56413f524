// Package keyrun keeps the runs of the backend's idempotency index in their
// bbolt buckets: a run is an immutable bucket under key_runs, named u8
// level | u64be txid, of chunks (up to keyindex.ChunkRecords records,
// keyed by their last record's prefix), a "filter" (the run's Bloom
// filter, little-endian words) and a "count" (u64be). It writes runs
// (View.Add, which merges a level once it holds Fanout runs), lists them
// as of a transaction's snapshot (View.Load), looks a digest up in them
// (View.Lookup), walks their chunks (View.Bucket, View.EachChunk) and
// remembers across transactions what it read of them (Cache).
//
// It works inside a transaction the backend owns, through Host: the bbolt
// transaction, the key_runs bucket, the run cache, and how the backend
// names the file and a failed write in its errors. The recent keys, the
// file's filter and the seq map stay with the backend; the records,
// filters and searches it uses are keyindex's.
package keyrun
