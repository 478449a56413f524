package bolt

import (
	"github.com/ledgerworks/ledger/storage/bolt/internal/commitrec"
	"github.com/ledgerworks/ledger/storage/bolt/internal/keyindex"
	"github.com/ledgerworks/ledger/storage/bolt/internal/segment"
)

// The limits of what the backend stores, checked on entry (the log's
// commit record, internal/commitrec, is built to hold exactly these).
const (
	// ChainNameSizeMax is the longest chain name the backend stores: a key of
	// bbolt's chains bucket.
	ChainNameSizeMax = commitrec.ChainNameSizeMax
	// IdempotencyKeySizeMax is the longest idempotency key: a key of the
	// keys bucket, after its 8-byte chain id.
	IdempotencyKeySizeMax = commitrec.IdempotencyKeySizeMax
	// StateKeySizeMax is the longest state key: a key of bbolt's state bucket.
	StateKeySizeMax = commitrec.StateKeySizeMax
	// CommitRecordSizeMax bounds the bytes of one commit record, so of one
	// writable transaction while the log is on; a larger transaction
	// returns ErrCommitTooLarge and writes nothing.
	CommitRecordSizeMax = commitrec.SizeMax
)

// The sizes of the entry segments (internal/segment).
const (
	// SegmentBytesMax is the size a segment is sealed at: an entry that
	// would take it past this size starts the next segment, and an entry
	// larger than it has a segment of its own.
	SegmentBytesMax = segment.BytesMax
	// SegmentIndexSegmentsMax bounds the segments a read transaction's map
	// of one chain holds, 32 bytes each; a longer chain is read by
	// descents.
	SegmentIndexSegmentsMax = segment.IndexSegmentsMax
)

// The sizes of the idempotency index (internal/keyindex).
const (
	// KeyDigestSize is the size of the digest that stands for a key in a run.
	KeyDigestSize = keyindex.DigestSize
	// SeqMapBytesMaxDefault is Options.SeqMapBytesMax when zero.
	SeqMapBytesMaxDefault = keyindex.SeqMapBytesMaxDefault
)
