//go:build linux

package bolt

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapFile maps a new file of size bytes read-only and shared, as bbolt
// maps a ledger file.
func mapFile(t *testing.T, size int) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "scan")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(int64(size)); err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(m) })
	return m
}

// A scan reads ahead as soon as it is past scanQuietBytes (a cold scan
// faults one page at a time until then, and a verify's chunks each begin
// a scan), then looks at its place every scanCheckBytes, keeps the window
// ahead of it full and releases the map every scanReleaseBytes; a shorter
// scan makes no system call at all.
func TestScanMemoryReadsAheadOncePastQuiet(t *testing.T) {
	const value = 4 << 10
	m := mapFile(t, 2*scanReleaseBytes+scanCheckBytes+scanReadAheadBytes+value)
	start := uintptr(unsafe.Pointer(unsafe.SliceData(m)))
	var s scanMemory
	read := 0
	for ; read+value < scanQuietBytes; read += value {
		s.observe(m[read : read+value])
	}
	if s.mapEnd != 0 || s.aheadEnd != 0 {
		t.Fatalf("a scan of %d bytes looked at the map (%#x-%#x) or read ahead (to %#x)", read, s.mapStart, s.mapEnd, s.aheadEnd)
	}
	s.observe(m[read : read+value])
	read += value
	if s.mapStart != start || s.mapEnd != start+uintptr(len(m)) {
		t.Fatalf("map %#x-%#x, want %#x-%#x", s.mapStart, s.mapEnd, start, start+uintptr(len(m)))
	}
	checkWindow := func(addr uintptr) {
		t.Helper()
		if s.aheadStart > addr || s.aheadEnd < addr+scanReadAheadBytes {
			t.Fatalf("after %d bytes, at %#x: read ahead %#x-%#x, want at least %#x-%#x",
				read, addr, s.aheadStart, s.aheadEnd, addr, addr+scanReadAheadBytes)
		}
	}
	checkWindow(start + uintptr(read-value))
	for ; read+value <= 2*scanReleaseBytes+scanCheckBytes; read += value { // looks every scanCheckBytes from the first
		s.observe(m[read : read+value])
	}
	checkWindow(start + uintptr(read-scanCheckBytes)) // the last look was at most this far back
	if s.releases != 2 {
		t.Fatalf("%d releases after %d bytes, want 2", s.releases, read)
	}
}
