package financial

// Limits checked on entry, before anything is read or written. They also
// bound every payload the decoder accepts.
const (
	// AccountCodeLengthMax is the longest account code, in bytes.
	AccountCodeLengthMax = 32
	// AccountNameLengthMax is the longest account name, in bytes.
	AccountNameLengthMax = 128
	// CurrencyCodeLengthMin and CurrencyCodeLengthMax bound a currency code:
	// ISO 4217 codes have 3 letters; longer codes serve other units of
	// account (tokens, commodities).
	CurrencyCodeLengthMin = 3
	CurrencyCodeLengthMax = 12
	// ExponentMax is the largest minor-unit exponent: the decimal package's
	// largest scale.
	ExponentMax = 18
	// PostingKeyLengthMax is the longest posting idempotency key, in bytes.
	// The journal stores it behind a short prefix within the chain's limit.
	PostingKeyLengthMax = 240
	// MemoLengthMax is the longest memo, in bytes.
	MemoLengthMax = 512
	// ReferenceLengthMax is the longest reference, in bytes.
	ReferenceLengthMax = 128
	// LinesMin and LinesMax bound the lines of a posting.
	LinesMin = 2
	LinesMax = 256
	// FailuresMax bounds the failures Check collects.
	FailuresMax = 10_000
)
