package wal

import "errors"

var (
	// ErrOptions is returned by Open when Options hold a value outside its
	// limits (SegmentSizeMin, SegmentSizeMax); nothing has been created.
	ErrOptions = errors.New("wal: invalid options")

	// ErrNotReleased is returned by Remove when the log still holds a record
	// past what Release was told is durable elsewhere: removing the directory
	// would lose acknowledged commits.
	ErrNotReleased = errors.New("wal: log holds records that were not released")
)
