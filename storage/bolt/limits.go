package bolt

import "github.com/ledgerworks/ledger/storage/bolt/internal/commitrec"

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
