package wal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/ledgerworks/ledger/storage"
)

// fileBytes reads a whole segment file.
func fileBytes(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestAppendNoSyncWritesInSync: AppendNoSync makes no write of its own (the
// segment holds zeros past the durable end until a Sync), and one Sync
// writes every queued record, more of them than one pwritev takes, in
// order.
func TestAppendNoSyncWritesInSync(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	opts := Options{SegmentSizeBytes: 1 << 20}
	l := openLog(t, dir, opts)
	appendRange(t, l, 1, 2)
	durableEnd := l.offset
	const through = 900 // three buffers a record at most: above iovecsMax
	for lsn := uint64(3); lsn <= through; lsn++ {
		if err := l.AppendNoSync(lsn, payloadFor(lsn, int(lsn%5)*100)); err != nil {
			t.Fatal(err)
		}
	}
	if l.LastLSN() != through || l.DurableLSN() != 2 {
		t.Fatalf("LastLSN %d DurableLSN %d, want %d and 2", l.LastLSN(), l.DurableLSN(), through)
	}
	segments := segmentFiles(t, dir)
	if len(segments) != 1 {
		t.Fatalf("%d segments, want 1", len(segments))
	}
	if tail := fileBytes(t, segments[0])[durableEnd:]; !bytes.Equal(tail, make([]byte, len(tail))) {
		t.Fatal("AppendNoSync wrote into the segment before a Sync")
	}
	durable, err := l.Sync(3)
	if err != nil || durable != through {
		t.Fatalf("Sync(3): %d, %v; want %d (everything queued)", durable, err, through)
	}
	if durable, err := l.Sync(through); err != nil || durable != through {
		t.Fatalf("Sync(%d) after: %d, %v", through, durable, err)
	}
	l.Close()
	l = openLog(t, dir, opts)
	records, err := readAll(t, l, 0)
	if err != nil || len(records) != through {
		t.Fatalf("%d records (%v), want %d", len(records), err, through)
	}
	for i, record := range records {
		lsn := uint64(i + 1)
		want := payloadFor(lsn, sizeFor(lsn))
		if lsn > 2 {
			want = payloadFor(lsn, int(lsn%5)*100)
		}
		if record.lsn != lsn || !bytes.Equal(record.payload, want) {
			t.Fatalf("record %d: LSN %d or its payload is wrong", i, record.lsn)
		}
	}
}

// TestAppendNoSyncAcrossSegments: records queued for a segment are written
// and synced before the next segment takes records, whether a record does
// not fit or Rotate asked for a new segment.
func TestAppendNoSyncAcrossSegments(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	opts := Options{SegmentSizeBytes: testSegmentSizeBytes}
	l := openLog(t, dir, opts)
	const through = 120
	for lsn := uint64(1); lsn <= through; lsn++ {
		if err := l.AppendNoSync(lsn, payloadFor(lsn, sizeFor(lsn))); err != nil {
			t.Fatal(err)
		}
		if lsn%7 == 0 {
			l.Rotate()
		}
		if lsn%13 == 0 {
			if _, err := l.Sync(lsn); err != nil {
				t.Fatal(err)
			}
		}
	}
	if l.DurableLSN() >= through {
		t.Fatalf("DurableLSN %d before the last Sync", l.DurableLSN())
	}
	if durable, err := l.Sync(through); err != nil || durable != through {
		t.Fatalf("Sync: %d, %v", durable, err)
	}
	if n := len(segmentFiles(t, dir)); n < 10 {
		t.Fatalf("%d segments, want the records spread over many", n)
	}
	l.Close()
	l = openLog(t, dir, opts)
	checkRecords(t, l, 0, through)
}

// TestSyncWriteFailurePoisons: when the queued records cannot be written,
// the Sync fails, the log is unusable and a reopened log ends at the
// durable LSN.
func TestSyncWriteFailurePoisons(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	opts := Options{SegmentSizeBytes: 1 << 20}
	l := openLog(t, dir, opts)
	appendRange(t, l, 1, 5)
	queueRange(t, l, 6, 9)
	// A read-only descriptor in place of the segment: the write fails as
	// an I/O error would.
	readOnly, err := os.Open(l.current.Name())
	if err != nil {
		t.Fatal(err)
	}
	writable := l.current
	l.current = readOnly
	durable, err := l.Sync(9)
	if !errors.Is(err, storage.ErrIO) || !errors.Is(err, ErrUnusable) || durable != 5 {
		t.Fatalf("Sync with a failing write: %d, %v; want 5 and ErrUnusable", durable, err)
	}
	if err := l.AppendNoSync(10, nil); !errors.Is(err, ErrUnusable) {
		t.Fatalf("AppendNoSync after the failure: %v, want ErrUnusable", err)
	}
	if _, err := l.Sync(9); !errors.Is(err, ErrUnusable) {
		t.Fatalf("Sync after the failure: %v, want ErrUnusable", err)
	}
	l.current = writable
	readOnly.Close()
	l.Close()
	l = openLog(t, dir, opts)
	checkRecords(t, l, 0, 5)
}

// TestSyncFailureWithQueuedRecords: a failed fdatasync after the queued
// records were written zeroes them, so a reopened log ends where it was
// durable.
func TestSyncFailureWithQueuedRecords(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	opts := Options{SegmentSizeBytes: 1 << 20}
	l := openLog(t, dir, opts)
	appendRange(t, l, 1, 5)
	queueRange(t, l, 6, 9)
	injected := errors.New("injected fdatasync failure")
	l.SetSyncHook(func() error { return injected })
	if durable, err := l.Sync(7); !errors.Is(err, injected) || durable != 5 {
		t.Fatalf("Sync: %d, %v; want 5 and the injected failure", durable, err)
	}
	l.Close()
	l = openLog(t, dir, opts)
	checkRecords(t, l, 0, 5)
}

// TestTailClearedByFirstAppend: a segment whose record 2 was lost while the
// later record 3 was kept (records written without a sync reach the disk
// out of order). A writable Open changes nothing; the first append, which
// takes LSN 2 with a record as long as the lost one, zeroes record 3
// first, so that it never continues the log.
func TestTailClearedByFirstAppend(t *testing.T) {
	dir := fuzzDirectory(t)
	payloads := [][]byte{[]byte("one"), []byte("two, lost"), []byte("three, kept")}
	segment := encodeSegment(1, payloads, SegmentSizeMin)
	lost := encodeSegment(1, payloads[:1], 0)
	second := len(encodeSegment(1, payloads[:2], 0))
	clear(segment[len(lost):second])
	path := segmentPath(dir, 1)
	if err := os.WriteFile(path, segment, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := Open(dir, Options{SegmentSizeBytes: SegmentSizeMin})
	if err != nil {
		t.Fatal(err)
	}
	if l.LastLSN() != 1 {
		t.Fatalf("LastLSN %d, want 1 (record 2 lost)", l.LastLSN())
	}
	l.Close()
	if !bytes.Equal(fileBytes(t, path), segment) {
		t.Fatal("a writable Open without an append changed the segment")
	}
	l = openLog(t, dir, Options{SegmentSizeBytes: SegmentSizeMin})
	if err := l.Append(2, []byte("two, anew")); err != nil { // as long as the lost one
		t.Fatal(err)
	}
	l.Close()
	l = openLog(t, dir, Options{SegmentSizeBytes: SegmentSizeMin, ReadOnly: true})
	if l.LastLSN() != 2 {
		t.Fatalf("LastLSN %d after the append of 2, want 2: the kept record 3 continued the log", l.LastLSN())
	}
}

// queueRange queues records first..last without syncing them.
func queueRange(t *testing.T, l *Log, first, last uint64) {
	t.Helper()
	for lsn := first; lsn <= last; lsn++ {
		if err := l.AppendNoSync(lsn, payloadFor(lsn, sizeFor(lsn))); err != nil {
			t.Fatal(err)
		}
	}
}
