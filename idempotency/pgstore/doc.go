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
