// Package storage is the narrow persistence contract that the chain engine is
// written against, and the home of its backends.
//
// # Basics
//
// A Backend hands out transactions. A writable transaction sees its own
// writes; it becomes visible to others, all at once, when Commit returns nil.
// A backend stores, per chain:
//
//   - entries, keyed by (chain, seq), as opaque bytes encoded by the chain
//     package;
//   - an index from (chain, idempotency key) to seq, which the backend keeps
//     unique: appending a second entry with a key that the chain already holds
//     fails with ErrDuplicate. LookupKey answers one key; ScanKeys streams a
//     chain's whole index as (KeyDigest(key), seq) pairs, digests because a
//     store may keep digests rather than keys, so that verify can compare
//     the index with the entries in one sequential pass;
//   - the head: the seq, hash and time of the newest entry.
//
// Beside the chains, a backend keeps a state keyspace: an ordered map of byte
// keys to byte values that the domain packages use for derived state
// (balances, FIFO layers), written in the same transaction as the entries it
// derives from.
//
// A backend may implement optional interfaces that make the chain
// package's common paths cheaper (storagetest checks them where it has a
// suite for them): Forker (a read's snapshot shared by goroutines, for a
// parallel verify), AsyncCommitter (a group committed while the previous
// one syncs), KeyProber and KeyReader (a new key ruled out, or a retry's
// entry read, in one call without a transaction; a hint the write
// transaction's lookup overrules) and KeyBatchScanner (the key index
// streamed in batches).
//
// The backends are storage/bolt (one file, one writer process, the embedded
// default) and storage/postgres (a shared database for services running on
// several machines). storage/storagetest is the conformance suite that every
// backend passes.
//
// # Caveats
//
// Byte slices handed to callbacks (Scan, StateScan) and returned by reads are
// valid only until the transaction ends; callers copy what they keep.
// A transaction is used by one goroutine at a time. The storage layer checks
// no content: validation, hashing and linkage belong to the chain package.
package storage
