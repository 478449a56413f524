package stockmovement

import "github.com/ledgerworks/ledger/chain"

// Limits checked on entry, before anything is read or written.
const (
	// IDLengthMax is the longest tenant, item or location id, in bytes. Ids
	// are chain name components, so they share the chain package's limit.
	IDLengthMax = chain.NameComponentLengthMax

	// KeyLengthMax is the longest idempotency key of a movement, in bytes.
	// A transfer stores its halves under key+":out" and key+":in", so four
	// bytes of the chain's limit are reserved for the suffix.
	KeyLengthMax = chain.IdempotencyKeyLengthMax - len(keySuffixOut)

	// ReferenceLengthMax is the longest document reference, in bytes.
	ReferenceLengthMax = 128

	// NoteLengthMax is the longest free-form note, in bytes.
	NoteLengthMax = 1024

	// ReasonLengthMax is the longest adjustment reason, in bytes.
	ReasonLengthMax = 128

	// NameLengthMax is the longest display name of an item or location.
	NameLengthMax = 256
)

// Key suffixes of the two halves of a transfer (and of its reversal).
const (
	keySuffixOut = ":out"
	keySuffixIn  = ":in"
)
