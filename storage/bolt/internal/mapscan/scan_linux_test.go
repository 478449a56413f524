//go:build linux

package mapscan

import (
	"bytes"
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
	var s Scan
	read := 0
	for ; read+value < scanQuietBytes; read += value {
		s.Observe(m[read : read+value])
	}
	if s.mapEnd != 0 || s.aheadEnd != 0 {
		t.Fatalf("a scan of %d bytes looked at the map (%#x-%#x) or read ahead (to %#x)", read, s.mapStart, s.mapEnd, s.aheadEnd)
	}
	s.Observe(m[read : read+value])
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
		s.Observe(m[read : read+value])
	}
	checkWindow(start + uintptr(read-scanCheckBytes)) // the last look was at most this far back
	if s.releases != 2 {
		t.Fatalf("%d releases after %d bytes, want 2", s.releases, read)
	}
}

// forgetScanMaps empties the maps scans remember, for a test whose map may
// lie where an earlier test's was; they are forgotten again at its end.
func forgetScanMaps(t testing.TB) {
	clear := func() {
		scanMaps.Lock()
		scanMaps.ranges, scanMaps.advised, scanMaps.begun = nil, nil, [2]uintptr{}
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

	var first Scan
	first.Observe(m[:value])
	if first.aheadEnd != 0 {
		t.Fatalf("a scan in a map nobody found read ahead to %#x", first.aheadEnd)
	}
	for read := value; read < scanQuietBytes; read += value {
		first.Observe(m[read : read+value])
	}
	if first.mapStart != start {
		t.Fatalf("the first scan found the map at %#x, want %#x", first.mapStart, start)
	}

	at := len(m) - scanBeginAdviceBytes - value // a second scan, further on
	var second Scan
	second.Observe(m[at : at+value])
	want := start + uintptr(at)
	if second.aheadStart != want || second.aheadEnd != want+scanBeginAdviceBytes {
		t.Fatalf("a scan beginning at %#x read ahead %#x-%#x, want %#x-%#x",
			want, second.aheadStart, second.aheadEnd, want, want+scanBeginAdviceBytes)
	}
	if second.mapEnd != 0 || second.releases != 0 {
		t.Fatalf("a scan of one value looked the map up (%#x-%#x) or released it (%d)", second.mapStart, second.mapEnd, second.releases)
	}

	var again Scan // begins inside what second advised
	again.Observe(m[at+value : at+2*value])
	if again.aheadEnd != 0 {
		t.Fatalf("a scan beginning inside the range the last one advised read ahead to %#x", again.aheadEnd)
	}

	last := len(m) - value // too close to the map's end for the advice
	var third Scan
	third.Observe(m[last:])
	if third.aheadEnd != 0 {
		t.Fatalf("a scan %d bytes before the map's end read ahead to %#x, past it", value, third.aheadEnd)
	}
}

// mapWrittenFile maps a new file of size bytes written through (so that its
// pages are in the page cache and clean), read-only and shared, and
// returns the map and the file.
func mapWrittenFile(t *testing.T, size int) ([]byte, *os.File) {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "scan"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := f.Write(bytes.Repeat([]byte{'v'}, size)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(m) })
	return m, f
}

// scanThrough observes the values of m[from:to], value bytes each, as one
// scan, and returns it.
func scanThrough(m []byte, from, to, value int) *Scan {
	var s Scan
	for at := from; at+value <= to; at += value {
		s.Observe(m[at : at+value])
	}
	return &s
}

// A block of the map that one scan advised is not advised again by the
// next scan that reads it while the block is cached (a verify's scans jump
// between regions and each chunk is a scan, so a warm verify advised each
// block 5 to 29 times), and is advised again once the file was evicted, so
// that a cold scan is never left to fault a remembered block a page at a
// time.
func TestScanMemoryAdvisesABlockOnceWhileCached(t *testing.T) {
	const value = 4 << 10
	size := 2*scanReadAheadBytes + 4*scanAdviceBytes
	m, f := mapWrittenFile(t, size)
	start := uintptr(unsafe.Pointer(unsafe.SliceData(m)))
	forgetScanMaps(t)
	readTo := 2 * scanReleaseBytes

	first := scanThrough(m, 0, readTo, value)
	if first.advised == nil || first.skipped != 0 {
		t.Fatalf("the first scan of a map found it advised (%d blocks skipped, advised %v)", first.skipped, first.advised != nil)
	}
	windowEnd := first.aheadEnd
	if (first.aheadStart-start)%scanAdviceBytes != 0 || (windowEnd-start)%scanAdviceBytes != 0 {
		t.Fatalf("window %#x-%#x in a map at %#x is not in whole blocks of %d", first.aheadStart, windowEnd, start, scanAdviceBytes)
	}
	for block := start; block < windowEnd; block += scanAdviceBytes {
		if !first.advised.has(block) {
			t.Fatalf("block at %#x, inside the window %#x-%#x, not remembered", block, first.aheadStart, windowEnd)
		}
	}
	if next := windowEnd + scanAdviceBytes; next < start+uintptr(size) && first.advised.has(next) {
		t.Fatalf("block at %#x, past the window, remembered as advised", next)
	}

	second := scanThrough(m, 0, readTo, value)
	if second.advised != first.advised {
		t.Fatal("a second scan of the same map did not find the blocks the first advised")
	}
	blocks := int((second.aheadEnd - second.aheadStart) / scanAdviceBytes)
	if second.skipped != blocks || blocks == 0 {
		t.Fatalf("a scan over cached blocks another scan advised skipped %d of its %d", second.skipped, blocks)
	}

	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	if resident(start + uintptr(readTo)) {
		t.Skip("the file system kept the file's pages in memory when asked to drop them")
	}
	third := scanThrough(m, 0, readTo, value)
	if third.skipped != 0 {
		t.Fatalf("a scan of an evicted file skipped advising %d remembered blocks", third.skipped)
	}
}

// A scan whose window begins where begin advised less than a block, at an
// address inside a block, still advises and remembers whole blocks: a
// block remembered as advised is advised from its first page.
func TestScanMemoryWindowInWholeBlocksAfterBegin(t *testing.T) {
	const value = 4 << 10
	size := scanReadAheadBytes + 8*scanAdviceBytes
	m, _ := mapWrittenFile(t, size)
	start := uintptr(unsafe.Pointer(unsafe.SliceData(m)))
	forgetScanMaps(t)
	scanThrough(m, 0, scanQuietBytes+value, value) // finds the map for begin

	at := scanAdviceBytes + 5*value // inside the second block
	s := scanThrough(m, at, at+2*scanQuietBytes, value)
	if s.mapEnd == 0 {
		t.Fatal("the scan did not look the map up")
	}
	if s.aheadStart != start+scanAdviceBytes || (s.aheadEnd-start)%scanAdviceBytes != 0 || !s.advised.has(s.aheadStart) {
		t.Fatalf("a scan from %#x read ahead %#x-%#x, want whole blocks from %#x", start+uintptr(at), s.aheadStart, s.aheadEnd, start+scanAdviceBytes)
	}
}

// resident tells a cached page of a map from an evicted one.
func TestResident(t *testing.T) {
	m, f := mapWrittenFile(t, 4*scanAdviceBytes)
	start := uintptr(unsafe.Pointer(unsafe.SliceData(m)))
	if !resident(start + scanAdviceBytes) {
		t.Fatal("a page just written is not resident")
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	if resident(start + scanAdviceBytes) {
		t.Skip("the file system kept the file's pages in memory when asked to drop them")
	}
}

// mapped reports whether the page of the process's map at addr is mapped
// (its entry in /proc/self/pagemap is present), which is what a release
// undoes; resident asks the page cache instead.
func mapped(t *testing.T, addr uintptr) bool {
	t.Helper()
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		t.Skipf("no pagemap: %v", err)
	}
	defer f.Close()
	var entry [8]byte
	if _, err := f.ReadAt(entry[:], int64(addr/uintptr(os.Getpagesize()))*8); err != nil {
		t.Skipf("pagemap: %v", err)
	}
	return entry[7]&0x80 != 0 // bit 63: present
}

// touch reads a byte of every page of m[from:to], mapping them.
func touch(m []byte, from, to int) (sum byte) {
	for at := from; at < to; at += os.Getpagesize() {
		sum += m[at]
	}
	return sum
}

// A release drops the pages of the values the scan read since the last
// one, not the whole map: the kernel's walk of a whole map grows with the
// file. Every scanWholeReleaseBytes the process's scans read, a release
// drops the whole map, pages no span covers with it.
func TestScanReleasesTheSpanItRead(t *testing.T) {
	const value = 16 << 10
	page := os.Getpagesize()
	size := 2*scanReleaseBytes + scanReadAheadBytes + 8*scanAdviceBytes
	m, _ := mapWrittenFile(t, size)
	start := uintptr(unsafe.Pointer(unsafe.SliceData(m)))
	forgetScanMaps(t)
	scanReadBytes.Store(0)
	t.Cleanup(func() { scanReadBytes.Store(0) })

	far := size - page // outside every span of the scan below
	benchSink += touch(m, far, far+1)
	if !mapped(t, start+uintptr(far)) {
		t.Skip("a page read through the map is not shown as mapped")
	}
	var s Scan
	at := 0
	for ; s.releases == 0; at += value {
		benchSink += touch(m, at, at+value) // the caller reads what the scan observes
		s.Observe(m[at : at+value])
	}
	if s.wholeReleases != 0 {
		t.Fatalf("%d whole releases after %d bytes read", s.wholeReleases, at)
	}
	last := at - value // the value observed at the release
	for _, read := range []int{0, page, last - page} {
		if mapped(t, start+uintptr(read)) {
			t.Fatalf("page at %d, read before the release at %d, still mapped", read, last)
		}
	}
	if !mapped(t, start+uintptr(far)) {
		t.Fatal("a page outside the scan's span was released")
	}
	if want := (scanSpan{start + uintptr(last), start + uintptr(last+value)}); s.nspans != 1 || s.spans[0] != want {
		t.Fatalf("spans %v after the release, want the value observed at it, %v", s.spans[:s.nspans], want)
	}

	// The process's scans are a release short of scanWholeReleaseBytes.
	scanReadBytes.Store(scanWholeReleaseBytes - 1)
	for releases := s.releases; s.releases == releases; at += value {
		benchSink += touch(m, at, at+value)
		s.Observe(m[at : at+value])
	}
	if s.wholeReleases != 1 {
		t.Fatalf("%d whole releases once the scans read %d bytes, want 1", s.wholeReleases, scanWholeReleaseBytes)
	}
	if mapped(t, start+uintptr(far)) {
		t.Fatal("a whole release left a page outside the span mapped")
	}
}

// A scan that jumps back and forth between two regions of the map (leaf
// pages out of file order) keeps a span in each: a release drops both and
// leaves what lies between them mapped.
func TestScanReleasesTheSpansOfAJumpingScan(t *testing.T) {
	const value = 16 << 10
	page := os.Getpagesize()
	apart := 4 * scanSpanGapBytes
	size := apart + 2*scanReleaseBytes + scanReadAheadBytes
	m, _ := mapWrittenFile(t, size)
	start := uintptr(unsafe.Pointer(unsafe.SliceData(m)))
	forgetScanMaps(t)
	scanReadBytes.Store(0)
	t.Cleanup(func() { scanReadBytes.Store(0) })

	between := apart / 2 // in neither region
	benchSink += touch(m, between, between+1)
	if !mapped(t, start+uintptr(between)) {
		t.Skip("a page read through the map is not shown as mapped")
	}
	var s Scan
	low, high := 0, apart
	for i := 0; s.releases == 0; i++ {
		at := &low
		if i%2 == 1 {
			at = &high
		}
		benchSink += touch(m, *at, *at+value)
		s.Observe(m[*at : *at+value])
		*at += value
	}
	for _, read := range []int{0, low - value - page, apart, high - value - page} {
		if mapped(t, start+uintptr(read)) {
			t.Fatalf("page at %d, read before the release, still mapped", read)
		}
	}
	if !mapped(t, start+uintptr(between)) {
		t.Fatal("a page between the scan's two regions was released")
	}
}
