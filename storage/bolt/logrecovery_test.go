package bolt_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// recoveryOptions keep every commit in the log (no checkpoint) across
// segments of 4 KiB, so that a crash leaves a log of several segments.
var recoveryOptions = bolt.Options{Log: bolt.LogOn, MemtableBytesMax: 1 << 40, LogSegmentSizeBytes: 4 << 10, InitialMmapSize: 1 << 20}

// recoveryCommits is how many acknowledged commits the damage tests leave in
// the log: about 240 entries, as in the measurements that found the loss.
const recoveryCommits = 240

// crashWithLog commits seq 1..n to chain "a", one entry per commit, and drops
// the handle as a kill would: everything acknowledged is in the log only.
func crashWithLog(t *testing.T, path string, n uint64) {
	t.Helper()
	b, err := bolt.Open(path, recoveryOptions)
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= n; seq++ {
		commitN(t, b, "a", seq, seq)
	}
	bolt.Abandon(b)
}

// headOf opens path read-only (or writable) and returns chain "a"'s head.
func headOf(t *testing.T, path string, opts bolt.Options) (uint64, error) {
	t.Helper()
	b, err := bolt.Open(path, opts)
	if err != nil {
		return 0, err
	}
	defer b.Close()
	tx, err := b.Begin(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	s := readSnapshot(t, tx)
	for i, data := range s.entries["a"] {
		if want := string(testRecord("a", uint64(i+1)).Data); data != want {
			t.Fatalf("entry %d holds %q, want %q", i+1, data, want)
		}
	}
	return s.heads["a"], nil
}

// segmentsOf lists the log's segment files, oldest first.
func segmentsOf(t *testing.T, path string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(bolt.LogDirectory(path), "*.wal"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	return files
}

// folderSnapshot is the names and contents of the files of a folder.
func folderSnapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return "(none)"
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, entry := range entries {
		data, _ := os.ReadFile(filepath.Join(dir, entry.Name()))
		fmt.Fprintf(&b, "%s %x\n", entry.Name(), data)
	}
	return b.String()
}

func flipAt(t *testing.T, path string, offset int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := []byte{0}
	if _, err := f.ReadAt(b, offset); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x01
	if _, err := f.WriteAt(b, offset); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedLogIsCorrupt: each kind of damage to the log of a ledger that
// was not closed cleanly fails every open (read-only and writable) with
// ErrCorrupt naming where it is, leaves the log untouched, and
// AcceptLogLoss then opens the ledger with the commits before the damage.
func TestDamagedLogIsCorrupt(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, path string)
		names  string // what the error names
	}{
		{"byte flipped mid-log", func(t *testing.T, path string) {
			flipAt(t, segmentsOf(t, path)[1], 10_000%4096)
		}, ".wal"},
		{"byte flipped in the newest segment", func(t *testing.T, path string) {
			flipAt(t, segmentsOf(t, path)[len(segmentsOf(t, path))-1], 100)
		}, ".wal"},
		{"newest segment cut short", func(t *testing.T, path string) {
			if err := os.Truncate(segmentsOf(t, path)[len(segmentsOf(t, path))-1], 1000); err != nil {
				t.Fatal(err)
			}
		}, ".wal"},
		{"newest segment deleted", func(t *testing.T, path string) {
			if err := os.Remove(segmentsOf(t, path)[len(segmentsOf(t, path))-1]); err != nil {
				t.Fatal(err)
			}
		}, ".wal"},
		{"newest segment emptied", func(t *testing.T, path string) {
			if err := os.Truncate(segmentsOf(t, path)[len(segmentsOf(t, path))-1], 0); err != nil {
				t.Fatal(err)
			}
		}, ".wal"},
		{"newest segment renamed", func(t *testing.T, path string) {
			s := segmentsOf(t, path)[len(segmentsOf(t, path))-1]
			if err := os.Rename(s, s+".old"); err != nil {
				t.Fatal(err)
			}
		}, ".wal.old"},
		{"segment-number gap", func(t *testing.T, path string) {
			s := segmentsOf(t, path)[len(segmentsOf(t, path))-1]
			var first uint64
			fmt.Sscanf(filepath.Base(s), "%016x.wal", &first)
			if err := os.Rename(s, filepath.Join(filepath.Dir(s), fmt.Sprintf("%016x.wal", first+1))); err != nil {
				t.Fatal(err)
			}
		}, ".wal"},
		{"first segment deleted", func(t *testing.T, path string) {
			if err := os.Remove(segmentsOf(t, path)[0]); err != nil {
				t.Fatal(err)
			}
		}, "LSN"},
		{"every segment deleted", func(t *testing.T, path string) {
			for _, s := range segmentsOf(t, path) {
				if err := os.Remove(s); err != nil {
					t.Fatal(err)
				}
			}
		}, "no segment"},
		{"whole -wal folder deleted", func(t *testing.T, path string) {
			if err := os.RemoveAll(bolt.LogDirectory(path)); err != nil {
				t.Fatal(err)
			}
		}, "missing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ledger.db")
			crashWithLog(t, path, recoveryCommits)
			if n := len(segmentsOf(t, path)); n < 3 {
				t.Fatalf("%d segments, want several", n)
			}
			c.damage(t, path)
			dir := bolt.LogDirectory(path)
			before := folderSnapshot(t, dir)
			for _, readOnly := range []bool{true, false} {
				opts := recoveryOptions
				opts.ReadOnly = readOnly
				head, err := headOf(t, path, opts)
				if !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), c.names) {
					t.Fatalf("read-only %v: head %d, %v; want ErrCorrupt naming %q", readOnly, head, err, c.names)
				}
			}
			if after := folderSnapshot(t, dir); after != before {
				t.Fatal("a failed open changed the log")
			}
			loss, err := bolt.AcceptLogLoss(path, recoveryOptions)
			if err != nil {
				t.Fatal(err)
			}
			head, err := headOf(t, path, recoveryOptions)
			if err != nil {
				t.Fatalf("open after AcceptLogLoss: %v", err)
			}
			if head != loss.CheckpointLSN || head >= recoveryCommits {
				t.Fatalf("head %d after AcceptLogLoss (%+v), want the commits before the damage", head, loss)
			}
			if c.name != "whole -wal folder deleted" {
				if got := folderSnapshot(t, loss.KeptAs); got != before {
					t.Fatalf("the log kept as %s differs from the damaged log", loss.KeptAs)
				}
			}
			t.Logf("%s: %d of %d commits kept; %s", c.name, head, recoveryCommits, loss.Damage)
		})
	}
}

// TestTornNewestRecordIsTheEnd: damage confined to the newest record, with
// nothing after it, is a torn write: the ledger opens without it.
func TestTornNewestRecordIsTheEnd(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	crashWithLog(t, path, 3)
	b, err := bolt.Open(path, recoveryOptions)
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, b, "a", 4, 4)
	bolt.Abandon(b)
	segments := segmentsOf(t, path)
	newest := segments[len(segments)-1]
	data, err := os.ReadFile(newest)
	if err != nil {
		t.Fatal(err)
	}
	// The newest record is the last non-zero bytes before the zeros.
	end := len(bytes.TrimRight(data, "\x00"))
	flipAt(t, newest, int64(end-1))
	head, err := headOf(t, path, recoveryOptions)
	if err != nil || head != 3 {
		t.Fatalf("head %d, %v; want 3 (the torn newest commit dropped)", head, err)
	}
}

// TestStrayFileInTheLogFolder: a file the log did not write makes the open
// fail before anything is written; a stray file appearing while the ledger
// is open does not change the outcome of its commits or its Close, which
// logs a warning.
func TestStrayFileInTheLogFolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	crashWithLog(t, path, 5)
	stray := filepath.Join(bolt.LogDirectory(path), "zzz.txt")
	if err := os.WriteFile(stray, []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fileBefore, _ := os.ReadFile(path)
	if _, err := headOf(t, path, recoveryOptions); !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), "zzz.txt") {
		t.Fatalf("open with a stray file: %v, want ErrCorrupt naming it", err)
	}
	if fileAfter, _ := os.ReadFile(path); !bytes.Equal(fileBefore, fileAfter) {
		t.Fatal("the refused open wrote to the file")
	}
	if err := os.Remove(stray); err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	opts := recoveryOptions
	opts.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	b, err := bolt.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, b, "a", 6, 6)
	if err := os.WriteFile(stray, []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	commitN(t, b, "a", 7, 7)
	if err := b.Close(); err != nil {
		t.Fatalf("Close after committed work, with a stray file in the log folder: %v", err)
	}
	if !strings.Contains(logged.String(), "level=WARN") || !strings.Contains(logged.String(), "could not be removed") {
		t.Fatalf("no warning logged: %q", logged.String())
	}
	if err := os.Remove(stray); err != nil {
		t.Fatal(err)
	}
	if head, err := headOf(t, path, recoveryOptions); err != nil || head != 7 {
		t.Fatalf("head %d, %v; want 7", head, err)
	}
}

// TestSegmentOfAnotherLedger: a segment copied in from another ledger, or
// left by another lineage of this file (a file restored from a copy), fails
// the open with ErrCorrupt naming both logs, and nothing is skipped or
// deleted.
func TestSegmentOfAnotherLedger(t *testing.T) {
	dir := t.TempDir()
	a, other := filepath.Join(dir, "a.db"), filepath.Join(dir, "other.db")
	crashWithLog(t, a, 5)
	crashWithLog(t, other, 7)
	segments := segmentsOf(t, other)
	copied := filepath.Join(bolt.LogDirectory(a), "00000000000000ff.wal")
	data, err := os.ReadFile(segments[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(copied, data, 0o600); err != nil {
		t.Fatal(err)
	}
	before := folderSnapshot(t, bolt.LogDirectory(a))
	_, err = headOf(t, a, recoveryOptions)
	if !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), "belongs to log") || strings.Count(err.Error(), "log ") < 2 {
		t.Fatalf("open with another ledger's segment: %v; want ErrCorrupt naming both logs", err)
	}
	if folderSnapshot(t, bolt.LogDirectory(a)) != before {
		t.Fatal("the failed open changed the log")
	}

	// Another lineage: the file restored from a copy taken while its
	// previous log was open, beside the log of a later open.
	lineage := filepath.Join(dir, "lineage.db")
	crashWithLog(t, lineage, 3)
	old, err := os.ReadFile(lineage)
	if err != nil {
		t.Fatal(err)
	}
	if head, err := headOf(t, lineage, recoveryOptions); err != nil || head != 3 {
		t.Fatalf("head %d, %v", head, err)
	}
	b, err := bolt.Open(lineage, recoveryOptions)
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, b, "a", 4, 4)
	bolt.Abandon(b)
	if err := os.WriteFile(lineage, old, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := headOf(t, lineage, recoveryOptions); !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), "not to this file's log") {
		t.Fatalf("open of a restored file beside a later log: %v; want ErrCorrupt naming both logs", err)
	}
}

const linkChildEnv = "LEDGER_BOLT_LINK_CHILD"

// TestLinkedPathFindsTheLog runs the reported sequence: a child process
// opens the ledger through a symbolic or hard link, commits, prints its
// acknowledgement and is killed (SIGKILL) before Close; the ledger opened
// through its other name holds the acknowledged commit, and a retry of it
// through either name finds it.
func TestLinkedPathFindsTheLog(t *testing.T) {
	if spec := os.Getenv(linkChildEnv); spec != "" {
		linkChild(spec)
		return
	}
	for _, kind := range []string{"symbolic", "hard", "hard, child on the first name"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			real, link := filepath.Join(dir, "real.db"), filepath.Join(dir, "link.db")
			b, err := bolt.Open(real, recoveryOptions)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if kind == "symbolic" {
				err = os.Symlink("real.db", link)
			} else {
				err = os.Link(real, link)
			}
			if err != nil {
				t.Fatal(err)
			}
			childPath, otherPath := link, real
			if kind == "hard, child on the first name" {
				childPath, otherPath = real, link
			}
			runLinkChild(t, childPath, 2)
			if head, err := headOf(t, otherPath, bolt.Options{ReadOnly: true}); err != nil || head != 2 {
				t.Fatalf("read-only open through %s: head %d, %v; want the 2 acknowledged commits", otherPath, head, err)
			}
			b, err = bolt.Open(otherPath, recoveryOptions)
			if err != nil {
				t.Fatal(err)
			}
			// A retry of the acknowledged commit finds it by its key.
			tx, err := b.Begin(ctx, true)
			if err != nil {
				t.Fatal(err)
			}
			if seq, err := tx.LookupKey(ctx, "a", testRecord("a", 1).IdempotencyKey); err != nil || seq != 1 {
				t.Fatalf("the acknowledged key through %s: seq %d, %v; want seq 1", otherPath, seq, err)
			}
			tx.Rollback()
			commitN(t, b, "a", 3, 3)
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{real, link} {
				if head, err := headOf(t, p, recoveryOptions); err != nil || head != 3 {
					t.Fatalf("through %s: head %d, %v; want 3", p, head, err)
				}
			}
			if kind == "symbolic" {
				if _, err := os.Stat(link + "-wal"); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("a log folder named from the link: %v", err)
				}
			}
		})
	}
}

// runLinkChild starts a child that commits seq 1..n to path, waits for its
// acknowledgement and kills it.
func runLinkChild(t *testing.T, path string, n int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLinkedPathFindsTheLog$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d:%s", linkChildEnv, n, path))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if want := fmt.Sprintf("acknowledged a seq %d\n", n); err != nil || line != want {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child said %q, %v (stderr %s); want %q", line, err, stderr.String(), want)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
}

func linkChild(spec string) {
	var n uint64
	var path string
	if _, err := fmt.Sscanf(spec, "%d:%s", &n, &path); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	b, err := bolt.Open(path, recoveryOptions)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for seq := uint64(1); seq <= n; seq++ {
		tx, err := b.Begin(ctx, true)
		if err == nil {
			err = tx.Append(ctx, "a", testRecord("a", seq), testHead(seq))
		}
		if err == nil {
			err = tx.Commit()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	fmt.Printf("acknowledged a seq %d\n", n)
	select {} // killed here, before Close
}

// TestLogFolderNamedFromASymbolicLink: a log folder an earlier version
// named from a symbolic link (it named the log from the path string) is
// never skipped: an open through the link fails with ErrCorrupt naming it.
func TestLogFolderNamedFromASymbolicLink(t *testing.T) {
	dir := t.TempDir()
	real, link := filepath.Join(dir, "real.db"), filepath.Join(dir, "link.db")
	crashWithLog(t, real, 2)
	if err := os.Symlink("real.db", link); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(bolt.LogDirectory(real), link+"-wal"); err != nil {
		t.Fatal(err)
	}
	if _, err := headOf(t, link, recoveryOptions); !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), "link.db-wal") {
		t.Fatalf("open through the link beside a folder named from it: %v; want ErrCorrupt naming it", err)
	}
}
