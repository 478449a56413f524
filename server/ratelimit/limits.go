package ratelimit

// Limits of Options, checked by New.
const (
	// MaxTrackedDefault is Options.MaxTracked when zero.
	MaxTrackedDefault = 10_000
	// MaxTrackedLimit is the largest Options.MaxTracked: each tracked
	// limiter costs about 200 bytes.
	MaxTrackedLimit = 1 << 20
	// BurstMax is the largest KeyBurst or AddrBurst.
	BurstMax = 1 << 20
)
