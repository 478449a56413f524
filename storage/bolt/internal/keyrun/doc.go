// Package keyrun keeps the backend's idempotency index in its bbolt
// buckets: the recent keys and the runs.
//
// The recent keys are exact, u64be chain id | key -> u64be seq in the keys
// bucket, with their count in the meta bucket (RecentCountKey); a run is
// an immutable bucket under key_runs, named u8 level | u64be txid (Name;
// a run whose name a run or merge output of the same transaction holds
// takes the first free level above, View.newName),
// of chunks (up to keyindex.ChunkRecords records, fewer in a merge's
// output under a small bound, each keyed by its last record's prefix), a "filter" (the run's Bloom filter, little-endian
// words) and a "count" (u64be). View.Flush writes a transaction's new keys
// at commit: a batch of DirectMin keys or more as a run of its own, a
// smaller one into the recent keys, which become a run once they are
// RecentMax; View.Add merges the runs of a level once it holds Fanout
// (all of them, or as many of the smallest as fit Cache.RunRecordsMax)
// into a run of a higher level, in the same transaction when the merge
// fits Cache.MergeRecordsMax, else over later transactions: the merge in
// progress (MergeBucket: its sources, how far it read each, its output
// so far) takes each transaction that writes a run at most
// MergeRecordsMax/StepShareDen records further (View.Step), and the one
// after its last records moves the output under key_runs with its filter
// and deletes the sources, which lookups see until then. One merge is in
// progress at a time; a merge bucket whose sources are gone is dropped.
// What a merge holds on the heap, per record and per run, is MergeBytes,
// StepBytes and FinishBytes, from which the backend derives the two
// bounds.
// View.Load lists the runs as of a transaction's snapshot, View.Lookup
// and RecentSeq look a key up, View.Bucket and View.EachChunk walk the
// runs, and Cache remembers across transactions what was read of them.
//
// It works inside a transaction the backend owns, through Host (the bbolt
// transaction, the key_runs bucket, the run cache, how the backend names
// the file and a failed write in its errors) and RecentHost (the keys and
// meta buckets, and the renewal of the keys bucket). The file's filter,
// the seq map, the scans and the lookups' order stay with the backend; the
// records, filters and searches are keyindex's.
package keyrun
