package bolt_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt"
	"github.com/ledgerworks/ledger/storage/bolt/internal/wal"
)

// TestLogOfAnEarlierVersionIsRecovered: a ledger an earlier version left
// after a crash (a log whose segments have no header, a file that records
// no log) opens with every commit, and its next log has an identity.
func TestLogOfAnEarlierVersionIsRecovered(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	crashWithLog(t, path, 60)
	asEarlierVersion(t, path)

	if head, err := headOf(t, path, bolt.Options{ReadOnly: true}); err != nil || head != 60 {
		t.Fatalf("read-only open of the earlier version's log: head %d, %v; want 60", head, err)
	}
	b, err := bolt.Open(path, recoveryOptions)
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, b, "a", 61, 61)
	bolt.Abandon(b)
	segments := segmentsOf(t, path)
	data, err := os.ReadFile(segments[len(segments)-1])
	if err != nil || len(data) < 8 || string(data[:7]) != "LEDGWAL" {
		t.Fatalf("the new log's segment has no header: %v", err)
	}
	if head, err := headOf(t, path, recoveryOptions); err != nil || head != 61 {
		t.Fatalf("head %d, %v; want 61", head, err)
	}
}

// asEarlierVersion rewrites the log of the crashed ledger at path as an
// earlier version wrote it (segments without headers) and removes the
// file's record of its log.
func asEarlierVersion(t *testing.T, path string) {
	t.Helper()
	dir := bolt.LogDirectory(path)
	// Rewrite the log as an earlier version wrote it, and forget the
	// file's record of it.
	db, err := bbolt.Open(path, bolt.FileMode, nil)
	if err != nil {
		t.Fatal(err)
	}
	var id wal.ID
	err = db.Update(func(btx *bbolt.Tx) error {
		meta := btx.Bucket(bolt.BucketMeta)
		copy(id[:], meta.Get([]byte("log_id")))
		for _, key := range []string{"log_id", "log_state", "log_dir"} {
			if err := meta.Delete([]byte(key)); err != nil {
				return err
			}
		}
		return nil
	})
	db.Close()
	if err != nil || id.IsZero() {
		t.Fatalf("log id %s: %v", id, err)
	}
	current, err := wal.Open(dir, wal.Options{ReadOnly: true, ID: id, SegmentSizeBytes: recoveryOptions.LogSegmentSizeBytes})
	if err != nil {
		t.Fatal(err)
	}
	legacyDir := dir + ".legacy"
	legacy, err := wal.Open(legacyDir, wal.Options{SegmentSizeBytes: recoveryOptions.LogSegmentSizeBytes})
	if err != nil {
		t.Fatal(err)
	}
	for record, err := range current.Records(0) {
		if err != nil {
			t.Fatal(err)
		}
		if err := legacy.Append(record.LSN, record.Payload); err != nil {
			t.Fatal(err)
		}
	}
	current.Close()
	legacy.Close()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(legacyDir, dir); err != nil {
		t.Fatal(err)
	}

}

// TestLogThatContradictsTheFileIsCorrupt: a log whose records do not
// continue the file (here another ledger's log of an earlier version, which
// carries no identity to tell it apart) is refused as CORRUPT, not as an
// I/O failure, and kept.
func TestLogThatContradictsTheFileIsCorrupt(t *testing.T) {
	dir := t.TempDir()
	a, other := filepath.Join(dir, "a.db"), filepath.Join(dir, "other.db")
	b, err := bolt.Open(a, recoveryOptions)
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 3; seq++ {
		commitN(t, b, "a", seq, seq)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b, err = bolt.Open(other, recoveryOptions)
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 3; seq++ {
		commitN(t, b, "x", seq, seq)
	}
	commitN(t, b, "a", 1, 1)
	bolt.Abandon(b)
	asEarlierVersion(t, other)
	if err := os.Rename(bolt.LogDirectory(other), bolt.LogDirectory(a)); err != nil {
		t.Fatal(err)
	}
	db, err := bbolt.Open(a, bolt.FileMode, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(btx *bbolt.Tx) error {
		for _, key := range []string{"log_id", "log_state", "log_dir"} {
			if err := btx.Bucket(bolt.BucketMeta).Delete([]byte(key)); err != nil {
				return err
			}
		}
		return nil
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	_, err = headOf(t, a, recoveryOptions)
	if !errors.Is(err, storage.ErrCorrupt) || errors.Is(err, storage.ErrIO) || !strings.Contains(err.Error(), "do not continue") {
		t.Fatalf("open with a log that contradicts the file: %v; want ErrCorrupt only", err)
	}
	if segments := segmentsOf(t, a); len(segments) == 0 {
		t.Fatal("the log was not kept")
	}
}
