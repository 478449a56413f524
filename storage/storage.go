package storage

import (
	"context"
	"iter"
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
