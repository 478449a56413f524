package outbox

import "time"

// Limits checked on entry; a request beyond one is refused with an *Error
// matching ErrInvalid and nothing is written.
const (
	// TopicLengthMax is the longest topic, in bytes. A topic is a chain
	// name component (chain.NameComponentLengthMax).
	TopicLengthMax = 64
	// OrderingKeyLengthMax is the longest ordering key, in bytes.
	OrderingKeyLengthMax = 256
	// IdempotencyKeyLengthMax is the longest enqueue idempotency key.
	IdempotencyKeyLengthMax = 200
	// HeadersMax is the most headers one message carries.
	HeadersMax = 64
	// HeaderNameLengthMax and HeaderValueLengthMax bound one header.
	HeaderNameLengthMax  = 128
	HeaderValueLengthMax = 4096
	// PayloadSizeMax is the largest message payload, in bytes.
	PayloadSizeMax = 256 << 10
	// WorkerIDLengthMax is the longest worker id recorded on a lease.
	WorkerIDLengthMax = 128
	// DetailLengthMax bounds the error text or gateway answer recorded
	// with an outcome; longer text is cut at a rune boundary.
	DetailLengthMax = 1024
	// ClaimBatchMax is the most messages one claim leases.
	ClaimBatchMax = 1000
	// OutcomeBatchMax is the most outcomes (or heartbeats, or requeues)
	// recorded by one entry.
	OutcomeBatchMax = 1000
	// LeaseDurationMin and LeaseDurationMax bound a lease.
	LeaseDurationMin = 10 * time.Millisecond
	LeaseDurationMax = 24 * time.Hour
)

// Defaults used where an options struct leaves a field zero.
const (
	LeaseDurationDefault = 30 * time.Second
	MaxAttemptsDefault   = 25
	MaxAgeDefault        = 72 * time.Hour
	BackoffMinDefault    = time.Second
	BackoffMaxDefault    = time.Hour
	PollIntervalDefault  = time.Second
	ConcurrencyDefault   = 64
)
