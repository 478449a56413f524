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
	if err := os.WriteFile(path, make([]byte, size), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(m) })
	return m
}

// A scan reads ahead as soon as it is past scanQuietBytes (a cold scan
// faults one page at a time until then, and a verify's chunks each begin
// a scan), then looks at its place every scanCheckBytes and releases the
// map every scanReleaseBytes; a shorter scan makes no system call at all.
func TestScanMemoryReadsAheadOncePastQuiet(t *testing.T) {
	const value = 4 << 10
	m := mapFile(t, 2*scanReleaseBytes+scanReadAheadBytes)
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
	if addr := start + uintptr(read-value); s.aheadStart > addr || s.aheadEnd != min(s.aheadStart+scanReadAheadBytes, s.mapEnd) {
		t.Fatalf("past %d bytes read ahead %#x-%#x, want from at most %#x for %d bytes", read, s.aheadStart, s.aheadEnd, addr, scanReadAheadBytes)
	}
	for ; read+value <= 2*scanReleaseBytes+scanCheckBytes; read += value { // looks every scanCheckBytes from the first
		s.observe(m[read : read+value])
	}
	if s.releases != 2 {
		t.Fatalf("%d releases after %d bytes, want 2", s.releases, read)
	}
}
