// Package postgres is the PostgreSQL backend of the storage contract: the
// shared store for services that run on several machines and append to the
// same chains. It uses pgx (github.com/jackc/pgx/v5) with a connection pool.
//
// # Basics
//
// Open connects, applies the embedded schema migrations that the database
// lacks (migrations/NNNN_*.sql, each recorded in schema_migrations, all in
// one transaction under an advisory lock, so concurrent Opens are safe) and
// returns a Backend. Migrate does the same without opening a backend, for
// `ledgerctl migrate`. The tables live in Options.Schema, else in the
// connection string's search_path, else in the schema "ledger":
//
//	chains  (chain_id text PRIMARY KEY, head_seq bigint, head_hash bytea, head_time bigint)
//	entries (chain_id text, seq bigint, idempotency_key text NULL, data bytea,
//	         PRIMARY KEY (chain_id, seq), UNIQUE (chain_id, idempotency_key))
//	state   (key bytea PRIMARY KEY, value bytea)
//
// An entry without idempotency key stores NULL, and NULLs never collide in
// the unique constraint. Text columns use the "C" collation: names compare
// and sort as bytes.
//
// A writable transaction runs at READ COMMITTED. Head locks the chain's row
// in chains with SELECT ... FOR UPDATE until the transaction ends; for a
// chain without a row it first inserts a placeholder row (head_seq 0, ON
// CONFLICT DO NOTHING, which waits for a concurrent creator to finish), so
// two transactions never both believe they create the chain. Commit deletes
// placeholders that received no entry; they are never visible to others.
// Every Append locks the head first, so while a transaction holds a head, no
// other transaction can append to that chain: the seqs and keys it has read
// stay true until it commits. The constraints back this up: a second entry
// with the same (chain, seq) or (chain, key) cannot be stored, whatever the
// locks.
//
// A read-only transaction runs at REPEATABLE READ READ ONLY: all its reads
// see one snapshot, taken at its first statement, and take no locks.
//
// Appends and state writes are buffered in the transaction and sent in one
// pipelined round trip (one multi-row INSERT from unnest arrays, one UPDATE
// of all touched heads, one upsert and one delete of state keys) before a
// scan, when MaxBufferedEntries or MaxBufferedBytes is reached, and at
// Commit, in the same round trip as COMMIT. Point reads answer from the
// buffer first, so a transaction always sees its own writes. BEGIN travels
// with the first statement; a transaction that appends one keyed entry to an
// existing chain costs two round trips: lock the head and look the key up,
// then commit.
//
// In a writable transaction LookupKey locks the chain's head first (in the
// same round trip), so a key found missing stays missing until the
// transaction ends. Further look-ups on a chain in one transaction (a batch,
// a group commit) consult a per-chain Bloom filter of the chain's keys,
// which the backend keeps current from its own commits and catches up with
// one query when other processes appended; a key the filter does not hold
// needs no round trip (see keyfilter.go).
//
// A transaction is a storage.KeyPreparer (keyprepare.go): the keys of a
// batch of appends (chain.Tx.AppendBatch, a group commit) are looked up in
// one round trip that locks the heads of their chains (in name order) and
// joins the keys, sent as two arrays, with the unique index; LookupKey
// answers from it, and Entry from the entries found, which a replay reads.
// The same round trip reads the entries other processes appended to those
// chains since this one last saw them, which catch the key filters up and
// which Entries then serves without a round trip (caught.go).
// A key is taken as absent only when its chain's head was locked before
// the look-up ran. It is also a storage.KeyBatchScanner (keybatch.go): a
// verify reads a chain's key index in pages of KeyBatchScanPageSize rows,
// digested side by side.
//
// The Backend is a storage.KeyReader (replay.go): a retry's entry is read
// with one statement outside any transaction, SELECT seq, data ... WHERE
// chain_id = $1 AND idempotency_key = $2, which sees what was committed
// before it began, instead of a read transaction's three round trips. It is
// a storage.KeyBatchReader too: ReadKeys reads a retried batch's keys in
// one statement, the join PrepareKeys sends without its head locks. It is
// not a storage.KeyProber: ruling a key out would need its own round trip.
//
// # Errors and retries
//
// Unique violations map to storage.ErrDuplicate. A serialization failure
// (40001), a deadlock (40P01), a lock timeout (55P03), a terminated or lost
// connection before COMMIT, and a server that is shutting down or starting
// map to ErrRetryable: the server rolled the transaction back, and running
// it again from Begin is safe. Other server errors wrap storage.ErrIO.
//
// What this package retries by itself: the first round trip of a transaction
// (BEGIN and its first statement) when the pooled connection turns out to be
// dead, once, on a fresh connection; nothing had happened yet. It never
// retries a transaction that had begun: the caller's reads led to its
// writes, so only the caller (the chain package) can run it again.
//
// Commit returns nil only when the server confirmed COMMIT. If the
// connection fails after COMMIT may have reached the server, Commit asks
// pg_xact_status about the transaction's id on another connection; a
// transaction still in progress (its session has not noticed the failure)
// has its session terminated, which makes the outcome final. "committed"
// returns nil, "aborted" returns ErrRetryable, and when the server cannot be
// asked within Options.CommitTimeout Commit returns ErrCommitUnknown.
//
// # Caveats
//
// In a writable transaction a canceled context fails the call before it
// reaches the server and leaves the transaction intact; a statement already
// sent runs to completion (interrupting it would abort the transaction for
// every caller of a group commit). Options.LockTimeout bounds head waits.
//
// A writable transaction's reads of chains whose head it does not hold, and
// of state keys, see whatever was committed when each statement started
// (READ COMMITTED); the chain and domain packages lock the heads whose data
// they read before they write.
//
// A head locked while the transaction holds the head of a chain whose name
// sorts after it waits at most UnorderedLockWait, then the transaction fails
// with ErrRetryable: such waits are the ones that can form deadlocks, and
// this is faster than the server's deadlock detection. Heads locked in
// ascending order wait as long as needed.
//
// Seqs are stored as bigint: Append refuses a seq above MaxSeq with
// ErrSeqRange. Chain names and keys are text: the database must be UTF8,
// and Append refuses names that are not UTF-8 or hold NUL bytes (ErrText).
//
// The default schema search_path of a connection is replaced by the ledger's
// schema; point several ledgers at one database by giving each a schema.
package postgres
