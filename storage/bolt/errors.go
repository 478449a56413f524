package bolt

import "errors"

// ErrCommitTooLarge is returned by a write of a transaction whose commit
// record would exceed CommitRecordSizeMax; the write is not made and the
// transaction may still commit what it wrote before.
var ErrCommitTooLarge = errors.New("bolt: transaction too large for one commit record")

// ErrMemoryBound is returned by Open when its options do not fit
// Options.MemoryBytesMax; nothing is opened.
var ErrMemoryBound = errors.New("bolt: options exceed the memory bound")
