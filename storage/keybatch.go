package storage

import (
	"context"
	"iter"
)

// KeyBatchSizeMax bounds the records of one batch of
// KeyBatchScanner.ScanKeyBatches.
const KeyBatchSizeMax = 512

// KeyBatchScanner is implemented by transactions that read a chain's
// idempotency index a batch of records at a time. It is optional: a
// verifier that reads millions of records spends less per record on a
// slice than on a call through an iterator for each.
type KeyBatchScanner interface {
	// ScanKeyBatches yields the records that ScanKeys yields, each once,
	// in batches of 1 to KeyBatchSizeMax records. A batch is valid until
	// the iteration goes on (the next batch reuses its memory); a caller
	// that keeps records copies them. An error ends the iteration: it is
	// yielded with a nil batch, and records yielded before it are not
	// taken back.
	ScanKeyBatches(ctx context.Context, chain string) iter.Seq2[[]KeyRef, error]
}
