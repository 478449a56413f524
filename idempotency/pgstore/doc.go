// Package pgstore is the PostgreSQL idempotency.Store, for services whose
// instances run on several machines and share one database.
//
// # Basics
//
// Records live in idempotency_records, whose UNIQUE (operation, user_id, key)
// makes Create atomic across processes: it is one INSERT … ON CONFLICT DO
// NOTHING RETURNING, and exactly one of any number of concurrent creates
// gets its row back. A store that Open made sends it on a pool of its own
// whose sessions default to synchronous_commit off, as one autocommit
// statement: a PROCESSING record is a lease, which a crash may lose (the
// key is then free, and the ledger's UNIQUE(chain, key) keeps the retry's
// entries single); SUCCESS and FAILED records, releases and retry counts
// go through the other pool and wait for their WAL flush. Finishing and releasing an attempt are UPDATEs and
// DELETEs conditional on status = 'PROCESSING' and the attempt's token, so a
// stale process never changes a finished record. Retry counts live apart,
// in idempotency_retry_counts, so they survive the deletion of a record by
// a transient failure. `ledgerctl migrate` (or Migrate) creates both tables
// in the ledger's schema.
//
// # Schema
//
// The finish of an attempt (SUCCESS, FAILED, a poisoning release) is a
// heap-only (HOT) UPDATE: no index covers a column it writes. The
// claim's expires_at (indexed, for cleanup) is never updated; the finish
// writes the record's own expiry in finished_expires_at (unindexed): a
// finished record expires at finished_expires_at, a PROCESSING one at
// expires_at. The table's fillfactor (35) keeps room on each page for the
// SUCCESS versions of the rows claims put there.
//
// Recovery (RecoverStuck) scans the index on lease_expires_at from the
// watermark of idempotency_recovery, a row shared by every process: all
// PROCESSING records whose lease ended by then were released. A run locks
// the row, releases what it finds in the same transaction, and raises the
// watermark over what it covered, so it costs the leases of one interval
// rather than the table; a process that finds the row locked skips its
// run. Migrate brings tables of an older version to this schema.
//
// # Caveats
//
// Times are the guard's (the callers' clocks): keep the clocks of the
// instances close (NTP), or leases and expiry move by their skew. Times are
// stored with microsecond precision. Opened with Options.Ledger (a ledger on
// the same database), the store is an idempotency.LedgerTxStore: SucceedTx
// runs its conditional UPDATE inside the ledger's transaction
// (chain.Tx.Exec), so a handler's entries and its SUCCESS record commit or
// roll back together, and a lost fence fails the whole transaction. Without
// it, a handler commits its entries and the guard its record after them; a
// crash between the two leaves a PROCESSING record that RecoverStuckRecords
// releases, and the retry's ledger append is answered by the ledger's
// UNIQUE(chain, key) instead of being written twice.
//
// This package, like storage/postgres, is the only place of the
// idempotency layer that imports pgx.
package pgstore
