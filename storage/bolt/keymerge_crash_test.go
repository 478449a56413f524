package bolt_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage/bolt"
)

const (
	keyMergeChildEnv = "LEDGER_BOLT_KEY_MERGE_CHILD"
	// keyMergeRoundsMax is how many kills the test makes at most: it stops
	// after keyMergeKillsWanted of them have left a merge in progress.
	keyMergeRoundsMax   = 40
	keyMergeKillsWanted = 3
	// keyMergeRecordsMax is the child's MergeRecordsMax: a level of eight
	// runs of a checkpoint's keys already merges over several
	// transactions, and a merge is in progress most of the time.
	keyMergeRecordsMax = 64
	// keyMergeEntriesPerCommit is the batch of keyed entries of one commit.
	keyMergeEntriesPerCommit = 20
)

// TestCrashDuringKeyMerges kills (SIGKILL) a child that appends keyed
// entries through the log, with checkpoints every few commits and merges
// of key runs spread over transactions (a small MergeRecordsMax), until
// keyMergeKillsWanted kills have left a merge in progress in the file.
// After each kill the ledger reopens (a handle with the default bound goes
// on with the merge), every acknowledged entry is there, every key of the
// chain is found with its seq and scanned once, and bbolt's check passes;
// the next child goes on with the merge under the small bound.
func TestCrashDuringKeyMerges(t *testing.T) {
	if path := os.Getenv(keyMergeChildEnv); path != "" {
		keyMergeChild(path)
		return
	}
	if testing.Short() {
		t.Skip("kills a child up to 40 times")
	}
	path := filepath.Join(t.TempDir(), "ledger.db")
	kills := 0
	for round := 0; round < keyMergeRoundsMax && kills < keyMergeKillsWanted; round++ {
		acked := runChild(t, path, "TestCrashDuringKeyMerges", keyMergeChildEnv, time.Duration(200+50*round)*time.Millisecond)
		merging, err := keyMergeInProgress(path)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if merging {
			kills++
		}
		b, err := bolt.Open(path, crashOptions)
		if err != nil {
			t.Fatalf("round %d: reopen after the kill: %v", round, err)
		}
		tx, err := b.Begin(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		s := readSnapshot(t, tx)
		head := s.heads["a"]
		if head < acked {
			t.Fatalf("round %d: head %d after the kill, the child had acknowledged seq %d", round, head, acked)
		}
		if len(s.keys["a"]) != int(head) {
			t.Fatalf("round %d: %d keys scanned for head %d", round, len(s.keys["a"]), head)
		}
		for seq := uint64(1); seq <= head; seq++ {
			key := testRecord("a", seq).IdempotencyKey
			if got, err := tx.LookupKey(ctx, "a", key); err != nil || got != seq {
				t.Fatalf("round %d: key %q: %d, %v; want %d", round, key, got, err, seq)
			}
		}
		tx.Rollback()
		if err := b.Check(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: %d acknowledged, %d recovered, a merge in progress: %v", round, acked, head, merging)
	}
	if kills < keyMergeKillsWanted {
		t.Fatalf("%d of %d kills left a merge of key runs in progress", kills, keyMergeRoundsMax)
	}
}

// keyMergeInProgress reports whether the file holds a merge of key runs
// in progress.
func keyMergeInProgress(path string) (bool, error) {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return false, err
	}
	defer db.Close()
	var merging bool
	err = db.View(func(btx *bbolt.Tx) error {
		merging = btx.Bucket(bolt.BucketKeyMerge) != nil
		return nil
	})
	return merging, err
}

// keyMergeChild appends keyed entries to chain "a" until it is killed,
// printing the last seq of each batch once Commit has returned.
func keyMergeChild(path string) {
	b, err := bolt.Open(path, crashOptions)
	if err != nil {
		childFail(err)
	}
	bolt.SetKeyMergeRecordsMax(b, keyMergeRecordsMax)
	appendUntilKilled(b, keyMergeEntriesPerCommit, false)
}
