package postgres

import (
	"errors"
	"fmt"

	"github.com/ledgerworks/ledger/storage"
)

var (
	// ErrRetryable is returned when PostgreSQL or the connection ended the
	// transaction before it committed: a serialization failure (SQLSTATE
	// 40001), a deadlock (40P01), a lock timeout (55P03), a connection that
	// was lost or terminated before COMMIT was sent, a server that is
	// shutting down or starting up, a commit whose lost outcome was found to
	// be "aborted". Nothing of the transaction was written, so running the
	// whole transaction again from Begin is safe; the backend never does that
	// by itself (the reads that led to the writes must be done again). It
	// wraps storage.ErrRetry and storage.ErrIO.
	ErrRetryable = fmt.Errorf("postgres: transaction rolled back before commit, safe to retry: %w: %w", storage.ErrRetry, storage.ErrIO)

	// ErrCommitUnknown is returned by Commit when the connection failed after
	// COMMIT was sent and the outcome could not be established afterwards
	// (the server could not be reached to ask, or the old session did not end
	// in time). The transaction may or may not have committed. Retrying is
	// safe only for writes that are idempotent by themselves, such as appends
	// that carry an idempotency key. It wraps storage.ErrIO.
	ErrCommitUnknown = fmt.Errorf("postgres: connection lost during commit, outcome unknown: %w", storage.ErrIO)

	// ErrAuthentication is returned when PostgreSQL refuses the connection's
	// user: a wrong password, an unknown role, no pg_hba.conf entry for it
	// (SQLSTATE class 28). Retrying cannot help until the URL or the
	// server's configuration changes, so it wraps neither storage.ErrRetry
	// nor storage.ErrIO (an outage, which the server answers 503): the
	// command line reports it as STORAGE (exit 5), the server as a 500.
	ErrAuthentication = errors.New("postgres: authentication failed (check the user and password of the URL, and pg_hba.conf)")

	// ErrSeqRange is returned by Append for a seq above MaxSeq, which the
	// bigint column cannot hold. Nothing is written.
	ErrSeqRange = errors.New("postgres: seq does not fit in a bigint")

	// ErrOutOfOrder is returned by Append when the record's seq is not the
	// seq that follows the head this transaction holds for the chain, or
	// differs from the new head's seq. Nothing is written.
	ErrOutOfOrder = errors.New("postgres: append does not follow the chain head")

	// ErrText is returned by Append for a chain name or idempotency key that
	// is not valid UTF-8 or contains a NUL byte, which a PostgreSQL text
	// column cannot hold (the chain package refuses both before they get
	// here). Reads of such names find nothing. Nothing is written.
	ErrText = errors.New("postgres: chain names and idempotency keys must be valid UTF-8 without NUL bytes")

	// ErrSchemaVersion is returned by Open when the database schema was
	// migrated by a newer version of this package, or when it is behind and
	// Options.NoMigrate forbids migrating it.
	ErrSchemaVersion = errors.New("postgres: database schema version does not match")
)
