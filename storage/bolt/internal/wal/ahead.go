package wal

import "os"

const (
	// AheadPieceSizeDefault is the least WriteAhead writes at a time when
	// Options.AheadPieceSizeBytes is zero: below it, a record is written
	// whole by the Sync that covers it. Smaller pieces cost more system
	// calls; larger ones leave more for the Sync to wait for.
	AheadPieceSizeDefault = 64 << 10

	// AheadPieceSizeMin bounds Options.AheadPieceSizeBytes from below.
	AheadPieceSizeMin = RecordAlignmentBytes

	// aheadPageSizeBytes: a piece written ahead ends on a page boundary of
	// the file (when pieces are at least a page), so that the page the
	// next piece continues is not written back twice.
	aheadPageSizeBytes = 4 << 10
)

// aheadAlignment is where the pieces of a log end.
func aheadAlignment(pieceSizeBytes int64) int64 {
	if pieceSizeBytes >= aheadPageSizeBytes {
		return aheadPageSizeBytes
	}
	return RecordAlignmentBytes
}

// Ahead is the part of one record's payload that WriteAhead has written
// into the segment before the record was appended. Its owner passes it to
// AppendAheadNoSync, which then queues only the rest, or to DiscardAhead.
// The zero value has nothing written.
type Ahead struct {
	file   *os.File // the segment written into; nil when nothing is
	offset int64    // where the record starts in file
	from   int      // payload[from:end] is in file, after the record's header
	end    int
	// stopped is set once the record no longer fits the segment, or a
	// rotation is pending: it will start a new segment, so nothing more
	// is written ahead.
	stopped bool
}

// Written reports how many bytes of the payload are in the segment.
func (a *Ahead) Written() int { return a.end - a.from }

// WriteAhead writes the part of payload that is final and not yet written
// into the place the record will take when it is appended next, then asks
// the kernel to start writing it back (sync_file_range): the Sync that makes
// the record durable then waits for little more than the end of it and the
// device's flush. A large commit's record is so written while its
// transaction still runs, instead of all at once at its Sync.
//
// payload is the record's payload so far: its bytes from fixedFrom on
// never change again, and more may be appended to it (those before
// fixedFrom may change, and are written by the Sync). Nothing is written
// until Options.AheadPieceSizeBytes new bytes are there, and then only up to a page
// boundary of the file; nothing either once the record cannot fit what is
// left of the segment, or when a rotation is pending: such a record starts
// a new segment, and what was written is left behind the end of the old
// one, in a place no record header ever covers.
//
// Only the appending goroutine calls it, between its appends. The Ahead of
// a record appended or discarded is done with; one whose record was given
// up without DiscardAhead is discarded by the next WriteAhead or append of
// another record. A write error poisons the log, as a failed Sync does.
func (l *Log) WriteAhead(a *Ahead, payload []byte, fixedFrom int) error {
	if a.stopped || l.readOnly || l.current == nil {
		return nil
	}
	if err := l.dropStale(a); err != nil {
		return err
	}
	l.mu.Lock()
	closed, rotate := l.closed, l.rotatePending
	l.mu.Unlock()
	if closed || rotate || l.offset+recordSizeBytes(len(payload)) > l.capacity {
		a.stopped = true
		return nil
	}
	if err := l.poisonedError(); err != nil {
		return err
	}
	if a.file == nil {
		if err := l.clearTail(); err != nil {
			a.stopped = true
			return nil // the append will try again, and report it
		}
		a.file, a.offset, a.from, a.end = l.current, l.offset, fixedFrom, fixedFrom
	}
	if a.file != l.current || a.offset != l.offset || fixedFrom > a.end {
		panic("wal: WriteAhead of a record that moved")
	}
	start := a.offset + RecordHeaderSizeBytes
	stop := (start + int64(len(payload))) &^ (aheadAlignment(l.aheadPieceSizeBytes) - 1)
	if stop-start-int64(a.end) < l.aheadPieceSizeBytes || stop > l.capacity {
		return nil
	}
	l.ahead = a
	if err := writeAt(a.file, start+int64(a.end), [][]byte{payload[a.end : stop-start]}); err != nil {
		return l.poison(err)
	}
	startWriteback(a.file, start+int64(a.end), stop-start-int64(a.end))
	a.end = int(stop - start)
	return nil
}

// DiscardAhead forgets a record written ahead that will not be appended
// (its transaction rolled back): the bytes it wrote are overwritten with
// zeros and synced, so that no record appended later at the same place can
// be followed by a stale piece of it. A failure poisons the log.
func (l *Log) DiscardAhead(a *Ahead) error {
	if l.ahead != a || a.file == nil {
		*a = Ahead{}
		return nil
	}
	l.ahead = nil
	err := l.zeroAhead(a)
	*a = Ahead{}
	return err
}

// dropStale zeroes what was written ahead for a record other than a's
// that was neither appended nor discarded (its owner gave up on it): a's
// record may take its place.
func (l *Log) dropStale(a *Ahead) error {
	stale := l.ahead
	if stale == nil || stale == a {
		return nil
	}
	l.ahead = nil
	return l.zeroAhead(stale)
}

// zeroAhead overwrites what a wrote with zeros, and syncs them.
func (l *Log) zeroAhead(a *Ahead) error {
	if a.end == a.from || a.file != l.current {
		// Behind the end of a segment left: no record goes there again.
		return nil
	}
	start := a.offset + RecordHeaderSizeBytes
	if err := zeroTail(a.file, start+int64(a.from), start+int64(a.end)); err != nil {
		return l.poison(err)
	}
	return nil
}
