package storage

import (
	"context"
	"fmt"
	"iter"

	"github.com/zeebo/blake3"
)

// HashSize is the size in bytes of an entry hash.
const HashSize = 32

// Head is the newest entry of a chain, as the chain package computed it.
type Head struct {
	Seq          uint64
	Hash         [HashSize]byte
	TimeUnixNano int64
}

// ChainHead is a chain's name with its head, as listed by Tx.Chains.
type ChainHead struct {
	Chain string
	Head  Head
}

// Record is one stored entry: its seq, its idempotency key (empty when it has
// none) and the bytes the chain package encoded.
type Record struct {
	Seq            uint64
	IdempotencyKey string
	Data           []byte
}

// Backend is a store of chains and state.
type Backend interface {
	// Begin starts a transaction. A writable transaction excludes other
	// writable transactions on the same chain heads until it ends.
	Begin(ctx context.Context, writable bool) (Tx, error)
	// Name describes the store for messages (a file path, a database URL
	// without its password).
	Name() string
	// Stats reports the space the store uses.
	Stats(ctx context.Context) (Stats, error)
	// Close releases the store. Transactions must have ended.
	Close() error
}

// Tx is one transaction. All reads see a consistent snapshot plus the
// transaction's own writes.
type Tx interface {
	// Writable reports whether the transaction may write.
	Writable() bool

	// Head returns the chain's head, or ErrNotFound for a chain with no
	// entries. In a writable transaction it also locks the chain's head
	// until the transaction ends (SQL: SELECT ... FOR UPDATE), so two
	// writers never append the same seq.
	Head(ctx context.Context, chain string) (Head, error)

	// Append stores rec as the chain's next entry and makes head the chain's
	// head. rec.Seq must equal head.Seq; the caller has read the previous head
	// in this transaction. It returns ErrDuplicate if the seq or the
	// non-empty idempotency key already exists in the chain.
	Append(ctx context.Context, chain string, rec Record, head Head) error

	// Entry returns the bytes stored at (chain, seq), or ErrNotFound.
	Entry(ctx context.Context, chain string, seq uint64) ([]byte, error)

	// LookupKey returns the seq of the chain's entry with that idempotency
	// key, or ErrNotFound.
	LookupKey(ctx context.Context, chain, key string) (uint64, error)

	// ScanKeys yields one KeyRef per record of the chain's idempotency
	// index, in no particular order, holding at most a bounded number in
	// memory; a chain with no entries yields nothing. It reads the index
	// itself, not the entries, so that a verifier can compare the two: a
	// record that names no entry, or an entry missing from the index,
	// shows as a difference. Like every read it sees the transaction's
	// snapshot plus its own writes.
	ScanKeys(ctx context.Context, chain string) iter.Seq2[KeyRef, error]

	// Entries yields the chain's records with seq >= fromSeq in seq order,
	// holding at most a bounded number in memory. Record.IdempotencyKey
	// is not filled in (the chain package decodes it from Data).
	Entries(ctx context.Context, chain string, fromSeq uint64) iter.Seq2[Record, error]

	// Chains yields every chain with its head, in byte order of the names,
	// starting at the first name >= from.
	Chains(ctx context.Context, from string) iter.Seq2[ChainHead, error]

	// StateGet returns the value stored under key, or ErrNotFound.
	StateGet(ctx context.Context, key []byte) ([]byte, error)
	// StatePut stores value under key, replacing any value there.
	StatePut(ctx context.Context, key, value []byte) error
	// StateDelete removes key; removing a missing key is not an error.
	StateDelete(ctx context.Context, key []byte) error
	// StateScan yields the pairs with start <= key < end in key order
	// (descending when reverse is set). A nil end means no upper bound.
	StateScan(ctx context.Context, start, end []byte, reverse bool) iter.Seq2[KeyValue, error]

	// Commit makes the writes durable and visible; for a read-only
	// transaction it is the same as Rollback.
	Commit() error
	// Rollback discards the writes. It is safe to call after Commit.
	Rollback() error
}

// Forker is implemented by a Tx that can open another read-only
// transaction on its own snapshot, so that one long read (a verify of a long
// chain) can be split among goroutines, each reading its part through its
// own transaction: a Tx is not safe for concurrent use, its forks are.
type Forker interface {
	// Fork begins a read-only transaction that sees exactly the committed
	// data the receiver sees: the same snapshot, not a newer one. It does
	// not see the receiver's uncommitted writes, so a writable receiver
	// returns an error wrapping errors.ErrUnsupported. When the snapshot
	// cannot be had now (a commit landed since the receiver began, or the
	// store is busy), the error wraps ErrRetry and the caller reads through
	// the receiver alone. The caller rolls the fork back, before the
	// receiver ends; the fork's reads are valid until then.
	Fork(ctx context.Context) (Tx, error)
}

// KeyPreparer is implemented by a Tx that looks many idempotency keys up
// for less together than one at a time (their memory loads overlapped,
// their digests hashed side by side), for an engine that is about to
// append many keyed entries in one transaction. Preparing is a hint: it
// changes no answer, only what the lookups that follow cost.
type KeyPreparer interface {
	// PrepareKeys looks keys up in the committed data the transaction
	// reads. The LookupKey calls that follow, for the same chains and keys
	// in the same order, answer from it together with the transaction's
	// own appends, which they check as always; a call for any other key
	// is answered as if nothing were prepared. A call replaces what the
	// previous one prepared. It looks up at most PrepareKeysMax keys; the
	// rest are not prepared. It keeps no reference to keys: the caller
	// reuses the slice.
	PrepareKeys(ctx context.Context, keys []ChainKey)
}

// HeadLocker is implemented by a writable Tx whose chain heads are row
// locks shared with other processes (storage/postgres), so that two
// transactions locking the same heads in different orders could each wait
// for the other. An engine that knows, or has learned from an attempt
// rolled back with ErrRetry, which chains a transaction writes locks all
// their heads before anything else, in one global order (ascending bytes
// of the names), where no such cycle can form.
type HeadLocker interface {
	// PrepareKeys is KeyPreparer's, and a ChainKey with an empty Key
	// asks for its chain's head only: every head named is locked, those
	// not held yet in ascending order, in the round trip that looks the
	// keys up. A chain without a head gets a placeholder, removed at
	// commit if nothing was appended to it.
	KeyPreparer
	// LockedHeads appends to dst the chains whose heads the transaction
	// holds, and those its last failed lock tried to take (in no order),
	// and returns it.
	LockedHeads(dst []string) []string
}

// CommitExecer is implemented by a writable Tx that runs SQL (see
// Execer) and can hold statements back until its commit, so that a group
// of callers each adding a statement whose outcome decides whether it may
// commit (a guard's SUCCESS record) costs one round trip at commit, not
// one each.
type CommitExecer interface {
	// ExecAtCommit queues sql to run when the transaction commits, with
	// the other statements so queued and the buffered writes, in the
	// round trip of the COMMIT, in queue order; it must not depend on the
	// transaction's own writes, which may be sent after it. With a none
	// error, sql is an INSERT, UPDATE or DELETE without RETURNING, and
	// affecting no row fails it with none. When a statement fails, Commit
	// fails with a *CommitExecError naming it (by its index from 0 in
	// queue order, which ExecAtCommit returns) and nothing is committed.
	ExecAtCommit(sql string, args []any, none error) (index int)
}

// CommitExecError is Commit's error when a statement queued by
// ExecAtCommit failed or its check refused it.
type CommitExecError struct {
	Index int   // the statement's index, from 0 in queue order
	Err   error // the statement's error or its check's
}

func (e *CommitExecError) Error() string {
	return fmt.Sprintf("storage: statement %d held for the commit: %v", e.Index, e.Err)
}

func (e *CommitExecError) Unwrap() error { return e.Err }

// PrepareKeysMax bounds the keys one PrepareKeys call takes, and so the
// memory it holds.
const PrepareKeysMax = 1 << 12

// ChainKey names an idempotency key of a chain.
type ChainKey struct {
	Chain, Key string
}

// AsyncCommitter is implemented by a writable Tx that can commit without
// waiting for its writes to become durable, so that a committer can run
// the next transaction while the previous one is being made durable.
//
// CommitAsync ends the transaction like Commit, except for when its writes
// become durable and whom they are visible to:
//   - when it returns nil, the writable transactions begun from then on
//     see the writes, and the writer exclusion is released, so the next
//     writable Begin does not wait for durability;
//   - read-only transactions (and their forks) see the writes only once
//     they are durable: a reader never sees a commit a crash could lose;
//   - wait blocks until the writes are durable and returns nil, or returns
//     an error wrapping ErrIO when they cannot be made durable. It may be
//     called from any goroutine, more than once, and returns the same
//     outcome each time for a commit that failed.
//
// A commit that fails to become durable fails every later one too (they
// may build on its writes): their waits return an error wrapping ErrIO,
// and the store refuses further writable transactions; the handle must be
// closed and the store reopened, which recovers what was durable. A
// CommitAsync that returns an error has written nothing, as with Commit.
// Commit on such a Tx is CommitAsync followed by wait. A read-only or
// empty transaction returns a wait that waits for the commits it read,
// if any were not durable yet.
type AsyncCommitter interface {
	CommitAsync() (wait func() error, err error)
}

// KeyProber is implemented by a Backend that can tell, without beginning a
// transaction, that a chain holds no entry with an idempotency key, so that
// an append of a new key (the common case) skips the read transaction it
// would otherwise look the key up in. The answer is a hint: a writable
// transaction's own lookup stays the authority on UNIQUE(chain, key), so a
// wrong "absent" costs a trip through the write path, never a second entry.
type KeyProber interface {
	// MayHoldKey reports whether the chain may hold an entry with the
	// non-empty idempotency key. false means that no commit acknowledged
	// before the call began holds it; true may be wrong (a filter's false
	// positive, a chain or key the prober cannot rule out). It is safe for
	// concurrent use and never blocks on a writer.
	MayHoldKey(chain, key string) bool
}

// EntryKeyUser is implemented by a backend that can use the key an entry's
// stored bytes hold, which only the engine's record format knows, to read
// a retry faster (storage/bolt: its seq map's candidates are confirmed by
// it). The engine calls UseEntryKey once, before any other call; what a
// KeyReader answers is the same with it and without it.
type EntryKeyUser interface {
	UseEntryKey(entryKey func(entry []byte) (key []byte, ok bool))
}

// KeyReaderBesideClose is implemented by a KeyReader whose ReadKey may
// run beside the backend's Close and after it: once closed it answers an
// error wrapping ErrClosed, and a call that began before reads nothing
// Close releases (storage/bolt: bbolt's Close waits for the read
// transactions begun before it, and later ones are refused). An engine may
// then call ReadKey without holding a lock against its own Close.
type KeyReaderBesideClose interface {
	KeyReader
	// ReadKeyBesideClose reports whether the above holds.
	ReadKeyBesideClose() bool
}

// KeyDigestSize is the size of a KeyDigest.
const KeyDigestSize = 16

// KeyDigestDomain is what KeyDigest hashes before the key: it separates
// key digests from every other BLAKE3 use. It is exported for code that
// digests many keys at once (a verify), which must hash the same bytes.
const KeyDigestDomain = "ledger/key/v1\x00"

// KeyDigest is the digest that stands for an idempotency key in
// Tx.ScanKeys: the first KeyDigestSize bytes of
// BLAKE3-256("ledger/key/v1" || 0x00 || key). ScanKeys yields digests, not
// keys, because a store may keep only digests (storage/bolt's sorted runs
// do: fixed-size records pack densely and sort and merge cheaply); 16 bytes
// keep two keys of one chain from colliding by chance (about 2^-64 at 2^32
// keys), and a verifier digests the entries' keys to compare.
func KeyDigest(key string) [KeyDigestSize]byte {
	var buf [len(KeyDigestDomain) + 512]byte // keys are far shorter; longer ones spill to the heap
	sum := blake3.Sum256(append(append(buf[:0], KeyDigestDomain...), key...))
	var d [KeyDigestSize]byte
	copy(d[:], sum[:])
	return d
}

// KeyRef is one record of a chain's idempotency index: the digest of a key
// and the seq of the entry the index maps it to.
type KeyRef struct {
	Digest [KeyDigestSize]byte
	Seq    uint64
}

// KeyValue is one pair of the state keyspace.
type KeyValue struct {
	Key   []byte
	Value []byte
}

// Stats describes the space a store uses.
type Stats struct {
	// SizeBytes is the size of the file or database on disk.
	SizeBytes int64
}

// KeyReader is implemented by a Backend that can answer a retry in one
// call: probe the key, look it up and read the entry it maps to, without a
// Tx. An append that carries an idempotency key reads it before anything
// else (most retries are answered here), so the read is worth one pass:
// one digest of the key, one resolution of the chain, one read view.
type KeyReader interface {
	// ReadKey returns the seq and a copy of the stored bytes of the
	// chain's entry with the non-empty idempotency key, as a read-only
	// transaction begun during the call would see them: only durable
	// commits. found is false when that view holds no such entry, or when
	// the backend's probe rules the key out as KeyProber.MayHoldKey does:
	// false is a hint, and a writable transaction's lookup stays the
	// authority on UNIQUE(chain, key). The caller owns data. An index
	// record that maps the key to a seq the store does not hold is an
	// error wrapping ErrCorrupt; the caller checks that the entry holds
	// the key (an index may stand for keys by digests). It is safe for
	// concurrent use.
	ReadKey(ctx context.Context, chain, key string) (seq uint64, data []byte, found bool, err error)
}

// ReadKeysMax bounds the keys of one KeyBatchReader.ReadKeys call.
const ReadKeysMax = PrepareKeysMax

// KeyRead is what ReadKey returns for one key of a ReadKeys call.
type KeyRead struct {
	Seq   uint64
	Data  []byte
	Found bool
}

// BeginReadKeys begins a KeyBatchReader's ReadKeys call: it panics
// unless keys and reads are arguments ReadKeys takes (every key non-empty,
// at most ReadKeysMax keys, reads at least as long as keys), returns the
// context's error when it has ended, and clears the reads of the keys.
func BeginReadKeys(ctx context.Context, keys []ChainKey, reads []KeyRead) error {
	if len(keys) > ReadKeysMax {
		panic(fmt.Sprintf("storage: ReadKeys of %d keys, more than ReadKeysMax", len(keys)))
	}
	if len(reads) < len(keys) {
		panic("storage: ReadKeys with fewer reads than keys")
	}
	for _, k := range keys {
		if k.Key == "" {
			panic("storage: ReadKeys of an empty idempotency key")
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	clear(reads[:len(keys)])
	return nil
}

// KeyBatchReader is implemented by a KeyReader that answers many retries
// in one call (a retried batch): one read view for all of them, the keys
// digested together, and the memory each key's lookup waits for requested
// for all of them before any lookup waits, so that the waits overlap.
type KeyBatchReader interface {
	KeyReader
	// ReadKeys sets reads[i] to what ReadKey(ctx, keys[i].Chain,
	// keys[i].Key) would return, for every i: each Found is a hint as
	// ReadKey's found is, and each Data is the caller's. The Data of
	// one call may share one allocation. Every key must be non-empty,
	// len(keys) at most ReadKeysMax and reads at least as long as keys,
	// or it panics. An error leaves reads undefined. It is safe for
	// concurrent use.
	ReadKeys(ctx context.Context, keys []ChainKey, reads []KeyRead) error
}

// Execer is implemented by a writable Tx of a SQL backend (storage/postgres)
// that runs a statement of the caller's inside the transaction, so that a
// row of another table commits or rolls back with the entries: the replay
// guard's PostgreSQL store writes its SUCCESS record this way
// (idempotency/pgstore). The statement must not touch the backend's own
// tables.
type Execer interface {
	// Exec runs sql with args in the transaction and returns the rows it
	// affected. A failed statement aborts the transaction: every later
	// call, Commit included, returns the error.
	Exec(ctx context.Context, sql string, args ...any) (rowsAffected int64, err error)
}

// StateBatchGetter is implemented by a Tx that reads many state keys
// for less together than one at a time (PostgreSQL: one statement, one
// round trip, instead of a round trip per key), for a caller that is about
// to read and rewrite many records in one transaction.
type StateBatchGetter interface {
	// StateGetBatch calls found(i, value) for each keys[i] that holds a
	// value, in no particular order; a key that holds none is skipped.
	// value is valid until the transaction ends. It takes at most
	// StateGetBatchMax keys; a key given twice is reported once.
	//
	// Unlike StateGet in a writable transaction, it locks nothing (on
	// PostgreSQL a row lock is a write of its own): a caller that reads
	// values to rewrite them holds, before the call, a lock that every
	// writer of those keys takes too (the outbox: its topic's deliveries
	// chain head), so that what it reads is the newest committed value.
	StateGetBatch(ctx context.Context, keys [][]byte, found func(i int, value []byte)) error
}

// StateGetBatchMax bounds the keys one StateGetBatch call takes.
const StateGetBatchMax = 1 << 12
