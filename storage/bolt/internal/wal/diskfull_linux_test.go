package wal

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/ledgerworks/ledger/storage"
)

// mountSmallDisk mounts a tmpfs of size (mount's syntax, "4m") at a
// temporary folder and unmounts it at cleanup. It skips the test unless it
// runs as root and the mount works.
func mountSmallDisk(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs (CI runs as root)")
	}
	folder := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", folder).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", folder).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", folder, err, out)
		}
	})
	return folder
}

// fillDisk writes path until the disk it is on has no space left.
func fillDisk(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		_, err := f.Write(chunk)
		if errors.Is(err, syscall.ENOSPC) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// logFiles lists the names in dir.
func logFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, entry := range entries {
		names = append(names, entry.Name())
	}
	slices.Sort(names)
	return names
}

// assertRefusedForSpace checks that err is a full disk's refusal that left
// the log usable.
func assertRefusedForSpace(t *testing.T, err error) {
	t.Helper()
	if err == nil || !errors.Is(err, storage.ErrIO) || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("Append on a full disk: %v; want storage.ErrIO saying no space is left", err)
	}
	if errors.Is(err, ErrUnusable) {
		t.Fatalf("a segment that could not be created made the log unusable: %v", err)
	}
}

// TestFullDiskFirstSegment: the first segment of a log cannot be created on
// a full disk. Append refuses with storage.ErrIO, leaves no file behind,
// and works once there is space.
func TestFullDiskFirstSegment(t *testing.T) {
	disk := mountSmallDisk(t, "4m")
	dir := filepath.Join(disk, "wal")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(disk, "filler")
	fillDisk(t, filler)
	opts := Options{SegmentSizeBytes: 1 << 20}
	l := openLog(t, dir, opts)
	for range 3 {
		assertRefusedForSpace(t, l.Append(1, payloadFor(1, 100)))
		if l.LastLSN() != 0 || l.SizeBytes() != 0 {
			t.Fatalf("a refused Append left LastLSN %d, %d bytes of segments", l.LastLSN(), l.SizeBytes())
		}
		if files := logFiles(t, dir); len(files) != 0 {
			t.Fatalf("a refused Append left %v", files)
		}
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for lsn := uint64(1); lsn <= 3; lsn++ {
		if err := l.Append(lsn, payloadFor(lsn, 100)); err != nil {
			t.Fatalf("Append(%d) once space was freed: %v", lsn, err)
		}
	}
	l.Close()
	checkRecordsSized(t, openLog(t, dir, opts), 0, 3, 100)
}

// TestFullDiskNewSegment: a log holding records cannot start its next
// segment on a full disk. The refused Append writes nothing and leaves the
// log usable: a record that fits the current segment goes in, and the
// refused one goes in once there is space, in a segment of its own.
func TestFullDiskNewSegment(t *testing.T) {
	disk := mountSmallDisk(t, "8m")
	dir := filepath.Join(disk, "wal")
	opts := Options{SegmentSizeBytes: 1 << 20}
	l := openLog(t, dir, opts)
	for lsn := uint64(1); lsn <= 3; lsn++ {
		if err := l.Append(lsn, payloadFor(lsn, 100)); err != nil {
			t.Fatal(err)
		}
	}
	waitSpares(t, l, 1) // no preparation runs while the disk fills
	before := logFiles(t, dir)
	filler := filepath.Join(disk, "filler")
	fillDisk(t, filler)
	large := 3 << 20 // larger than a segment: a file of its own
	for range 3 {
		assertRefusedForSpace(t, l.Append(4, payloadFor(4, large)))
		if l.LastLSN() != 3 {
			t.Fatalf("LastLSN %d after a refused Append", l.LastLSN())
		}
		if files := logFiles(t, dir); !slices.Equal(files, before) {
			t.Fatalf("a refused Append changed the directory: %v, before %v", files, before)
		}
	}
	if err := l.Append(4, payloadFor(4, 100)); err != nil {
		t.Fatalf("a record that fits the current segment after a refusal: %v", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(5, payloadFor(5, large)); err != nil {
		t.Fatalf("Append once space was freed: %v", err)
	}
	if err := l.Append(6, payloadFor(6, 100)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = openLog(t, dir, opts)
	records, err := readAll(t, l, 0)
	if err != nil || len(records) != 6 {
		t.Fatalf("%d records after reopening, %v", len(records), err)
	}
	for _, record := range records {
		size := 100
		if record.lsn == 5 {
			size = large
		}
		if !bytes.Equal(record.payload, payloadFor(record.lsn, size)) {
			t.Fatalf("LSN %d: payload differs", record.lsn)
		}
	}
}

// TestFailedRenameKeepsTheLog: a new segment whose rename fails (here a
// directory holds its name) is a refusal, not a poisoned log, and a
// pending rotation survives it.
func TestFailedRenameKeepsTheLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	opts := Options{SegmentSizeBytes: testSegmentSizeBytes}
	l := openLog(t, dir, opts)
	appendRange(t, l, 1, 3)
	blocker := segmentPath(dir, 4)
	if err := os.MkdirAll(filepath.Join(blocker, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	l.Rotate()
	err := l.Append(4, payloadFor(4, sizeFor(4)))
	if !errors.Is(err, storage.ErrIO) || errors.Is(err, ErrUnusable) {
		t.Fatalf("Append whose segment cannot be renamed: %v; want storage.ErrIO, the log usable", err)
	}
	if strings.Count(strings.Join(logFiles(t, dir), " "), tempSuffix) != 0 {
		t.Fatalf("a refused Append left a temporary file: %v", logFiles(t, dir))
	}
	if err := os.RemoveAll(blocker); err != nil {
		t.Fatal(err)
	}
	appendRange(t, l, 4, 5)
	if n := len(segmentsOf(l)); n != 2 {
		t.Fatalf("%d segments, want 2: the rotation was lost", n)
	}
	l.Close()
	checkRecords(t, openLog(t, dir, opts), 0, 5)
}
