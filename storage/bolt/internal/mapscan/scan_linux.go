package mapscan

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A long scan (Verify, an export) reads the file through bbolt's memory map,
// which bbolt marks random-access: the kernel then reads one page per fault,
// and every page read stays mapped, so the process's resident size grows
// with the file. A Scan reads ahead of the scan itself and drops the
// pages of the map every few MiB it reads (they stay in the page cache).
const (
	// scanQuietBytes is how much a scan reads before it looks the map up,
	// reads ahead and releases: short scans pay nothing. It is small
	// because every chunk of a verify is a scan of its own: with 1 MiB, a
	// cold verify of 1,000,000 entries took about 6,000 major faults (one
	// synchronous read each) where it takes 2,500 with 64 KiB.
	scanQuietBytes = 64 << 10
	// scanBeginAdviceBytes is what a scan reads ahead of its first value
	// when a map it knows holds the value (see begin): past its quiet
	// start, where the window takes over.
	scanBeginAdviceBytes = 2 * scanQuietBytes
	// scanReadAheadBytes is the window read ahead of a scan.
	scanReadAheadBytes = 16 << 20
	// scanAdviceBytes is the most one MADV_WILLNEED asks for: less than
	// any device's read-ahead size is not needed, more is not read. The
	// window is advised in blocks of this size aligned in the map, each
	// remembered once advised (scanAdvised).
	scanAdviceBytes = 1 << 20
	// scanCheckBytes is how much a scan reads between two looks at where
	// it is in the map: leaf pages are not in file order, so looking at
	// every value would advise on every jump.
	scanCheckBytes = 256 << 10
	// scanReleaseBytes is how much a scan reads between releases of the
	// map. It is small because one touched page can map a whole large folio
	// of the page cache: 1,000,000 entries verified with 16 MiB peaked at
	// 65 MiB resident, with 2 MiB at about 50 MiB.
	scanReleaseBytes = 2 << 20
	// scanWholeReleaseBytes is how much the process's scans read between
	// two releases of a whole map. A release drops the pages of the values
	// the scan read since the last (their span): one of the whole map
	// costs the kernel a walk of the map's page tables, which grows with
	// the file, and at 100,000,000 entries (a 36 GB map) releasing the
	// whole map every scanReleaseBytes was 32 ns of a verify's CPU an
	// entry, 4-6% of it, beside the pages of the other scans it dropped.
	// What no span covers (bbolt's branch pages, the page headers before
	// a span, the tail of a scan that ended) is dropped by the whole
	// releases.
	scanWholeReleaseBytes = 64 << 20
	// scanSpansMax bounds the spans a scan keeps between releases. Leaf
	// pages are mostly, not always, in file order: a verify's scan of
	// segments jumps every tenth value or so, half of the jumps back, by
	// tens to hundreds of MiB, so one span from its lowest value to its
	// highest would cover what lies between, other scans' pages with it.
	scanSpansMax = 4
	// scanSpanGapBytes is how far past a span a value may lie and still
	// widen it rather than begin a span of its own.
	scanSpanGapBytes = 1 << 20
	// scanMapsMax bounds the maps remembered for begin: bbolt maps the
	// file again when it grows, so old ranges are forgotten, oldest first.
	scanMapsMax = 8
)

type Scan struct {
	advised          *scanAdvised // the blocks of the map advised, nil until looked up
	skipped          int          // blocks not advised again, for tests
	read             int
	sinceCheck       int
	sinceRelease     int
	mapStart, mapEnd uintptr
	disabled         bool
	aheadStart       uintptr
	aheadEnd         uintptr
	// spans bound the values observed since the last release, the
	// ranges the next release drops; the first nspans are in use.
	spans         [scanSpansMax]scanSpan
	nspans        int
	releases      int // how many times the map was released, for tests
	wholeReleases int // how many of those released the whole map, for tests
}

// scanSpan is a range of the map, start to end.
type scanSpan struct{ start, end uintptr }

// gap is how far the range start..end lies from the span; 0 when they
// overlap or touch.
func (sp *scanSpan) gap(start, end uintptr) uintptr {
	switch {
	case end < sp.start:
		return sp.start - end
	case start > sp.end:
		return start - sp.end
	}
	return 0
}

// widen makes the span cover start..end too.
func (sp *scanSpan) widen(start, end uintptr) {
	sp.start, sp.end = min(sp.start, start), max(sp.end, end)
}

// scanReadBytes counts the bytes the process's scans read, for the whole
// releases (scanWholeReleaseBytes).
var scanReadBytes atomic.Uint64

// scanMaps remembers the file maps that scans found (mappingOf), newest
// last, so that a scan can read ahead from its first value (begin), and
// the range the last begin advised.
var scanMaps struct {
	sync.Mutex
	ranges  [][2]uintptr
	advised []*scanAdvised // of each range
	begun   [2]uintptr
}

// scanAdvised remembers which scanAdviceBytes blocks of a map some scan of
// the process advised, one bit each. The scans of a verify jump between
// regions of the file (leaf pages are mostly, not always, in file order,
// and each chunk of a verify is a scan of its own), and a scan that jumps
// starts its window over: each block of a warm verify of 1,000,000 entries
// was advised 5 to 29 times (2 GiB of MADV_WILLNEED for a 360 MiB file,
// each call looking up every page of its range in the page cache, about 4%
// of the verify's CPU). A remembered block is advised again when its last
// page is not in the page cache (the file was evicted since, or the block's
// read is still under way), so a cold scan of a file that an earlier scan
// of the process read still reads ahead; one mincore of a page costs far
// less than a MADV_WILLNEED looking up 256.
type scanAdvised struct {
	start  uintptr
	blocks []atomic.Uint64
}

func newScanAdvised(start, end uintptr) *scanAdvised {
	n := (end - start + scanAdviceBytes - 1) / scanAdviceBytes
	return &scanAdvised{start: start, blocks: make([]atomic.Uint64, (n+63)/64)}
}

// has reports whether the block at addr was advised.
func (a *scanAdvised) has(addr uintptr) bool {
	i := (addr - a.start) / scanAdviceBytes
	return a.blocks[i/64].Load()&(1<<(i%64)) != 0
}

// add remembers the block at addr as advised.
func (a *scanAdvised) add(addr uintptr) {
	i := (addr - a.start) / scanAdviceBytes
	a.blocks[i/64].Or(1 << (i % 64))
}

// rememberScanMap adds the map start..end to scanMaps and returns the
// blocks of it that were advised.
func rememberScanMap(start, end uintptr) *scanAdvised {
	scanMaps.Lock()
	defer scanMaps.Unlock()
	for i, r := range scanMaps.ranges {
		if r == [2]uintptr{start, end} {
			return scanMaps.advised[i]
		}
	}
	if len(scanMaps.ranges) == scanMapsMax {
		scanMaps.ranges = append(scanMaps.ranges[:0], scanMaps.ranges[1:]...)
		scanMaps.advised = append(scanMaps.advised[:0], scanMaps.advised[1:]...)
	}
	advised := newScanAdvised(start, end)
	scanMaps.ranges = append(scanMaps.ranges, [2]uintptr{start, end})
	scanMaps.advised = append(scanMaps.advised, advised)
	return advised
}

// beginAdvice reports whether a scan that begins at the page start is to
// read ahead: a remembered map holds the scanBeginAdviceBytes from start,
// and start is not in what the last scan to begin advised. Many short
// scans one after another (a verify of many small chains, whose entries
// lie side by side) then pay one system call per scanBeginAdviceBytes, not
// one each.
func beginAdvice(start uintptr) bool {
	scanMaps.Lock()
	defer scanMaps.Unlock()
	if b := scanMaps.begun; b[0] <= start && start < b[1] {
		return false
	}
	for _, r := range scanMaps.ranges {
		if r[0] <= start && start+scanBeginAdviceBytes <= r[1] {
			scanMaps.begun = [2]uintptr{start, start + scanBeginAdviceBytes}
			return true
		}
	}
	return false
}

// Observe is called with every value a scan yields, inside the read
// transaction that keeps the map in place. A value may be of any size.
func (s *Scan) Observe(v []byte) {
	if s.disabled || len(v) == 0 {
		return
	}
	if s.read == 0 {
		s.begin(v)
	}
	s.read += len(v)
	s.sinceCheck += len(v)
	// The first look comes as soon as the scan is past quiet: a cold
	// scan faults one page at a time until then.
	if s.read >= scanQuietBytes && (s.mapEnd == 0 || s.sinceCheck >= scanCheckBytes) {
		s.look(v)
	}
	// After the look: a release drops the values before v, which the
	// caller is done with, not v, which it reads next.
	s.observeSpan(v)
}

// look finds the map at the first look, then reads ahead of v and
// releases the map every scanReleaseBytes.
func (s *Scan) look(v []byte) {
	read := s.sinceCheck
	s.sinceCheck = 0
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(v)))
	if s.mapEnd == 0 {
		if s.mapStart, s.mapEnd = mappingOf(addr); s.mapEnd == 0 {
			s.disabled = true
			return
		}
		s.advised = rememberScanMap(s.mapStart, s.mapEnd)
	}
	if addr < s.mapStart || addr >= s.mapEnd {
		return
	}
	s.readAhead(addr)
	s.sinceRelease += read
	if s.sinceRelease >= scanReleaseBytes {
		s.release()
	}
}

// observeSpan adds v to the spans of the values observed since the last
// release: the span it lies within scanSpanGapBytes of, else a span of its
// own, else, all spans in use, the nearest.
func (s *Scan) observeSpan(v []byte) {
	start := uintptr(unsafe.Pointer(unsafe.SliceData(v)))
	end := start + uintptr(len(v))
	nearest, nearestGap := 0, ^uintptr(0)
	for i := range s.nspans {
		gap := s.spans[i].gap(start, end)
		if gap <= scanSpanGapBytes {
			s.spans[i].widen(start, end)
			return
		}
		if gap < nearestGap {
			nearest, nearestGap = i, gap
		}
	}
	if s.nspans < scanSpansMax {
		s.spans[s.nspans] = scanSpan{start, end}
		s.nspans++
		return
	}
	s.spans[nearest].widen(start, end)
}

// release drops the pages of the spans from the map, or the whole map when
// the process's scans have read scanWholeReleaseBytes since the last
// time one did.
func (s *Scan) release() {
	read := uint64(s.sinceRelease)
	s.sinceRelease = 0
	s.releases++
	total := scanReadBytes.Add(read)
	spans := s.spans[:s.nspans]
	s.nspans = 0
	if total/scanWholeReleaseBytes != (total-read)/scanWholeReleaseBytes {
		s.wholeReleases++
		madvise(s.mapStart, s.mapEnd-s.mapStart, unix.MADV_DONTNEED)
		return
	}
	// A span's last page, partly read, may hold the start of the value
	// the caller reads next: it stays until a whole release.
	page := uintptr(os.Getpagesize())
	for _, sp := range spans {
		start := max(sp.start&^(page-1), s.mapStart)
		end := min(sp.end&^(page-1), s.mapEnd)
		if start < end {
			madvise(start, end-start, unix.MADV_DONTNEED)
		}
	}
}

// begin reads ahead of a scan's first value when a map that scans of this
// process found holds it: a cold scan would otherwise fault its quiet start
// a page at a time, and each chunk of a verify begins a scan, most of them
// where no other scan read ahead. The map is not looked up here, so that a
// short scan makes one system call at most; a remembered map may since
// have been unmapped (bbolt maps a growing file again), which is harmless
// for advice that never drops anything: a release drops only the map the
// scan itself looked up (mappingOf).
func (s *Scan) begin(v []byte) {
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(v)))
	page := uintptr(os.Getpagesize())
	start := addr &^ (page - 1)
	if !beginAdvice(start) {
		return
	}
	madvise(start, scanBeginAdviceBytes, unix.MADV_WILLNEED)
	s.aheadStart, s.aheadEnd = start, start+scanBeginAdviceBytes
}

// readAhead keeps the scanReadAheadBytes of the map past addr advised,
// topping the window up a block of scanAdviceBytes at a time, so that the
// kernel reads all of it: one MADV_WILLNEED reads at most the device's
// read-ahead size (read_ahead_kb), and a window advised whole again once
// the scan was half through it had only its first part read, which the
// scan then caught up with. A scan that jumps (leaf pages are mostly in
// file order, not always) starts a window at the block where it is; a
// block another scan advised is skipped while its last page is cached.
func (s *Scan) readAhead(addr uintptr) {
	if addr < s.aheadStart || addr > s.aheadEnd {
		s.aheadStart = s.mapStart + (addr-s.mapStart)&^(scanAdviceBytes-1)
		s.aheadEnd = s.aheadStart
	}
	// Whole blocks only: begin advises less than one, and a block is
	// remembered as advised whole.
	s.aheadEnd = s.mapStart + (s.aheadEnd-s.mapStart)&^(scanAdviceBytes-1)
	s.aheadStart = min(s.aheadStart, s.aheadEnd)
	end := min(addr+scanReadAheadBytes, s.mapEnd)
	for s.aheadEnd < end {
		block := s.aheadEnd
		n := min(s.mapEnd-block, scanAdviceBytes)
		if !s.advised.has(block) || !resident(block+n-1) {
			madvise(block, n, unix.MADV_WILLNEED)
			s.advised.add(block)
		} else {
			s.skipped++
		}
		s.aheadEnd += n
	}
}

// resident reports whether the page of the map at addr is in the page
// cache (mincore); false when it cannot tell.
func resident(addr uintptr) bool {
	page := uintptr(os.Getpagesize())
	var vector [1]byte
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, addr&^(page-1), page, uintptr(unsafe.Pointer(&vector[0])))
	return errno == 0 && vector[0]&1 != 0
}

// madvise advises on a range of bbolt's read-only shared file map. Dropped
// pages are read again from the page cache when touched, so advice is never
// wrong, only slow; its errors are ignored.
//
// It is a raw system call, which keeps its P: the kernel's work (reading a
// block into the page cache, dropping a span) keeps the CPU busy rather
// than waiting for it. Through the scheduler a call longer than 20 µs had
// its P handed to another thread, which woke, ran a goroutine and slept
// again when the call returned, and the runtime's monitor, finding such
// calls, kept waking every 20 µs: 3–5% of a verify's CPU at 100,000,000
// entries, where every block advised is read from the disk. A cold verify
// of 10,000,000 entries now sleeps 1,900–2,500 times where it slept
// 9,200–12,000, for 0.96–0.98 of the CPU (four runs of each, alternated).
func madvise(start, length, advice uintptr) {
	_, _, _ = unix.RawSyscall(unix.SYS_MADVISE, start, length, advice)
}

// mappingOf finds the range of the file mapping that holds addr in
// /proc/self/maps; zeros when there is none.
func mappingOf(addr uintptr) (uintptr, uintptr) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 6 || !strings.HasPrefix(fields[1], "r") || fields[1][3] != 's' {
			continue // only shared file mappings
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		if uintptr(start) <= addr && addr < uintptr(end) {
			return uintptr(start), uintptr(end)
		}
	}
	return 0, 0
}
