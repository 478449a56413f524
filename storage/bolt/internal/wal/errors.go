package wal

import "errors"

var (
	// ErrOptions is returned by Open when Options hold a value outside its
	// limits (SegmentSizeMin, SegmentSizeMax); nothing has been created.
	ErrOptions = errors.New("wal: invalid options")

	// ErrUnusable is wrapped by every Append after a failed write or sync
	// into a segment that holds or is receiving records: the kernel may have
	// dropped the pages, so the log must be reopened (and its records read
	// back from disk) before it takes another record. A failure to create
	// a new segment, before any record went into it, does not make a log
	// unusable.
	ErrUnusable = errors.New("wal: log unusable after a failed write")

	// ErrNotReleased is returned by Remove when the log still holds a record
	// past what Release was told is durable elsewhere: removing the directory
	// would lose acknowledged commits.
	ErrNotReleased = errors.New("wal: log holds records that were not released")
)
