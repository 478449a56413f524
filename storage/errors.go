package storage

import "errors"

var (
	// ErrNotFound is returned when a chain, an entry or a state key does not exist.
	ErrNotFound = errors.New("storage: not found")

	// ErrDuplicate is returned by Append when the chain already holds the
	// entry's seq or idempotency key. The chain package checks both before it
	// appends, so seeing this error means a concurrent writer won a race.
	ErrDuplicate = errors.New("storage: duplicate seq or idempotency key")

	// ErrLocked is returned by Open when another process holds the store and
	// the lock timeout has passed. The error message names the file.
	ErrLocked = errors.New("storage: locked by another process")

	// ErrClosed is returned when the backend has been closed.
	ErrClosed = errors.New("storage: closed")

	// ErrReadOnly is returned when a write is attempted in a read-only
	// transaction or on a backend opened read-only.
	ErrReadOnly = errors.New("storage: read-only")

	// ErrCorrupt is returned when stored bytes do not have the shape the
	// backend wrote (a damaged file, a damaged page, a truncated record).
	ErrCorrupt = errors.New("storage: corrupt")

	// ErrTxDone is returned when a transaction is used after Commit or Rollback.
	ErrTxDone = errors.New("storage: transaction already committed or rolled back")

	// ErrStop may be returned by a scan callback to end the scan early;
	// the scan then returns nil.
	ErrStop = errors.New("storage: stop scan")
)

// ErrRetry is wrapped by errors that mean the whole transaction was rolled
// back by the store (a serialization failure, a deadlock, a connection lost
// before commit) and nothing of it was written: running it again from Begin
// is safe. The chain package's group committer does that a bounded number of
// times before it hands the error to the callers.
var ErrRetry = errors.New("storage: transaction rolled back, safe to retry")

// Error wraps an operating failure of a backend (I/O, a full disk, a lost
// connection) so that callers can tell it from a content error with
// errors.Is(err, ErrIO).
var ErrIO = errors.New("storage: i/o failure")
