package bolt

import "github.com/ledgerworks/ledger/storage/bolt/internal/commitrec"
import "context"

// Abandon drops a backend as a crash would: the log is closed without a
// checkpoint and the file without a commit, so that tests can reopen what
// a killed process leaves behind.
func Abandon(b *Backend) { b.abandon() }

// DecodeCommitForTest decodes a commit record and reports how many
// operations it holds.
func DecodeCommitForTest(record []byte) (int, error) {
	operations, err := commitrec.Decode(record)
	return len(operations), err
}

// Checkpoint writes everything the memory tables hold to the file and
// waits for it.
func Checkpoint(b *Backend) error { return b.forceCheckpoint(context.Background()) }

// FailCheckpoints makes every later checkpoint fail with err (nil: work
// again).
func FailCheckpoints(b *Backend, err error) {
	if err == nil {
		b.checkpointFault.Store(nil)
		return
	}
	b.checkpointFault.Store(&err)
}

// SetKeyMergeRecordsMax sets how many records one transaction merges
// (keyrun.Cache.MergeRecordsMax), before the handle's first write.
func SetKeyMergeRecordsMax(b *Backend, n uint64) { b.cache.runs.MergeRecordsMax = n }
