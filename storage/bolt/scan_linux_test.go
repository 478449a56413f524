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
	forgetScanMaps(t)
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

// forgetScanMaps empties the maps scans remember, for a test whose map may
// lie where an earlier test's was; they are forgotten again at its end.
func forgetScanMaps(t *testing.T) {
	clear := func() {
		scanMaps.Lock()
		scanMaps.ranges, scanMaps.begun = nil, [2]uintptr{}
		scanMaps.Unlock()
	}
	clear()
	t.Cleanup(clear)
}

// A scan that begins inside a map an earlier scan found reads ahead of its
// first value, before it is past quiet: each chunk of a verify is a scan
// whose start a cold verify faulted a page at a time. The advice stays
// inside the map; a scan in a map nobody found, or inside what the last
// scan to begin advised, makes no call.
func TestScanMemoryBeginsAheadInKnownMap(t *testing.T) {
	const value = 4 << 10
	m := mapFile(t, scanQuietBytes+scanReadAheadBytes+2*scanBeginAdviceBytes)
	start := uintptr(unsafe.Pointer(unsafe.SliceData(m)))
	forgetScanMaps(t)

	var first scanMemory
	first.observe(m[:value])
	if first.aheadEnd != 0 {
		t.Fatalf("a scan in a map nobody found read ahead to %#x", first.aheadEnd)
	}
	for read := value; read < scanQuietBytes; read += value {
		first.observe(m[read : read+value])
	}
	if first.mapStart != start {
		t.Fatalf("the first scan found the map at %#x, want %#x", first.mapStart, start)
	}

	at := len(m) - scanBeginAdviceBytes - value // a second scan, further on
	var second scanMemory
	second.observe(m[at : at+value])
	want := start + uintptr(at)
	if second.aheadStart != want || second.aheadEnd != want+scanBeginAdviceBytes {
		t.Fatalf("a scan beginning at %#x read ahead %#x-%#x, want %#x-%#x",
			want, second.aheadStart, second.aheadEnd, want, want+scanBeginAdviceBytes)
	}
	if second.mapEnd != 0 || second.releases != 0 {
		t.Fatalf("a scan of one value looked the map up (%#x-%#x) or released it (%d)", second.mapStart, second.mapEnd, second.releases)
	}

	var again scanMemory // begins inside what second advised
	again.observe(m[at+value : at+2*value])
	if again.aheadEnd != 0 {
		t.Fatalf("a scan beginning inside the range the last one advised read ahead to %#x", again.aheadEnd)
	}

	last := len(m) - value // too close to the map's end for the advice
	var third scanMemory
	third.observe(m[last:])
	if third.aheadEnd != 0 {
		t.Fatalf("a scan %d bytes before the map's end read ahead to %#x, past it", value, third.aheadEnd)
	}
}
