// Package chain is the ledger engine: hash-chained, append-only entries with
// idempotent appends, atomic multi-chain transactions, group commit and
// streaming verification.
//
// # Basics
//
// A DB holds chains. A chain is a sequence of entries numbered from 1 without
// gaps; each entry's hash is BLAKE3-256 over a canonical encoding of all its
// fields, including the previous entry's hash, so changing any stored byte is
// detected by Verify (docs/FORMAT.md is the normative description).
//
//	db, err := chain.Open("ledger.db", chain.Options{})
//	res, err := db.Append(ctx, chain.Request{
//		Chain: "acme/stock/SKU-1/WH-1", IdempotencyKey: "receipt-42",
//		Type: "stock.movement/v1", Payload: payload,
//	})
//
// An append with an idempotency key the chain already holds returns the
// original entry with Result.Replayed set when the type and payload are the
// same, and an error matching ErrIdempotencyConflict when they differ;
// either way nothing is written. A replay is answered from a read
// transaction, or in one call by a backend that is a storage.KeyReader; a
// key the backend's storage.KeyProber (or KeyReader) rules out skips that
// read and goes to the committer, whose lookup decides in every case.
//
// Update appends to several chains atomically and is where domain packages
// keep derived state (Tx.StatePut) in the same transaction as the entries it
// derives from. Concurrent Append and Update calls are grouped into one
// storage transaction and one fsync; each caller gets its own result, and one
// caller's failure does not fail the others. Tx.AppendBatch appends many
// requests with the results of as many Append calls, looking their keys up
// together first where the backend can (storage.KeyPreparer): the form for
// imports and other large transactions. DB.AppendBatch runs it in a
// transaction of its own, and answers a retry of the whole batch (every
// request with its key already stored for the same request) from the
// stored entries without the committer, all of them in one read where the
// backend can (storage.KeyBatchReader). Domain packages that must answer
// a retry before checking their own rules call Tx.Replay first.
//
// Verify streams every chain: each hash against the entry's fields, each
// prev_hash against the previous entry, seqs without gaps, the chain's end
// against its stored head (seq, hash and time), and each idempotency key
// against the key index. Failures carry the chain, the seq and a Reason.
//
// # Where things are
//
// One file per part; the tests of a file sit beside it (name_test.go).
//
//	db.go             Open, Options, Metrics, the DB, Append, AppendBatch
//	tx.go             Tx: reads, Append, AppendBatch, state (tx_failure.go:
//	                  how a store's error fails the group)
//	commit.go         the committer: queued requests, group commit, retries
//	lockorder.go      heads locked in one global order on a shared store:
//	                  WithPlannedAppends, what a rerun learned
//	hashahead.go      a second goroutine hashing a large AppendBatch ahead
//	hashlanes.go      a group's first Append per chain hashed side by side
//	replay.go         Replay and the read-transaction answer to a retry;
//	                  replay_batch.go the same for DB.AppendBatch
//	entry.go          Entry, Head, Genesis, the Format v1 hash and its input
//	codec.go          the stored record: EncodeRecord, DecodeRecord, and
//	                  the in-place field reads verify and the hashers use
//	limits.go         the request limits and ValidateRequest; naming.go the
//	                  scoped chain names
//	errors.go         sentinel and typed errors
//	export.go         export lines, ExportReader, Export, VerifyExport;
//	                  import.go Tx.AppendEntry
//	notify.go         Notify and Subscribe
//	state_range.go    StateDeleteRange
//	tree.go           the chains' Merkle trees kept in state; tree_heads.go
//	                  recorded tree heads, tree_proof.go proofs,
//	                  tree_verify.go their check in Verify
//	verify.go         Verify, VerifyOptions, Report, Failure, ChainVerifier:
//	                  one chain read and checked on one goroutine
//	verify_parallel.go the entries of that read hashed in a pool of workers
//	                  (internal/workpool: batches out, results back in order)
//	verify_split.go   a long chain verified in chunks by one goroutine per
//	                  CPU on forks of the read transaction, stitched in order
//	verify_keys.go    the key index check: keyed multiset sums of (digest,
//	                  seq) on both sides (internal/multiset), record by
//	                  record only on a mismatch
//
// chaintest holds helpers for the tests of packages built on the engine;
// internal/vectors (run by internal/vectorgen) writes the Format v1 test
// vectors of testdata/ and the fuzz seeds.
//
// # Tracing
//
// With Options.TracerProvider, an Update, Append (one that queues for the
// committer) or AppendBatch called with a context that holds a recording
// span is a span under it, "chain.transaction" or "chain.append", and
// Tx.Context carries that span to the transaction's function (outbox and
// inbox make their spans under it). The span records the group commit the
// call joined: ledger.group_commit.id (the same on every caller the commit
// carried), .size, .wait_ns (queued until the committer took it) and
// .commit_ns (the commit and its fsync, until answered). A call without a
// recording span makes none, so background work and unsampled requests
// cost a context lookup; without a provider the committer tests one bool
// per request and reads no clock.
//
// # Caveats
//
// An Update function may run more than once (when another member of its group
// commit fails after writing or after a storage error, the group runs again
// without it; when the store rolls the group back with storage.ErrRetry, the
// whole group runs again, at most three times plus the reruns that learned a
// head to lock first, and a request still in conflict then runs alone), so it
// must have no effects outside its Tx. It runs on the committer's goroutine and must
// not call the DB's own methods.
//
// Entry times come from Options.Clock but never decrease within a chain: an
// entry's time is the later of the clock and its predecessor's time. The new
// entries of a large Tx.AppendBatch share one reading of the clock (see
// there), as do the DB.Append calls that one group commit runs together
// when at least four of them are on chains of their own: their hashes are
// then computed side by side before the group runs.
//
// Verify detects any change to a stored entry. Removing the newest entries of
// a chain together with its stored head, or rewriting a chain wholesale, can
// only be detected against a head saved elsewhere (VerifyOptions.ExpectHeads).
package chain
