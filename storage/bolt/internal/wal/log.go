package wal

import (
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/ledgerworks/ledger/storage"
)

const (
	// SegmentSizeDefault is the size a segment is preallocated to when
	// Options.SegmentSizeBytes is zero.
	SegmentSizeDefault = 64 << 20

	// SegmentSizeInitial is the size of the first segment of a log (or
	// SegmentSizeBytes when that is smaller); each new segment is twice
	// the previous one, up to SegmentSizeBytes, so that a log holding
	// little never zero-fills megabytes it does not use.
	SegmentSizeInitial = 1 << 20

	// SegmentSizeMin and SegmentSizeMax bound Options.SegmentSizeBytes,
	// which must also be a multiple of RecordAlignmentBytes.
	SegmentSizeMin = 4 << 10
	SegmentSizeMax = 4 << 30

	// RecordSizeMax is the largest payload of one record in bytes; a larger
	// Append is a programmer error (the caller bounds its commits).
	RecordSizeMax = 1 << 30
)

// Options configure Open.
type Options struct {
	// SegmentSizeBytes is the size segments grow to, each twice the
	// previous from SegmentSizeInitial; SegmentSizeDefault (64 MiB) when
	// zero. A record larger than what is left starts a new segment; a
	// record larger than the new segment gets a segment of its own, as
	// large as it needs.
	SegmentSizeBytes int64
	// ReadOnly opens the log for reading its records only: nothing is
	// created, truncated or removed.
	ReadOnly bool
	// Spares is how many released segments of the full size are kept as
	// spares, instead of being removed, for the next rotations to reuse
	// (a new segment is otherwise zero-filled, as many bytes again as the
	// records it will hold); SparesDefault when zero, at most SparesMax.
	// A caller that releases several segments at once keeps as many.
	Spares int
	// ID is the log's identity. Every segment of a log with an identity
	// starts with a header that carries it (and the segment's first LSN and
	// size), a segment the log left ends with a seal naming the next, and
	// Open applies the strict recovery rules of the package documentation:
	// a segment of another log is a *ForeignSegmentError, a log without
	// segments is damage. The zero ID opens a log written by an earlier
	// version: segments without headers, read by the rules of that version.
	ID ID
	// Create makes a new log with an identity: dir must be missing or hold
	// no segment. Its first segment is made by Prepare or the first
	// Append, named FirstLSN.
	Create bool
	// FirstLSN is the LSN of the first record of a log Create makes.
	FirstLSN uint64
	// Salvage opens a log read-only and, instead of failing at damage,
	// keeps the records before it: the segments in order, each as far as
	// its records are valid and continue the previous one, and nothing of
	// a segment of another log. Damage returns what ended it.
	Salvage bool
}

// Log is a write-ahead log: a directory of segment files holding records
// numbered by consecutive LSNs. One goroutine appends; Release, Rotate and
// the accessors may be called from others at the same time.
type Log struct {
	dir              string
	segmentSizeBytes int64
	readOnly         bool
	spares           *spares // nil when read-only

	// id is Options.ID; headed is set when it is not zero. base is where
	// a segment's records start (after its header) and sealReserve the
	// room each keeps for its seal; both are 0 without an identity.
	id          ID
	headed      bool
	base        int64
	sealReserve int64
	salvage     bool
	damage      error

	lastLSN atomic.Uint64

	mu              sync.Mutex
	segments        []segment // in LSN order; the last one is appended to
	sizeBytes       int64     // of segments
	rotatePending   bool
	releasedThrough uint64
	closed          bool

	// Owned by the appending goroutine; current changes only under syncMu
	// too, so that Sync may flush it from another goroutine.
	current        *os.File // the last segment, open for writing; nil when there is none or read-only
	currentRecords uint64
	offset         int64 // in current, after the last record queued
	capacity       int64
	// tailUncleared is set by a writable Open that appends into the last
	// segment it found: clearTail zeroes what is behind the end first.
	tailUncleared bool

	// pendingMu guards the records AppendNoSync queued for current and no
	// Sync has written yet: their buffers (header, payload, padding), the
	// offset of the first and the end and LSN of the last. The next Sync
	// writes them all with one pwritev before its fdatasync, so the
	// appending goroutine makes no system call for a record.
	pendingMu   sync.Mutex
	pending     [][]byte
	pendingFrom int64
	pendingEnd  int64
	pendingLast uint64
	// pendingSpare is the buffer list the last Sync wrote, kept for reuse.
	pendingSpare [][]byte

	// poisoned is the error of a failed write or sync; every later Append
	// and Sync returns it.
	poisoned atomic.Pointer[error]

	// syncMu serializes Sync, and the switch of current to a new segment.
	syncMu sync.Mutex
	// durableLSN is the LSN through which every record is synced; stored
	// under syncMu, loaded anywhere.
	durableLSN atomic.Uint64
	// durableEnd is the offset in current through which it is synced.
	durableEnd int64
	// syncHook, when set (by tests), runs before each fdatasync of Sync; an
	// error it returns is taken as the fdatasync's.
	syncHook atomic.Pointer[func() error]
}

var zeroPadding [RecordAlignmentBytes]byte

// Open opens the log in dir, creating dir (0700) when it is missing unless
// opts.ReadOnly. It scans every segment: a torn record at the end of the
// last one is the end of the log, damage anywhere else is an error wrapping
// storage.ErrCorrupt that names the file and the offset.
func Open(dir string, opts Options) (*Log, error) {
	segmentSizeBytes := opts.SegmentSizeBytes
	if segmentSizeBytes == 0 {
		segmentSizeBytes = SegmentSizeDefault
	}
	if segmentSizeBytes < SegmentSizeMin || segmentSizeBytes > SegmentSizeMax || segmentSizeBytes%RecordAlignmentBytes != 0 {
		return nil, fmt.Errorf("wal: segment size %d bytes, want a multiple of %d in [%d, %d]: %w",
			segmentSizeBytes, RecordAlignmentBytes, int64(SegmentSizeMin), int64(SegmentSizeMax), ErrOptions)
	}
	spareCount := opts.Spares
	if spareCount == 0 {
		spareCount = SparesDefault
	}
	if spareCount < 0 || spareCount > SparesMax {
		return nil, fmt.Errorf("wal: %d spares, want 1 to %d (0 for SparesDefault): %w", opts.Spares, SparesMax, ErrOptions)
	}
	if opts.Salvage {
		opts.ReadOnly = true
	}
	if opts.Create && (opts.ReadOnly || opts.ID.IsZero() || opts.FirstLSN == 0) {
		return nil, fmt.Errorf("wal: create %s: Create needs an ID, a FirstLSN and a writable log: %w", dir, ErrOptions)
	}
	l := &Log{dir: dir, segmentSizeBytes: segmentSizeBytes, readOnly: opts.ReadOnly,
		id: opts.ID, headed: !opts.ID.IsZero(), salvage: opts.Salvage}
	if l.headed {
		l.base = SegmentHeaderSizeBytes
		l.sealReserve = sealSizeBytes
	}
	if opts.ReadOnly {
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			return l, nil
		}
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("wal: create %s: %w: %w", dir, storage.ErrIO, err)
	}
	listing, err := l.list()
	if err != nil {
		return nil, err
	}
	if opts.Create && len(listing.segments) > 0 {
		return nil, fmt.Errorf("wal: create %s: the folder holds segment %s: %w", dir, listing.segments[0].path, storage.ErrCorrupt)
	}
	if l.headed && !opts.Create && len(listing.segments) == 0 {
		err := fmt.Errorf("wal: %s holds no segment: a log with an identity always keeps one (deleted?): %w", dir, storage.ErrCorrupt)
		if !l.salvage {
			return nil, err
		}
		l.damage = err
	}
	if !opts.ReadOnly {
		l.spares = &spares{dir: dir, sizeBytes: segmentSizeBytes, max: spareCount, number: listing.numberNext}
		if err := l.tidy(listing); err != nil {
			return nil, err
		}
	}
	if err := l.recover(listing.segments); err != nil {
		return nil, err
	}
	if l.spares != nil {
		if len(l.segments) == 0 {
			// No numbering to continue: a spare's stale records could carry
			// the LSNs the caller starts from.
			for _, path := range l.spares.ready {
				if err := os.Remove(path); err != nil {
					// recover left no file open: the log has no segment.
					return nil, fmt.Errorf("wal: remove %s: %w: %w", path, storage.ErrIO, err)
				}
			}
			l.spares.ready = nil
		}
		l.refillWhenFullSize()
	}
	return l, nil
}

// Prepare makes sure the log has a segment for the record lsn, the next to
// be appended: a log with an identity then exists on disk, with that
// identity, before its first record is acknowledged. It creates the first
// segment of a log that has none, empty, and does nothing otherwise. A
// failure is returned as Append's to start a segment is (the log is as it
// was). Only the appending goroutine calls it.
func (l *Log) Prepare(lsn uint64) error {
	if l.readOnly {
		return fmt.Errorf("wal: prepare %s: %w", l.dir, storage.ErrReadOnly)
	}
	if err := l.poisonedError(); err != nil {
		return err
	}
	if l.current != nil {
		return nil
	}
	if last := l.lastLSN.Load(); lsn == 0 || (last != 0 && lsn != last+1) {
		panic(fmt.Sprintf("wal: prepare for LSN %d after LSN %d", lsn, last))
	}
	if err := l.startSegment(lsn, 0); err != nil {
		if err := l.poisonedError(); err != nil {
			return err
		}
		return fmt.Errorf("wal: start a segment at LSN %d in %s: %w: %w", lsn, l.dir, storage.ErrIO, err)
	}
	return nil
}

// Damage returns, for a log opened with Options.Salvage, the error that
// ended the records it kept; nil when the whole log was valid.
func (l *Log) Damage() error { return l.damage }

// NextLSN returns the LSN the next Append must have: LastLSN()+1, or for a
// log with an identity and no record the first LSN of its segment; 0 when
// any LSN may come next (an empty log without identity).
func (l *Log) NextLSN() uint64 {
	if last := l.lastLSN.Load(); last > 0 {
		return last + 1
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.headed && len(l.segments) > 0 {
		return l.segments[len(l.segments)-1].firstLSN
	}
	return 0
}

// nextSegmentSizeBytes is the size of the next new segment: twice the
// previous one, up to segmentSizeBytes; the first is SegmentSizeInitial.
// When replacing, the last segment is the empty one being replaced and
// the one before it is the previous.
func (l *Log) nextSegmentSizeBytes(replacing bool) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.segments)
	if replacing {
		n--
	}
	if n <= 0 {
		return min(SegmentSizeInitial, l.segmentSizeBytes)
	}
	return min(2*l.segments[n-1].sizeBytes, l.segmentSizeBytes)
}

// refillWhenFullSize starts the preparation of a spare once the segment
// appended to has the full size: smaller ones are created when they are
// needed, so that a small log never writes zeros it does not use.
func (l *Log) refillWhenFullSize() {
	if l.current != nil && l.capacity >= l.segmentSizeBytes {
		l.spares.refill()
	}
}

// listing is what Open finds in the directory.
type listing struct {
	segments   []segment
	spares     []segment // firstLSN unused
	temps      []string
	numberNext uint64 // above every spare and temporary file number
}

func (l *Log) list() (listing, error) {
	found := listing{}
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return found, fmt.Errorf("wal: read %s: %w: %w", l.dir, storage.ErrIO, err)
	}
	for _, entry := range entries {
		name := entry.Name()
		path := filepath.Join(l.dir, name)
		if firstLSN, ok := parseNumbered(name, segmentSuffix); ok {
			found.segments = append(found.segments, segment{firstLSN: firstLSN, path: path})
		} else if number, ok := parseNumbered(name, spareSuffix); ok {
			info, err := entry.Info()
			if err != nil {
				return found, fmt.Errorf("wal: stat %s: %w: %w", path, storage.ErrIO, err)
			}
			found.spares = append(found.spares, segment{path: path, sizeBytes: info.Size()})
			found.numberNext = max(found.numberNext, number+1)
		} else if number, ok := parseNumbered(name, tempSuffix); ok {
			found.temps = append(found.temps, path)
			found.numberNext = max(found.numberNext, number+1)
		} else if !l.salvage {
			// A file the log did not write may be a segment renamed away
			// (its records missing from the log) or an operator's: either
			// way it is refused before anything is written.
			return found, fmt.Errorf("wal: %s: %q is not a file of the log (a renamed segment, or a stray file): move it out of the folder: %w",
				l.dir, name, storage.ErrCorrupt)
		}
	}
	slices.SortFunc(found.segments, func(a, b segment) int {
		if a.firstLSN < b.firstLSN {
			return -1
		}
		return 1
	})
	return found, nil
}

// tidy removes the temporary files of interrupted preparations and keeps the
// spares that can serve as segments.
func (l *Log) tidy(found listing) error {
	for _, path := range found.temps {
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("wal: remove %s: %w: %w", path, storage.ErrIO, err)
		}
	}
	for _, spare := range found.spares {
		keep := spare.sizeBytes == l.segmentSizeBytes && len(l.spares.ready) < l.spares.max
		if keep {
			l.spares.ready = append(l.spares.ready, spare.path)
		} else if err := os.Remove(spare.path); err != nil {
			return fmt.Errorf("wal: remove %s: %w: %w", spare.path, storage.ErrIO, err)
		}
	}
	return nil
}

// recover scans the segments, checks that each continues the previous one
// and positions the appender after the last valid record. In salvage mode
// damage ends the log where it starts instead of failing the open.
func (l *Log) recover(segments []segment) error {
	// A segment of another log is named as such, wherever it sorts: before
	// the continuity checks would report it as a gap.
	for i := range segments {
		if err := l.checkIdentity(&segments[i]); err != nil {
			if !l.salvage {
				return err
			}
			l.damage = err
			segments = segments[:i]
			break
		}
	}
	lastLSN := uint64(0)
	for i := range segments {
		last := i == len(segments)-1
		segment := &segments[i]
		flag := os.O_RDONLY
		if last && !l.readOnly {
			flag = os.O_RDWR
		}
		f, scan, err := l.openAndScan(segment, flag, lastLSN)
		if err != nil {
			if l.salvage && errors.Is(err, storage.ErrCorrupt) {
				l.damage = err
				segments = segments[:i]
				break
			}
			return err
		}
		if !last {
			f.Close()
			if err := l.checkContinued(segment, scan, segments[i+1]); err != nil {
				if l.salvage {
					l.damage = err
					if scan.records > 0 {
						lastLSN = scan.lastLSN
					}
					segments = segments[:i+1]
					break
				}
				return err
			}
			lastLSN = scan.lastLSN
			continue
		}
		if l.headed {
			if err := l.checkEnd(f, segment, scan); err != nil {
				f.Close()
				if !l.salvage {
					return err
				}
				l.damage = err
				if scan.records > 0 {
					lastLSN = scan.lastLSN
				}
				break
			}
		}
		if scan.records > 0 {
			lastLSN = scan.lastLSN
		}
		if l.readOnly {
			f.Close()
		} else if scan.records == 0 && len(segments) == 1 && !l.headed {
			// The only segment holds no record: the log is empty, and the
			// first Append may start from any LSN. (A log with an identity
			// keeps it: the segment is what names the log.)
			f.Close()
			if err := os.Remove(segment.path); err != nil {
				return fmt.Errorf("wal: remove %s: %w: %w", segment.path, storage.ErrIO, err)
			}
			segments = nil
			break
		} else {
			// What is behind the end is zeroed before the first append
			// (clearTail), not here: an Open whose caller then gives up
			// (a ledger that cannot checkpoint what it recovered) leaves
			// the log as it found it.
			l.tailUncleared = true
			l.current = f
			l.currentRecords = scan.records
			l.offset = scan.endOffset
			l.capacity = segment.sizeBytes
			l.durableEnd = scan.endOffset
		}
	}
	l.segments = segments
	for _, segment := range segments {
		l.sizeBytes += segment.sizeBytes
	}
	l.lastLSN.Store(lastLSN)
	l.durableLSN.Store(lastLSN)
	return nil
}

// checkContinued checks that a segment that is not the last ends where the
// next one starts.
func (l *Log) checkContinued(segment *segment, scan segmentScan, next segment) error {
	if scan.records > 0 && scan.lastLSN+1 == next.firstLSN {
		return nil
	}
	return fmt.Errorf("wal: segment %s: its records end at offset %d after %d records (last LSN %d), but the next segment %s starts at LSN %d: %w",
		segment.path, scan.endOffset, scan.records, scan.lastLSN, filepath.Base(next.path), next.firstLSN, storage.ErrCorrupt)
}

// checkEnd applies the strict rules to the end of the last segment of a log
// with an identity: only a torn final record followed by unwritten space
// ends the log. A seal there means the next segment is missing; a record
// that runs past the file's end, or any valid record (or seal) newer than
// the last good one behind the end, means the end is damage.
func (l *Log) checkEnd(f *os.File, segment *segment, scan segmentScan) error {
	if scan.sealed {
		return fmt.Errorf("wal: segment %s: sealed at offset %d, continued by a segment starting at LSN %d that is missing: %w",
			segment.path, scan.endOffset, scan.lastLSN+1, storage.ErrCorrupt)
	}
	if scan.overrun {
		return fmt.Errorf("wal: segment %s: the record at offset %d runs past the end of the file: %w",
			segment.path, scan.endOffset, storage.ErrCorrupt)
	}
	expected := segment.firstLSN
	if scan.records > 0 {
		expected = scan.lastLSN + 1
	}
	offset, lsn, found, err := laterRecord(f, segment.sizeBytes, scan.endOffset+RecordAlignmentBytes, expected)
	if err != nil {
		return err
	}
	if found {
		return fmt.Errorf("wal: segment %s: the record at offset %d (LSN %d) is damaged, and a valid record of LSN %d follows at offset %d: %w",
			segment.path, scan.endOffset, expected, lsn, offset, storage.ErrCorrupt)
	}
	return nil
}

// openAndScan opens a segment, records its size, checks its header (a log
// with an identity) and scans it. lastLSN is the last record of the
// segments before it, 0 for the first.
func (l *Log) openAndScan(segment *segment, flag int, lastLSN uint64) (*os.File, segmentScan, error) {
	if segment.firstLSN == 0 {
		return nil, segmentScan{}, fmt.Errorf("wal: segment %s: LSN 0 is never used: %w", segment.path, storage.ErrCorrupt)
	}
	f, err := os.OpenFile(segment.path, flag, 0)
	if err != nil {
		return nil, segmentScan{}, fmt.Errorf("wal: open %s: %w: %w", segment.path, storage.ErrIO, err)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, segmentScan{}, fmt.Errorf("wal: stat %s: %w: %w", segment.path, storage.ErrIO, err)
	}
	segment.sizeBytes = info.Size()
	if l.headed {
		err = readSegmentHeader(f, segment, l.id)
	} else {
		err = checkNoHeader(f, segment)
	}
	if err != nil {
		f.Close()
		return nil, segmentScan{}, err
	}
	scan, err := scanSegment(f, segment.sizeBytes, l.base, segment.firstLSN, l.headed, func(Record) bool { return true })
	if err != nil {
		f.Close()
		return nil, segmentScan{}, err
	}
	return f, scan, nil
}

// checkIdentity returns a *ForeignSegmentError when the segment's header
// names another log than l's (or, without an identity, any log); other
// damage is left to the scan.
func (l *Log) checkIdentity(segment *segment) error {
	f, err := os.Open(segment.path)
	if err != nil {
		return nil // the scan reports it
	}
	defer f.Close()
	b := make([]byte, SegmentHeaderSizeBytes)
	if _, err := f.ReadAt(b, 0); err != nil || !hasMagic(b) {
		return nil
	}
	var found ID
	copy(found[:], b[8:24])
	if found != l.id {
		return &ForeignSegmentError{Segment: segment.path, Found: found, Want: l.id}
	}
	return nil
}

// checkNoHeader refuses, in a log opened without an identity, a segment that
// has a header: it belongs to a log with an identity, which a file that
// records none cannot own.
func checkNoHeader(f *os.File, segment *segment) error {
	if segment.sizeBytes < SegmentHeaderSizeBytes {
		return nil
	}
	b := make([]byte, SegmentHeaderSizeBytes)
	if _, err := f.ReadAt(b, 0); err != nil {
		return readError(f, 0, err)
	}
	if !hasMagic(b) {
		return nil
	}
	var found ID
	copy(found[:], b[8:24])
	return &ForeignSegmentError{Segment: segment.path, Found: found}
}

// currentFirstLSN is the first LSN of the segment appended to.
func (l *Log) currentFirstLSN() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.segments[len(l.segments)-1].firstLSN
}

// LastLSN returns the LSN of the last record, 0 for an empty log.
func (l *Log) LastLSN() uint64 {
	return l.lastLSN.Load()
}

// FirstLSN returns the LSN of the first record still held, 0 for an empty log.
func (l *Log) FirstLSN() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lastLSN.Load() == 0 || len(l.segments) == 0 {
		return 0
	}
	return l.segments[0].firstLSN
}

// SizeBytes returns the bytes of the segments on disk (spares not counted).
func (l *Log) SizeBytes() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sizeBytes
}

// Append writes one record and makes it durable before returning: one
// write and one fdatasync of a preallocated segment. lsn must be
// LastLSN()+1, or any LSN >= 1 when the log is empty; anything else, and a
// payload over RecordSizeMax, is a programmer error (panic). An I/O error
// poisons the log: this and every later Append return an error wrapping
// storage.ErrIO, and the caller must reopen the log.
func (l *Log) Append(lsn uint64, payload []byte) error {
	if err := l.AppendNoSync(lsn, payload); err != nil {
		return err
	}
	_, err := l.Sync(lsn)
	return err
}

// AppendNoSync queues one record for the segment, where the next Sync
// writes it (with every record queued before it, in one pwritev) and makes
// it durable: the appending goroutine makes no system call unless the
// record starts a segment. payload must not change until a Sync covered
// it. LastLSN counts the record at once; DurableLSN once a Sync covered
// it. Only the appending goroutine calls it; Sync may run on others at the
// same time.
func (l *Log) AppendNoSync(lsn uint64, payload []byte) error {
	if len(payload) > RecordSizeMax {
		panic(fmt.Sprintf("wal: payload of %d bytes over RecordSizeMax", len(payload)))
	}
	if l.readOnly {
		return fmt.Errorf("wal: append to %s: %w", l.dir, storage.ErrReadOnly)
	}
	l.mu.Lock()
	closed := l.closed
	rotate := l.rotatePending
	l.rotatePending = false
	l.mu.Unlock()
	if closed {
		return fmt.Errorf("wal: append to %s: %w", l.dir, storage.ErrClosed)
	}
	if err := l.poisonedError(); err != nil {
		return err
	}
	last := l.lastLSN.Load()
	if lsn == 0 || (last != 0 && (last == math.MaxUint64 || lsn != last+1)) {
		panic(fmt.Sprintf("wal: append of LSN %d after LSN %d", lsn, last))
	}
	if err := l.clearTail(); err != nil {
		if rotate {
			l.mu.Lock()
			l.rotatePending = true
			l.mu.Unlock()
		}
		return err
	}
	if l.headed && l.currentRecords == 0 && l.current != nil && lsn != l.currentFirstLSN() {
		panic(fmt.Sprintf("wal: append of LSN %d to the empty segment starting at LSN %d", lsn, l.currentFirstLSN()))
	}
	size := recordSizeBytes(len(payload))
	if l.current == nil || (rotate && l.currentRecords > 0) || l.offset+size+l.sealReserve > l.capacity {
		if err := l.startSegment(lsn, size); err != nil {
			if err := l.poisonedError(); err != nil {
				return err
			}
			// Nothing was written into a segment holding records: the log
			// is as it was, and the next Append tries again (a full disk
			// may have room by then).
			if rotate {
				l.mu.Lock()
				l.rotatePending = true
				l.mu.Unlock()
			}
			return fmt.Errorf("wal: start a segment at LSN %d in %s: %w: %w", lsn, l.dir, storage.ErrIO, err)
		}
	}
	header := make([]byte, RecordHeaderSizeBytes)
	encodeHeader(header, lsn, payload)
	l.pendingMu.Lock()
	if len(l.pending) == 0 {
		l.pendingFrom = l.offset
	}
	l.pending = append(l.pending, header, payload)
	if padding := size - RecordHeaderSizeBytes - int64(len(payload)); padding > 0 {
		l.pending = append(l.pending, zeroPadding[:padding])
	}
	l.pendingEnd = l.offset + size
	l.pendingLast = lsn
	l.pendingMu.Unlock()
	l.offset += size
	l.currentRecords++
	l.lastLSN.Store(lsn)
	return nil
}

// clearTail zeroes, before the first append after a writable Open, what is
// not zero behind the end of the log in the segment Open found last (and
// syncs it when it wrote anything): bytes there are a torn record or
// records a crash kept although an earlier one was lost (records written
// without a sync can reach the disk out of order). Left in place, one of
// them could continue the log again once this append rewrote the place of
// the lost one with a record of the same length, and come back at the next
// Open although it was never acknowledged. A failure writes no record: the
// next append tries again.
func (l *Log) clearTail() error {
	if !l.tailUncleared {
		return nil
	}
	if err := zeroTail(l.current, l.offset, l.capacity); err != nil {
		return fmt.Errorf("wal: clear the end of %s: %w: %w", l.current.Name(), storage.ErrIO, err)
	}
	l.tailUncleared = false
	return nil
}

// writePending writes the records queued for current, if any, with one
// pwritev, and returns the end and the LSN of the last one (durableEnd and
// 0 when none was queued). The caller holds syncMu.
func (l *Log) writePending() (end int64, last uint64, err error) {
	l.pendingMu.Lock()
	if len(l.pending) == 0 {
		l.pendingMu.Unlock()
		return l.durableEnd, 0, nil
	}
	buffers, from, end, last := l.pending, l.pendingFrom, l.pendingEnd, l.pendingLast
	l.pending, l.pendingSpare = l.pendingSpare, nil
	l.pendingMu.Unlock()
	err = writeAt(l.current, from, buffers)
	clear(buffers) // the payloads are the callers'
	if cap(buffers) <= pendingBuffersSpareMax {
		l.pendingMu.Lock()
		l.pendingSpare = buffers[:0]
		l.pendingMu.Unlock()
	}
	return end, last, err
}

// pendingBuffersSpareMax bounds the buffer list kept for reuse.
const pendingBuffersSpareMax = 4096

// Sync makes every record through lsn durable and returns the LSN through
// which the log is durable then (at least lsn). It is a group sync: the
// first caller writes every record queued so far (one pwritev) and
// fdatasyncs them, and callers whose record that covered return without a
// system call. A record of a segment Append has left was synced when it
// left it. A failed write or fdatasync poisons the log: the failed Sync
// and every later one for a record it did not
// cover return an error wrapping ErrUnusable and storage.ErrIO. The log
// then overwrites, as far as it can, the records past DurableLSN with
// zeros, so that a reopened log ends where it was durable; a crash may
// keep them nonetheless, as it may keep any record written before its
// Sync returned.
func (l *Log) Sync(lsn uint64) (uint64, error) {
	if durable := l.durableLSN.Load(); durable >= lsn {
		return durable, nil
	}
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if durable := l.durableLSN.Load(); durable >= lsn {
		return durable, nil
	}
	if err := l.poisonedError(); err != nil {
		return l.durableLSN.Load(), err
	}
	if l.current == nil {
		return l.durableLSN.Load(), fmt.Errorf("wal: sync %s: %w", l.dir, storage.ErrClosed)
	}
	target := l.lastLSN.Load()
	if target < lsn {
		panic(fmt.Sprintf("wal: sync of LSN %d, written through %d", lsn, target))
	}
	// Every record through target is queued or written: the queued ones
	// go first, in the same call as the fdatasync that covers them.
	end, last, err := l.writePending()
	if err == nil {
		err = l.syncCurrent()
	}
	if err != nil {
		if end > l.durableEnd {
			// Best effort: the failure leaves the tail's fate unknown.
			_ = writeAt(l.current, l.durableEnd, [][]byte{make([]byte, end-l.durableEnd)})
		}
		return l.durableLSN.Load(), l.poison(err)
	}
	l.durableEnd = end
	l.durableLSN.Store(max(target, last))
	return l.durableLSN.Load(), nil
}

// syncCurrent fdatasyncs current, after the test hook. The caller holds
// syncMu.
func (l *Log) syncCurrent() error {
	if hook := l.syncHook.Load(); hook != nil {
		if err := (*hook)(); err != nil {
			return err
		}
	}
	return syncData(l.current)
}

// DurableLSN returns the LSN through which every record is durable.
func (l *Log) DurableLSN() uint64 { return l.durableLSN.Load() }

// SetSyncHook makes every later fdatasync of Sync call fn first and fail
// with its error, if any; nil removes it. It is for tests that delay or
// fail syncs.
func (l *Log) SetSyncHook(fn func() error) {
	if fn == nil {
		l.syncHook.Store(nil)
		return
	}
	l.syncHook.Store(&fn)
}

func (l *Log) poisonedError() error {
	if p := l.poisoned.Load(); p != nil {
		return *p
	}
	return nil
}

func (l *Log) poison(err error) error {
	poisoned := fmt.Errorf("wal: %s is unusable after a failed write, reopen it: %w: %w: %w", l.dir, ErrUnusable, storage.ErrIO, err)
	if l.poisoned.CompareAndSwap(nil, &poisoned) {
		return poisoned
	}
	return *l.poisoned.Load()
}

// startSegment makes the segment whose first record is lsn, sizeBytes long
// at least, the one appended to. A segment-sized one is a spare renamed; a
// larger one is created here. Either way the directory is synced before the
// first record is written into it, so the record cannot outlive its name.
// An error leaves the log as it was (a new file that did not become a
// segment is removed) unless it poisons the log: then l.poisoned is set.
// The segment left is synced first, so that a Sync need only flush the
// segment appended to.
func (l *Log) startSegment(lsn uint64, recordSizeBytes int64) error {
	replacing := l.current != nil && l.currentRecords == 0
	sizeBytes := max(l.base+recordSizeBytes+l.sealReserve, l.nextSegmentSizeBytes(replacing))
	var header []byte
	if l.headed {
		header = encodeSegmentHeader(segmentHeader{id: l.id, firstLSN: lsn, sizeBytes: sizeBytes})
	}
	target := segmentPath(l.dir, lsn)
	if replacing && l.segments[len(l.segments)-1].firstLSN != lsn {
		panic(fmt.Sprintf("wal: empty segment %s does not start at LSN %d", l.segments[len(l.segments)-1].path, lsn))
	}
	var source string
	if sizeBytes == l.segmentSizeBytes && !replacing {
		spare, err := l.spares.take()
		if err != nil {
			return err
		}
		if header != nil {
			// Durable before the spare becomes the segment: a segment
			// never exists without its header.
			if err := writeSegmentHeader(spare, segmentHeader{id: l.id, firstLSN: lsn, sizeBytes: sizeBytes}); err != nil {
				os.Remove(spare)
				return err
			}
		}
		source = spare
	} else {
		// A segment still growing, a record larger than a segment, or one
		// that does not fit the empty current segment: a file of its own.
		source = filepath.Join(l.dir, tempName(l.spares.nextNumber()))
		if err := createZeroed(source, sizeBytes, nil, header); err != nil {
			return err
		}
	}
	// Renaming over the empty segment being replaced leaves its open file
	// to the old inode, closed below once the new one is in place.
	if err := os.Rename(source, target); err != nil {
		os.Remove(source)
		return err
	}
	if err := syncDirectory(l.dir); err != nil {
		return l.abandonSegment(target, replacing, err)
	}
	f, err := os.OpenFile(target, os.O_RDWR, 0)
	if err != nil {
		return l.abandonSegment(target, replacing, err)
	}
	if err := l.switchSegment(f, lsn); err != nil {
		f.Close()
		return l.abandonSegment(target, replacing, err)
	}
	l.currentRecords = 0
	l.offset = l.base
	l.capacity = sizeBytes
	l.mu.Lock()
	if replacing {
		l.sizeBytes -= l.segments[len(l.segments)-1].sizeBytes
		l.segments = l.segments[:len(l.segments)-1]
	}
	l.segments = append(l.segments, segment{firstLSN: lsn, path: target, sizeBytes: sizeBytes})
	l.sizeBytes += sizeBytes
	l.mu.Unlock()
	l.refillWhenFullSize()
	return nil
}

// switchSegment syncs the records of the segment appended to that no Sync
// covered yet, and in a log with an identity seals it (a seal naming
// nextLSN after its last record, so that a missing successor is damage),
// then makes f the one appended to. A failed sync poisons the log.
func (l *Log) switchSegment(f *os.File, nextLSN uint64) error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if l.current != nil {
		seal := l.headed && l.currentRecords > 0
		if last := l.lastLSN.Load(); l.durableLSN.Load() < last || seal {
			unsynced := l.durableLSN.Load() < last
			_, _, err := l.writePending()
			if err == nil && seal {
				err = writeAt(l.current, l.offset, [][]byte{encodeSeal(nextLSN)})
			}
			if err == nil && unsynced {
				err = l.syncCurrent()
			} else if err == nil {
				err = syncData(l.current) // the seal alone: no record's Sync
			}
			if err != nil {
				return l.poison(err)
			}
			l.durableLSN.Store(last)
		}
		l.current.Close()
	}
	l.current = f
	l.durableEnd = l.base
	return nil
}

// abandonSegment undoes the rename of a new segment that cannot be used:
// the file holds zeros only, so removing it loses nothing. When it replaced
// an empty segment, or cannot be removed, the directory no longer matches
// the log's list of segments and the log is poisoned.
func (l *Log) abandonSegment(target string, replacing bool, cause error) error {
	if !replacing && os.Remove(target) == nil {
		return cause
	}
	l.poison(cause)
	return cause
}

// Rotate makes the next Append start a new segment (the caller rotates when
// it freezes a memory table, so that a checkpoint releases whole segments).
// A log whose current segment holds no record does not rotate.
func (l *Log) Rotate() error {
	if l.readOnly {
		return fmt.Errorf("wal: rotate %s: %w", l.dir, storage.ErrReadOnly)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("wal: rotate %s: %w", l.dir, storage.ErrClosed)
	}
	l.rotatePending = true
	return nil
}

// Release tells the log that every record with LSN <= throughLSN is durable
// elsewhere: the segments holding only such records are recycled as spares
// or removed, oldest first, as long as a segment holding a record remains
// (so LastLSN survives a reopen), each removal synced before the next so that a
// crash leaves a log that still starts with a whole segment. The segment
// being appended to is never removed.
func (l *Log) Release(throughLSN uint64) error {
	if l.readOnly {
		return fmt.Errorf("wal: release %s: %w", l.dir, storage.ErrReadOnly)
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return fmt.Errorf("wal: release %s: %w", l.dir, storage.ErrClosed)
	}
	l.releasedThrough = max(l.releasedThrough, throughLSN)
	// A segment goes when the next one starts at or before throughLSN+1 and
	// holds a record: an empty last segment (its first record was torn)
	// does not keep LastLSN across a reopen, the one before it does.
	lastLSN := l.lastLSN.Load()
	var released []segment
	for len(l.segments) > 1 && l.segments[1].firstLSN-1 <= throughLSN && l.segments[1].firstLSN <= lastLSN {
		released = append(released, l.segments[0])
		l.sizeBytes -= l.segments[0].sizeBytes
		l.segments = l.segments[1:]
	}
	l.mu.Unlock()
	for _, segment := range released {
		recycled, err := l.spares.recycle(segment.path, segment.sizeBytes)
		if err == nil && !recycled {
			err = os.Remove(segment.path)
		}
		if err == nil {
			err = syncDirectory(l.dir)
		}
		if err != nil {
			return fmt.Errorf("wal: release %s: %w: %w", segment.path, storage.ErrIO, err)
		}
	}
	return nil
}

// Records yields the records with LSN > afterLSN, up to LastLSN at the
// time of the call, in LSN order, reading the segments from disk one record
// at a time. A segment that ends before the next one starts, or that
// changed since Open, ends the sequence with an error wrapping
// storage.ErrCorrupt. Records is meant for the start, before Release runs:
// a segment released during the iteration makes it fail.
func (l *Log) Records(afterLSN uint64) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		l.mu.Lock()
		closed := l.closed
		segments := slices.Clone(l.segments)
		l.mu.Unlock()
		lastLSN := l.lastLSN.Load()
		if closed {
			yield(Record{}, fmt.Errorf("wal: records of %s: %w", l.dir, storage.ErrClosed))
			return
		}
		for i, segment := range segments {
			endLSN := lastLSN // the last LSN this segment must hold
			if i+1 < len(segments) {
				endLSN = segments[i+1].firstLSN - 1
			}
			if endLSN <= afterLSN || segment.firstLSN > lastLSN {
				continue
			}
			if !l.yieldSegment(segment, afterLSN, endLSN, yield) {
				return
			}
		}
	}
}

// yieldSegment yields the records of one segment in (afterLSN, endLSN] and
// reports whether the iteration goes on.
func (l *Log) yieldSegment(segment segment, afterLSN uint64, endLSN uint64, yield func(Record, error) bool) bool {
	f, err := os.Open(segment.path)
	if err != nil {
		return yield(Record{}, fmt.Errorf("wal: open %s: %w: %w", segment.path, storage.ErrIO, err))
	}
	defer f.Close()
	stopped := false
	scan, err := scanSegment(f, segment.sizeBytes, l.base, segment.firstLSN, l.headed, func(record Record) bool {
		if record.LSN > afterLSN && !yield(record, nil) {
			stopped = true
			return false
		}
		return record.LSN < endLSN
	})
	if stopped {
		return false
	}
	if err != nil {
		return yield(Record{}, err)
	}
	if scan.lastLSN != endLSN {
		return yield(Record{}, fmt.Errorf("wal: segment %s: records end at offset %d (last LSN %d), want LSN %d: %w",
			segment.path, scan.endOffset, scan.lastLSN, endLSN, storage.ErrCorrupt))
	}
	return true
}

// Close stops the spare preparation and closes the segment being appended
// to. It must not run at the same time as Append.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	if l.spares != nil {
		l.spares.close()
	}
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if l.current == nil {
		return nil
	}
	err := l.current.Close()
	l.current = nil
	if err != nil {
		return fmt.Errorf("wal: close %s: %w: %w", l.dir, storage.ErrIO, err)
	}
	return nil
}

// Remove deletes the log's directory after Close, when it holds no record
// past what Release was told: a clean shutdown leaves no log behind. With
// an unreleased record it returns an error wrapping ErrNotReleased and
// deletes nothing. Files that are not the log's stay, and so does the
// directory then (an error).
func (l *Log) Remove() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		panic("wal: Remove before Close")
	}
	if l.readOnly {
		return fmt.Errorf("wal: remove %s: %w", l.dir, storage.ErrReadOnly)
	}
	if last := l.lastLSN.Load(); last > l.releasedThrough {
		return fmt.Errorf("wal: remove %s: LSN %d is past the released LSN %d: %w", l.dir, last, l.releasedThrough, ErrNotReleased)
	}
	found, err := l.list()
	if err != nil {
		return err
	}
	var paths []string
	for _, spare := range found.spares {
		paths = append(paths, spare.path)
	}
	paths = append(paths, found.temps...)
	for _, segment := range found.segments {
		paths = append(paths, segment.path)
	}
	// Oldest segment first, each removal synced: a crash in between leaves
	// the newest segments, so a reopened log still ends at LastLSN.
	for _, path := range paths {
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("wal: remove %s: %w: %w", path, storage.ErrIO, err)
		}
		if err := syncDirectory(l.dir); err != nil {
			return fmt.Errorf("wal: remove %s: %w: %w", path, storage.ErrIO, err)
		}
	}
	if err := os.Remove(l.dir); err != nil {
		return fmt.Errorf("wal: remove %s: %w: %w", l.dir, storage.ErrIO, err)
	}
	if err := syncDirectory(filepath.Dir(l.dir)); err != nil {
		return fmt.Errorf("wal: remove %s: %w: %w", l.dir, storage.ErrIO, err)
	}
	return nil
}
