// Package bolt is the embedded default backend of the ledger: one bbolt file,
// one writer process.
//
// # Basics
//
// Open creates the file (mode 0600) when it is missing, formatted under a
// temporary name in the same folder and then linked to its name, so that a
// file at the path is always a formatted ledger (a process killed while it
// creates one leaves at most a ".<name>.new-*" file behind, which a later
// writable open removes once it is a minute old and unlocked). The file holds
// six top-level buckets, and a seventh while a merge of key runs is in
// progress:
//
//	meta      "format" -> "ledger/bolt/v3"; "next_chain_id" -> u64be;
//	          "recent_keys" -> u64be (how many keys the keys bucket holds);
//	          "checkpoint_lsn" -> u64be (the last log record the file holds)
//	chains    chain name -> u64be chain id | u64be head seq | head hash (32) | i64be head time
//	entry_segments
//	          u64be chain id | u64be seq of the segment's last entry ->
//	            u32be n | n × u32be end offset | the n entries' bytes
//	            (entries as the chain package encoded them, seqs last-n+1..last)
//	keys      u64be chain id | idempotency key -> u64be seq (recent keys)
//	key_runs  u8 level | u64be txid -> bucket of one run (a transaction
//	          that writes two runs of one level names the second a level up):
//	            u64be chain id | key digest (16) of its last record -> a chunk:
//	              up to 32,768 records (1 MiB; 120 in files written before)
//	              of u64be chain id | key digest (16) | u64be seq, sorted
//	            "filter" -> Bloom filter of the run's records; "count" -> u64be
//	state     key -> value (derived state of the domain packages)
//	key_merge "sources" -> n × run name; "read" -> n × u64be (records
//	          taken from each); "written" -> u64be; "output" -> the name
//	          of the run being written, a bucket beside of its chunks so far
//
// Chains get a dense numeric id when their first entry is written, so the
// entries of one chain are contiguous in the entry_segments bucket and a
// chain's appends always land at the end of its range. Entries are stored
// several to a value (internal/segment): a chain's consecutive entries fill a
// segment up to SegmentBytesMax (16,344 bytes: two segments, with their
// keys, fill eight 4 KiB pages), so that the B-tree holds a key per
// segment, not per entry. A write transaction collects each chain's new
// entries and writes a segment when it is full and at commit; the next
// transaction that appends to the chain starts from its last segment when
// the entry fits there, and replaces it. A lookup of (chain, seq) seeks the
// first key at or after it, the segment that holds seq. A read transaction
// that reads 64 entries of one chain in a row (a replay's pooled
// transaction, which serves thousands) maps the chain's segments once, 32
// bytes each in memory, up to SegmentIndexSegmentsMax, and from then on
// looks a seq up where it falls among the chain's seqs (segments fill to
// about the same size), a few steps from there at most before it halves
// (internal/segment); a segment after the first begins one
// seq past the one before it, so the map knows where the entry sits in the
// segment and reads its count and offsets at once, checked as a decode
// checks them; write transactions always seek. The bucket is
// written with FillPercent 1.0 because it is append-only: pages are packed
// full. Files of the earlier formats (ledger/bolt/v2 and v1: one value per
// entry in an "entries" bucket) are read as they are and upgraded when
// opened for writing, in transactions of 64 MiB of entries under an
// "upgrade" bucket that readers ignore, and one more that switches the
// format: a process killed during the upgrade leaves a v2 file, and the
// next writable open goes on from where it stopped.
//
// The idempotency index is log-structured, because a random key inserted
// into one large B-tree dirties a page of its own and an index of a million
// keys then costs a page write per appended entry. A transaction with fewer
// than KeyRunDirectMin (16) new keys puts them into the keys bucket (exact keys);
// when it holds KeyRecentMax keys they are written out as one sorted run of
// digests (KeyDigest). A transaction with more new keys writes them as a run
// directly. Runs are immutable; when a level (floor(log8(records))) holds
// KeyRunFanout runs they are merged into one run of a higher level: in the
// same transaction when the merge fits what one transaction may merge (see
// Memory), else over the following transactions that write a run, each of
// which writes the next records of the merge's output (a quarter of that
// at most) into the key_merge bucket, until one moves the output under
// key_runs, with its filter, and deletes its sources. Until then lookups
// see the sources and nothing reads the output; every step is one bbolt
// transaction, so a process that stops anywhere leaves the merge where
// its last commit left it, and the next writer goes on from there. One
// merge is in progress at a time; a level that fills meanwhile waits for
// it. The runs of a file thus stay fewer than KeyRunFanout a level: at
// 100,000,000 keys under the default bound, about twenty, most of the keys
// in a few runs of up to 16,694,272 records (what the merge that writes
// a run holds is bounded, see Memory). A lookup checks the transaction's own new keys, the keys
// bucket, then each run whose filter (about 1% false positives, cached in
// memory at about 1.25 bytes per key) may hold the key, the highest levels
// first. A run's chunks are large values, which bbolt keeps contiguous in
// overflow pages, so a run of a million keys is 31 values under one branch
// page; a read transaction that searches a run often keeps a table of its
// chunks (no B-tree descent). Digests are uniform, so a chunk of one chain
// is searched in the slice of its digest range that the key falls in (each
// run keeps where each slice of 32 records begins, 2 bytes each), from the
// record where the key's digest falls in the slice, a few steps at most
// before it halves; a chunk of several by interpolating between digests. Readers take chunks of any
// whole number of records, so files written with smaller chunks read
// unchanged.
// A handle opened for writing also keeps one filter over every committed
// key of the file, the keys bucket and all runs (internal/keyindex): it
// is asked first, and its "no" proves a key new in one cache line instead of
// a probe per run. A writable Open builds it from the file (reading about
// 32 bytes per key), and after each commit it takes the commit's new keys;
// a rolled-back transaction leaves it as it was, and a failed commit drops
// it (the next write transaction builds it again). Keys never leave the
// index and only the process holding the exclusive lock writes the file, so
// it cannot miss a key. A read-only handle has none.
//
// Beside that filter, a writable handle given Options.EntryKey (chain.Open
// and chain.OpenBackend give it their record format's) keeps a seq map
// (internal/keyindex): for each key of the filter, a 24-bit fingerprint and the
// key's seq in 8 bytes, in an open-addressing table built and updated with
// the filter. A retry's fingerprint names the entry it most likely has;
// ReadKey reads that entry and answers with it when the key it holds (the
// function EntryKey) is the key asked for, without searching the key runs:
// two cache misses, the map's slot and the entry, where the runs cost the
// filters, then a run record, then the entry. A candidate that holds another
// key (two keys with one fingerprint), or that the read view lacks, leaves
// the answer to the runs in the same view. A map that holds every key of its
// filter also rules new keys out in its place; one that had to leave a key
// out (a seq of 2^40-1 or more, a map 90% full) only names candidates from
// then on. Options.SeqMapBytesMax bounds it (SeqMapBytesMaxDefault, 256
// MiB): a map that would be larger is built at the bound, as long as the
// keys there are fill at most 80% of it, and a file with more keys has
// none; the keys a map lacks are read through the runs.
//
// The Backend is a storage.KeyProber (probe.go): MayHoldKey asks that
// filter, under the chain's id from an in-memory map of the file's chains
// (complete up to ChainIDsMax names), and the log's memory tables, without
// a transaction, so that the chain package's Append sends a new key
// straight to its committer instead of looking it up in a read transaction
// first. Its "no" is exact for every commit acknowledged before the call;
// its "maybe" may be wrong (the filter's false positives), and a read-only
// handle always says "maybe". The committer's lookup in the write
// transaction decides in every case. The Backend is also a
// storage.KeyReader (replay.go): ReadKey answers a retry in one pass (one
// digest of the key, the chain's id from that map, the seq map's candidate
// read in a pooled read transaction when there is one; otherwise the
// filter, whose line it loads together with the lines of the run filters a
// lookup would probe next, then the read transaction's runs and entry, and
// the durable memory tables) and copies the entry; its "absent" is a hint
// like the probe's "no".
// It is a storage.KeyBatchReader too (replaybatch.go): ReadKeys answers a
// retried batch as ReadKey would each key, with the keys digested in
// lanes, one read view, and each pass's cache misses (the seq map's lines,
// the candidates' entries, then for the keys left the run records and
// their entries) asked for ahead (internal/prefetch) so that they
// overlap. A digest stands for a key, so the chain package checks that the entry it finds holds the key
// it asked for: a collision of 128-bit digests could refuse a key, never
// answer for another. Files of the first layout (ledger/bolt/v1, keys
// bucket only) are upgraded when opened for writing. Tests that damage a file
// on purpose reach entries through ChainID, RawEntry, PutRawEntry and
// DeleteRawEntry, whatever segment holds them, and the index through KeySeq
// and SetKeySeq, which find a key in either part.
//
// A transaction with the log is a storage.KeyPreparer (keyprepare.go):
// PrepareKeys looks a batch of keys up layer by layer (every memory table
// under one hold of its lock, then the file: chain ids once per run of
// one chain's keys, the keys' digests in BLAKE3 lanes, the filter, the
// runs), so that their cache misses overlap, and LookupKey answers the next
// prepared key from it together with the transaction's own appends. A key
// the preparation could not finish is looked up as if not prepared.
//
// # Packages
//
// The backend is this package: Open and the handle (bolt.go, create*.go,
// limits.go, errors.go), transactions on the file (tx.go, entries.go),
// the key index's file-wide filter and the lookups, scans and
// preparation over its recent keys and runs (keyindex.go, keyfilter.go,
// keyscan.go, keybatch.go, keyprepare.go, probe.go, replay.go,
// replaybatch.go), the log's transactions, commit and checkpoint
// (log.go, logtx.go, fork.go), backups (backup.go), its identity and loss (logidentity.go,
// logloss.go), the recovery of bbolt's panics (recover.go), the upgrade
// of older formats (upgrade.go) and the hooks of tests that damage a file
// (rawentry.go, inspect.go).
// Each internal package has one job and its own tests; its imports point
// down only:
//
//	storage/bolt
//	 ├── internal/wal        the log's segments, records, sync, recovery scan
//	 ├── internal/memtable   the log's commits not yet in the file
//	 │    └── internal/commitrec   the commit record codec
//	 ├── internal/segment    the entry segments' bytes, builder, per-chain map
//	 ├── internal/keyrun     the key index in its buckets: recent keys, the
//	 │    │                  runs' flush, merges (spread over transactions),
//	 │    │                  list, lookup, chunk tables, the run cache
//	 │    └── internal/keyindex   run records, their sort, Bloom filters,
//	 │                            seq map, a run's radix map, the chunk search
//	 ├── internal/readpool   idle read transactions kept between checkpoints
//	 └── internal/mapscan    read-ahead and release of a long scan's pages
//
// None of them imports another except memtable, which takes commitrec's
// operations, and keyrun, which keeps keyindex's records in the buckets
// of a bbolt transaction the backend hands it (keyrun.Host: the
// transaction, the key_runs bucket, the run cache, the file's name and
// write errors; keyrun.RecentHost adds the keys and meta buckets). The
// backend imports keyindex too, for the file's filter and its seq map.
// All of them may import the storage contract.
//
// # The write-ahead log
//
// With Options.Log set to LogOn a commit is not a bbolt commit. A writable
// transaction reads through its own writes, then the memory tables, then a
// bbolt read transaction, and collects its writes; Commit encodes them as
// one commit record (record.go, docs/FORMAT.md), appends it to the log in
// the directory <path>-wal (internal/wal: one pwritev and one fdatasync
// of a preallocated segment) and only then applies it to the active memory
// table and publishes it to new transactions. A failed log append returns
// an error matching storage.ErrIO and applies nothing. One writable
// transaction runs at a time (a writer slot, whose wait honours the
// context), as with bbolt's own writer lock.
//
// A log transaction is a storage.AsyncCommitter: CommitAsync queues the
// record in the log without a system call (the group sync writes everything
// queued with one pwritev, then fdatasyncs), applies it to the memory table
// from the operations in hand, publishes it to the writable
// transactions begun after it and releases the writer slot; read-only
// transactions and forks see it only once a group sync (internal/wal
// Sync) has made it durable, and its wait returns then. The chain
// package's committer runs the next group while the previous one syncs.
// A sync that fails fails that commit and every later one (they may build
// on it) with storage.ErrIO and stops the handle; reopening recovers the
// durable prefix. Commit is CommitAsync followed by its wait.
//
// With the log the file changes only when a checkpoint commits, so every
// transaction between two checkpoints reads the same snapshot of it: a
// transaction's bbolt read transaction goes back to a small pool when it
// ends (internal/readpool, up to 8 idle) and the next transaction reuses it, with
// the buckets and runs it opened. One is kept only while it reads the
// file's last commit, and a bbolt write transaction empties the pool
// before it begins (its commit may grow the file's map, which waits for
// every read transaction to end). Close and a crash-like abandon empty it
// too.
//
// A memory table (internal/memtable) holds, per chain, its entries in seq order
// with the head after each, its idempotency keys, and the state puts and
// deletes in key order. Every item carries the LSN of its commit, and a
// transaction sees only the items of commits up to the LSN it began at:
// entries and keys are only ever added, heads follow from the entries, and
// state keeps one version per commit, so a snapshot costs nothing to take.
// Readers copy bounded chunks under the table's lock and never hold it
// while they yield to a caller's loop. Lookups of idempotency keys ask the
// transaction, then the memory tables, then the file, whose key filter only
// knows checkpointed keys.
//
// When the active table holds Options.MemtableBytesMax (8 MiB by default,
// payload plus an estimate of the overhead of each item), the next writable
// transaction freezes it: the log rotates to a new segment, a new table
// starts, and a goroutine checkpoints the frozen one. A checkpoint
// (log.go) applies the table to the file through the write path of a
// transaction without the log (heads, the key index with its runs and
// filter, state, FillPercent 1.0), writes meta/checkpoint_lsn in the same
// bbolt transaction, commits (bbolt's two fdatasyncs, once per table),
// drops the table from the view and releases the log's segments it covered.
// A table of several commits is written in two bbolt transactions, all but
// its last commit and then the last, so that a file opened from its older
// meta page lacks only the last commit. If the previous checkpoint still
// runs when the next table fills, the writer waits for it: at most two
// tables exist. A transaction takes the tables before its bbolt read
// transaction; a checkpoint commits the file before it drops a table, so a
// view may find a table's items both in memory and in the file (reads take
// each once: entries and keys after the file's head of the chain, state by
// the newest layer), never in neither. Close checkpoints everything, closes
// the log and removes its directory: a cleanly closed ledger is one bbolt
// file again.
//
// Open reads meta/checkpoint_lsn, opens the log and replays every record
// past it into a memory table. A writable open checkpoints it before it
// returns, so that a recovered ledger is a plain file again; a read-only
// open keeps it in memory and writes nothing. A log left by a crash is
// replayed whatever Options.Log says.
//
// The log is found from the file, not from the path string, and tied to
// it (logidentity.go, docs/FORMAT.md "Recovery rules"). Its folder is
// named from the file's real path, symbolic links resolved. The file's
// meta bucket records the identity of its log (log_id, also in the header
// of every segment), whether it is open (log_state, set before a handle's
// first log record and cleared by a clean close) and the log's folder
// (log_dir), by which an open through another hard link of the same file
// finds it; a file with several hard links is opened through any of them,
// and a copy never shares its original's log. Recovery is strict: only a
// torn final record followed by unwritten space ends the log. A segment of
// another log (another ledger's, or another lineage of this file's), a
// damaged record with valid data after it, a gap or a missing segment, a
// file in the folder the log did not write, and a missing folder when the
// file says it is open fail the open, read-only or writable, with an error
// matching storage.ErrCorrupt that names the segment and offset, and leave
// the log untouched; AcceptLogLoss (ledgerctl accept-log-loss) is the
// operator's explicit step past it. A log of an earlier version (no
// headers, no log_id) is replayed by its own rules once and replaced.
// A clean Close whose last step, removing the folder, fails (a stray file)
// logs a warning to Options.Logger and returns nil: every commit is in
// the file, which says so.
//
// LogOn is LogModeDefault; LogOff
// commits every transaction straight to the file, a bbolt commit each,
// which rewrites the last segment of every chain it appended to (up to
// SegmentBytesMax each): small commits write more bytes than with the log,
// whose checkpoints rewrite a chain's last segment once per table.
//
// # Memory
//
// A writable handle keeps in memory, apart from the file's map (which the
// kernel pages in and out and is not counted here), per key of the file:
//
//	key filter      1.25 to 3.75 bytes: one filter over every key, sized
//	                for three times the keys it was built with, so that a
//	                new key is proved new in one cache line
//	seq map         10 to 30 bytes (8-byte slots, 1.25 per key of the
//	                filter's capacity): names the entry a retry most
//	                likely has, so that a replay reads it without the runs
//	radix maps      2 bytes per 32 records of each run written or searched
//
// per run, while the merge that writes it lasts (keyrun's MergeBytes,
// StepBytes and FinishBytes, checked against what they allocate):
//
//	a merge in one transaction
//	                96 bytes a record (the records, bbolt's pages of them,
//	                and their copy when the commit grows the file's map,
//	                as bbolt copies every value its nodes hold out of the
//	                old map), the new run's filter four times (1.25 bytes a
//	                record each) and its radix map
//	a step of a merge spread over transactions
//	                96 bytes a record of the step, and the output's last
//	                leaves that bbolt rewrites (eight chunks of the step)
//	the transaction that finishes it
//	                the run's filter three times (its bytes, bbolt's pages
//	                of them and their copy), 3.75 bytes a record of the run
//	every merge     bbolt's freelist for the pages of the runs it deletes
//	                (keyrun.FreedPageBytes, 96 bytes a page: under a byte a
//	                record), which it keeps until they are used again
//
// and, whatever the ledger's size: the memory tables (two of
// MemtableBytesMax at most), a checkpoint's bbolt transaction (its dirty
// pages, about one table's worth) and the read pool. The runs' Bloom
// filters are not copied: a transaction reads each run's filter where it
// lies in the file's map, at its first lookup, and probes it there
// (file-backed pages, which the kernel keeps while lookups use them and
// drops under pressure; bbolt remaps the file only when no read
// transaction is open, and a write transaction's own remap comes in its
// commit, after its lookups).
//
// Options.MemoryBytesMax (MemoryBytesMaxDefault, 512 MiB) bounds all of
// it, the Go runtime's garbage included. The heap grows to (100+GOGC)% of
// what is live before the collector runs (read from the runtime when the
// handle opens), and the runtime keeps up to a tenth more mapped before its
// scavenger returns it, so what may be live is
//
//	L = MemoryBytesMax × 100/(100+GOGC) × 100/110
//
// (232.7 MiB of 512 at GOGC 100), shared out as:
//
//	memory tables   4 × MemtableBytesMax (two tables, a checkpoint's
//	                transaction, a table replayed); MemtableBytesMax is at
//	                most a sixteenth of the bound
//	merges          L/3: MergeRecordsMax, the records one transaction
//	                merges, is the most whose MergeBytes fit (716,347 under
//	                the default), a step writes a quarter of that at most
//	                (keyrun.StepShareDen), and RunRecordsMax, the records of
//	                a merged run, is the most whose FinishBytes fit
//	                (16,694,272): a level whose runs would merge into more
//	                merges as many of its smallest runs as fit into a run
//	                one level up, two at least
//	reserve         L/16, for the rest: the read pool, the write scratch,
//	                the chains' ids, the radix maps
//	index           what remains: the key filter, sized for three times
//	                the keys when that fits, else as large as fits and then
//	                never rebuilt (a rebuild could only set the same bits in
//	                a filter of the same size, after reading every key
//	                again; past the keys that size is for, its false
//	                positives climb), then the seq map, which takes what is
//	                left up to SeqMapBytesMax and is not built when that
//	                holds too few slots for the keys
//
// A rebuild that would hold the old filter and the new one together past
// the bound drops the old one first (lookups go to the runs until the new
// one is stored). Under the default bound and memory tables (8 MiB) that
// leaves 108.6 MiB to the index: a seq map for a filter built at up to
// about 8,300,000 keys (replays of a larger file read the runs), and, at
// the first rebuild past about 30,000,000 keys (where a filter for three
// times the keys no longer fits), a key filter as large as fits, built
// once, at its 1% rate up to about 91,000,000 keys (9 bits a key at
// 100,000,000). Of what the handle holds per key only the radix maps are
// not sized within the index's share (about 6 MiB at 100,000,000 keys):
// they come out of the reserve. A larger MemtableBytesMax leaves less of
// the bound to the index (32 MiB: 12.6 MiB, a filter of a bit a key at
// 100,000,000 keys, which lets most new keys through to the run filters).
//
// # Caveats
//
// The memory bound is a budget of the parts above, with the Go heap at
// (100+GOGC)% of what is live and a tenth more kept mapped, not a limit the
// runtime enforces: a process that sets GOMEMLIMIT below the bound makes
// the collector run more often instead. What else the process holds (the
// server, the application) comes on top of it.
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
// Without a memory bound (MemoryBytesMax negative) the filter is sized for
// three times the keys it holds, 1.25 to 3.75 bytes per key (12.5 to 37.5
// MiB at 10,000,000), its seq map for 1.25 times that capacity, 10 to 30
// bytes per key (at 10,000,000 keys, 100 MiB to SeqMapBytesMaxDefault, 256
// MiB; a filter built at 8,900,000 keys or more, for three times as many,
// has a map of that size, which may fill before the filter is rebuilt);
// under one they are smaller (see Memory). Both are rebuilt the same way by the
// first write transaction after it has filled, so that transaction pays the
// read of the index again: each time the keys triple, about half a read per
// key over the life of a file. (A factor that is not a power of two keeps
// the rebuilds away from the merges of the key runs, which come at powers
// of KeyRunFanout.)
//
// With the log on, the ledger is the file plus, while it is open or after a
// crash, the directory <path>-wal (mode 0700). Copy a ledger only while it
// is closed, with Backup (backup.go: ledgerctl backup, which folds the log
// in), or with ledgerctl export; a copy of the file alone taken while
// it is open lacks what the log holds, and its open fails (the file says
// its log is open) until AcceptLogLoss accepts that. The log's segments are written with
// zeros before their first record; they grow from 1 MiB, each twice the
// previous, to Options.LogSegmentSizeBytes (LogSegmentSizeDefault, 8 MiB),
// and spares are zero-filled ahead only at that size, so a new log needs
// 1 MiB of free space before its first commit. Released segments of the
// full size are kept as spares, as many as one memory table's records fill
// and two more (MemtableBytesMax / LogSegmentSizeBytes + 2: 3, 24 MiB, with
// the defaults), so that the log rarely writes a segment of zeros: a
// checkpoint releases a table's segments at once, and the next table
// fills as many again.
//
// The memory tables hold up to twice MemtableBytesMax; a reader that holds
// a transaction keeps the tables of its view alive until it ends. A crash
// costs the next Open the replay of everything since the last checkpoint
// (up to two tables) and a checkpoint of it.
//
// A full disk with the log, which keeps every acknowledged commit (see
// docs/GUARANTEES.md): until a checkpoint has moved it into the file and
// released the log, a commit takes room twice, in the log and then in the
// file. A commit needs room only when the log starts a new segment; a
// segment that cannot be created refuses that commit with an error
// matching storage.ErrIO in the system's words ("no space left on
// device"), writes nothing, and the next commit tries again, so commits
// resume in the same process once there is room. A failed write or sync
// into a segment that holds records, and a checkpoint that fails (a full
// disk, an I/O error), stop the log: every later commit returns an error
// matching storage.ErrIO until the ledger is reopened; reads keep working.
// Close on a disk too full for its final checkpoint closes the files,
// keeps the log and returns an error matching storage.ErrIO that says so.
// A read-only Open reads everything, the log replayed in memory. A writable
// Open checkpoints the recovered log first; when that does not fit it
// returns an error matching storage.ErrIO, the log is unchanged, and the
// file holds what it held or, when the first of the checkpoint's two bbolt
// transactions fitted, also whole commits of the log, which the next Open
// skips: free room for the log's contents and open again.
//
// A writable transaction of the log holds a bbolt read transaction while
// it runs, as every reader does; a checkpoint whose commit grows the file's
// memory map waits for every read transaction to end (so a file opened for
// writing with the log is mapped LogInitialMmapSizeDefault, 1 GiB, from the
// start on 64-bit platforms, and grown exactly, not in bbolt's 16 MiB
// steps), and a goroutine that holds a transaction and begins
// another meanwhile waits forever. Forks are begun on a goroutine of their
// own for that reason (fork.go).
package bolt
