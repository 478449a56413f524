package bolt_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// backupTo writes a sealed backup of b to path and returns what it holds.
func backupTo(t *testing.T, b *bolt.Backend, path string) bolt.BackupInfo {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, bolt.FileMode)
	if err != nil {
		t.Fatal(err)
	}
	info, err := b.Backup(ctx, f)
	if err != nil {
		t.Fatalf("backup: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := bolt.SealBackup(path); err != nil {
		t.Fatalf("seal: %v", err)
	}
	return info
}

// TestBackupFoldsTheLogIn backs up a ledger whose commits are still in the
// log's memory table (a huge table never checkpoints on its own), in every
// configuration: the copy opens as a ledger of its own, read-only and
// writable, holds exactly what the original held at the backup, and the
// original's log is untouched by the copy's open and close.
func TestBackupFoldsTheLogIn(t *testing.T) {
	for _, c := range logConfigurations {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "ledger.db")
			b, err := bolt.Open(path, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer closeAndCheck(t, b, path)
			commitN(t, b, "a", 1, 40)
			commitN(t, b, "b", 1, 3)
			commitN(t, b, "a", 41, 50)
			want := snapshotOf(t, b)
			copyPath := filepath.Join(dir, "copy.db")
			info := backupTo(t, b, copyPath)
			if info.Entries != 53 || len(info.Heads) != 2 || info.Heads[0].Chain != "a" || info.Heads[0].Head != testHead(50) ||
				info.Heads[1].Head != testHead(3) {
				t.Fatalf("backup info %+v, want heads a:50 and b:3, 53 entries", info)
			}
			if st, err := os.Stat(copyPath); err != nil || st.Size() < info.Bytes || info.Bytes == 0 {
				t.Fatalf("copy: %v, %v; backup said %d bytes", st, err, info.Bytes)
			}
			commitN(t, b, "a", 51, 51) // after the backup: not in the copy

			ro, err := bolt.Open(copyPath, bolt.Options{ReadOnly: true})
			if err != nil {
				t.Fatalf("read-only open of the copy: %v", err)
			}
			got := snapshotOf(t, ro)
			if err := ro.Close(); err != nil {
				t.Fatal(err)
			}
			if !got.equal(want) {
				t.Fatalf("copy reads\n%v\nwant\n%v", got, want)
			}
			rw, err := bolt.Open(copyPath, bolt.Options{Log: bolt.LogOn})
			if err != nil {
				t.Fatalf("writable open of the copy: %v", err)
			}
			commitN(t, rw, "c", 1, 1)
			closeAndCheck(t, rw, copyPath)
			commitN(t, b, "a", 52, 52) // the original's log still works
		})
	}
}

// TestBackupDuringCommits backs up while writers commit: the copy holds
// every commit acknowledged before Backup was called, and a prefix of
// each chain with its heads as the backup reported.
func TestBackupDuringCommits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	b, err := bolt.Open(path, bolt.Options{Log: bolt.LogOn, InitialMmapSize: 64 << 20, MemtableBytesMax: 64 << 10, LogSegmentSizeBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAndCheck(t, b, path)
	var acked [2]atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			chain := fmt.Sprintf("w%d", w)
			for seq := uint64(1); ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := commitOne(b, chain, seq); err != nil {
					t.Errorf("commit %s %d: %v", chain, seq, err)
					return
				}
				acked[w].Store(seq)
			}
		}()
	}
	for acked[0].Load() < 50 || acked[1].Load() < 50 {
		time.Sleep(time.Millisecond)
	}
	before := [2]uint64{acked[0].Load(), acked[1].Load()}
	copyPath := filepath.Join(t.TempDir(), "copy.db")
	info := backupTo(t, b, copyPath)
	close(stop)
	wg.Wait()
	copyDB, err := bolt.Open(copyPath, bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer copyDB.Close()
	got := snapshotOf(t, copyDB)
	for w := range 2 {
		chain := fmt.Sprintf("w%d", w)
		head := got.heads[chain]
		if head < before[w] {
			t.Errorf("chain %s: the copy ends at %d, but %d was acknowledged before the backup", chain, head, before[w])
		}
		if info.Heads[w].Chain != chain || info.Heads[w].Head.Seq != head {
			t.Errorf("chain %s: the backup reported %+v, the copy ends at %d", chain, info.Heads[w], head)
		}
		if n := uint64(len(got.entries[chain])); n != head {
			t.Errorf("chain %s: %d entries up to head %d", chain, n, head)
		}
	}
}

// TestBackupOfAReadOnlyRecoveredLog: a read-only handle that replayed a
// crash's log in memory refuses, rather than copy a file without it.
func TestBackupOfAReadOnlyRecoveredLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	b, err := bolt.Open(path, bolt.Options{Log: bolt.LogOn, MemtableBytesMax: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, b, "a", 1, 5)
	bolt.Abandon(b)
	ro, err := bolt.Open(path, bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	f, err := os.Create(filepath.Join(t.TempDir(), "copy.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := ro.Backup(ctx, f); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("backup of a read-only recovered log: %v, want ErrUnsupported", err)
	}
}

// TestSealBackupRefusesOtherFiles: a file that is not a ledger is refused
// and left as it was.
func TestSealBackupRefusesOtherFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other")
	if err := os.WriteFile(path, []byte("not a bbolt file at all, only text"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := bolt.SealBackup(path); err == nil {
		t.Fatal("sealed a file that is not a ledger")
	}
	if data, _ := os.ReadFile(path); string(data) != "not a bbolt file at all, only text" {
		t.Fatalf("the file changed: %q", data)
	}
}

func snapshotOf(t *testing.T, b storage.Backend) snapshot {
	t.Helper()
	tx, err := b.Begin(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	return readSnapshot(t, tx)
}

// commitOne appends one entry, as commitN does, from any goroutine.
func commitOne(b storage.Backend, chain string, seq uint64) error {
	tx, err := b.Begin(ctx, true)
	if err != nil {
		return err
	}
	if err := tx.Append(ctx, chain, testRecord(chain, seq), testHead(seq)); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// BenchmarkBackup copies a ledger of 100,000 entries whose last 2,000
// commits are still in the log: Backup (checkpoint, then the copy) beside
// bbolt's own Tx.WriteTo of the file, which copies the same pages but
// leaves the log's commits out. Each iteration first commits 2,000 more
// entries, in both cases.
func BenchmarkBackup(b *testing.B) {
	path := filepath.Join(b.TempDir(), "ledger.db")
	db, err := bolt.Open(path, bolt.Options{Log: bolt.LogOn, MemtableBytesMax: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	next := uint64(1)
	commit := func(n uint64) {
		for range n / 500 {
			commitN(b, db, "bench/chain", next, next+499)
			next += 500
		}
	}
	commit(100_000)
	if err := bolt.Checkpoint(db); err != nil {
		b.Fatal(err)
	}
	b.Run("Backup", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			commit(2_000)
			b.StartTimer()
			info, err := db.Backup(ctx, io.Discard)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(info.Bytes)
		}
	})
	b.Run("BboltWriteToBaseline", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			commit(2_000)
			b.StartTimer()
			err := db.View(func(btx *bbolt.Tx) error {
				n, err := btx.WriteTo(io.Discard)
				b.SetBytes(n)
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}
