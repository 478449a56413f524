package wal

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestAppendKeepsTheFileAllocated checks what makes an fdatasync cheap:
// appends write into blocks that were allocated when the segment was
// created, so neither the size nor the allocated blocks change.
func TestAppendKeepsTheFileAllocated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	l := openLog(t, dir, Options{SegmentSizeBytes: 1 << 20})
	if err := l.Append(1, payloadFor(1, 100)); err != nil {
		t.Fatal(err)
	}
	allocation := func() (int64, int64) {
		info, err := os.Stat(segmentPath(dir, 1))
		if err != nil {
			t.Fatal(err)
		}
		return info.Size(), info.Sys().(*syscall.Stat_t).Blocks
	}
	size, blocks := allocation()
	if size != 1<<20 || blocks*512 < size {
		t.Fatalf("a new segment has size %d and %d bytes allocated, want %d of both", size, blocks*512, 1<<20)
	}
	for lsn := uint64(2); lsn <= 200; lsn++ {
		if err := l.Append(lsn, payloadFor(lsn, 4000)); err != nil {
			t.Fatal(err)
		}
	}
	if len(segmentsOf(l)) != 1 {
		t.Fatal("the records did not stay in one segment")
	}
	if afterSize, afterBlocks := allocation(); afterSize != size || afterBlocks != blocks {
		t.Fatalf("appends changed the segment: size %d -> %d, blocks %d -> %d", size, afterSize, blocks, afterBlocks)
	}
}
