package wal

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/storage"
)

const testSegmentSizeBytes = 4096

// payloadFor is the deterministic content of the record with lsn: tests
// and the crash child agree on it without sharing state.
func payloadFor(lsn uint64, sizeBytes int) []byte {
	source := rand.NewChaCha8([32]byte{byte(lsn), byte(lsn >> 8), byte(lsn >> 16), byte(lsn >> 24), byte(lsn >> 32)})
	payload := make([]byte, sizeBytes)
	source.Read(payload)
	return payload
}

// sizeFor spreads record sizes over small, segment-straddling and
// segment-sized records.
func sizeFor(lsn uint64) int {
	switch lsn % 17 {
	case 0:
		return 0
	case 5:
		return 3000
	case 11:
		return 5000 // larger than a test segment
	default:
		return int(lsn*37) % 700
	}
}

func openLog(t testing.TB, dir string, opts Options) *Log {
	t.Helper()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func appendRange(t testing.TB, l *Log, from uint64, through uint64) {
	t.Helper()
	for lsn := from; lsn <= through; lsn++ {
		if err := l.Append(lsn, payloadFor(lsn, sizeFor(lsn))); err != nil {
			t.Fatalf("Append(%d): %v", lsn, err)
		}
	}
}

type copiedRecord struct {
	lsn     uint64
	payload []byte
}

func readAll(t testing.TB, l *Log, afterLSN uint64) ([]copiedRecord, error) {
	t.Helper()
	var records []copiedRecord
	for record, err := range l.Records(afterLSN) {
		if err != nil {
			return records, err
		}
		records = append(records, copiedRecord{record.LSN, bytes.Clone(record.Payload)})
	}
	return records, nil
}

// checkRecords asserts that l yields exactly the records (afterLSN, through]
// with their deterministic payloads.
func checkRecords(t testing.TB, l *Log, afterLSN uint64, through uint64) {
	t.Helper()
	records, err := readAll(t, l, afterLSN)
	if err != nil {
		t.Fatalf("Records(%d): %v", afterLSN, err)
	}
	if want := int(through - afterLSN); len(records) != want {
		t.Fatalf("Records(%d): %d records, want %d", afterLSN, len(records), want)
	}
	for i, record := range records {
		lsn := afterLSN + 1 + uint64(i)
		if record.lsn != lsn {
			t.Fatalf("record %d: LSN %d, want %d", i, record.lsn, lsn)
		}
		if !bytes.Equal(record.payload, payloadFor(lsn, sizeFor(lsn))) {
			t.Fatalf("record LSN %d: payload differs", lsn)
		}
	}
}

func segmentFiles(t testing.TB, dir string) []string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(dir, "*"+segmentSuffix))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(matches)
	return matches
}

func TestRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	l := openLog(t, dir, Options{SegmentSizeBytes: testSegmentSizeBytes})
	if l.LastLSN() != 0 || l.FirstLSN() != 0 {
		t.Fatalf("empty log: LastLSN %d FirstLSN %d", l.LastLSN(), l.FirstLSN())
	}
	checkRecords(t, l, 0, 0)
	appendRange(t, l, 1, 120)
	if l.LastLSN() != 120 || l.FirstLSN() != 1 {
		t.Fatalf("LastLSN %d FirstLSN %d, want 120 and 1", l.LastLSN(), l.FirstLSN())
	}
	checkRecords(t, l, 0, 120)
	checkRecords(t, l, 57, 120)
	checkRecords(t, l, 120, 120)
	files := segmentFiles(t, dir)
	if len(files) < 10 {
		t.Fatalf("%d segments for 120 records in 4 KiB segments", len(files))
	}
	var total int64
	for _, file := range files {
		info, err := os.Stat(file)
		if err != nil {
			t.Fatal(err)
		}
		total += info.Size()
		if info.Size() < testSegmentSizeBytes {
			t.Fatalf("%s: %d bytes, below the segment size", file, info.Size())
		}
	}
	if l.SizeBytes() != total {
		t.Fatalf("SizeBytes %d, files hold %d", l.SizeBytes(), total)
	}
	// Stopping early ends the iteration.
	count := 0
	for range l.Records(0) {
		count++
		if count == 3 {
			break
		}
	}
	if count != 3 {
		t.Fatalf("early stop after %d records", count)
	}
}

func TestReopenContinuesNumbering(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	l := openLog(t, dir, Options{SegmentSizeBytes: testSegmentSizeBytes})
	// An empty log starts from the numbering the caller persisted elsewhere.
	appendRange(t, l, 1000, 1040)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(1041, nil); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("Append after Close: %v, want ErrClosed", err)
	}
	l = openLog(t, dir, Options{SegmentSizeBytes: testSegmentSizeBytes})
	if l.LastLSN() != 1040 || l.FirstLSN() != 1000 {
		t.Fatalf("reopened: LastLSN %d FirstLSN %d", l.LastLSN(), l.FirstLSN())
	}
	appendRange(t, l, 1041, 1100)
	checkRecords(t, l, 999, 1100)
	l.Close()
	l = openLog(t, dir, Options{SegmentSizeBytes: testSegmentSizeBytes})
	checkRecords(t, l, 999, 1100)
	for _, lsn := range []uint64{1100, 1102, 0, 1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Append(%d) after 1100 did not panic", lsn)
				}
			}()
			l.Append(lsn, []byte("x"))
		}()
	}
	checkRecords(t, l, 999, 1100)
}

func TestEmptyLogRejectsLSNZero(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{SegmentSizeBytes: testSegmentSizeBytes})
	defer func() {
		if recover() == nil {
			t.Fatal("Append(0) did not panic")
		}
		if l.LastLSN() != 0 || len(segmentFiles(t, l.dir)) != 0 {
			t.Fatal("the refused append wrote something")
		}
	}()
	l.Append(0, []byte("x"))
}

func TestOptionsOutOfLimits(t *testing.T) {
	for _, size := range []int64{-1, SegmentSizeMin - 8, SegmentSizeMin + 1, SegmentSizeMax + 8} {
		dir := filepath.Join(t.TempDir(), "wal")
		_, err := Open(dir, Options{SegmentSizeBytes: size})
		if !errors.Is(err, ErrOptions) {
			t.Fatalf("segment size %d: %v, want ErrOptions", size, err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("segment size %d: the directory was created", size)
		}
	}
}

func TestRotateReleaseRemove(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	l := openLog(t, dir, Options{SegmentSizeBytes: 64 << 10})
	write := func(from, through uint64) {
		for lsn := from; lsn <= through; lsn++ {
			if err := l.Append(lsn, payloadFor(lsn, 100)); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(1, 10)
	if err := l.Rotate(); err != nil {
		t.Fatal(err)
	}
	if err := l.Rotate(); err != nil { // twice: still one new segment
		t.Fatal(err)
	}
	write(11, 20)
	l.Rotate()
	write(21, 25)
	files := segmentFiles(t, dir)
	want := []string{segmentName(1), segmentName(11), segmentName(21)}
	if len(files) != 3 || filepath.Base(files[0]) != want[0] || filepath.Base(files[1]) != want[1] || filepath.Base(files[2]) != want[2] {
		t.Fatalf("segments %v, want %v", files, want)
	}
	if l.SizeBytes() != 3*64<<10 {
		t.Fatalf("SizeBytes %d", l.SizeBytes())
	}
	// 15 is inside the second segment: only the first goes.
	if err := l.Release(15); err != nil {
		t.Fatal(err)
	}
	if l.FirstLSN() != 11 || len(segmentFiles(t, dir)) != 2 || l.SizeBytes() != 2*64<<10 {
		t.Fatalf("after Release(15): FirstLSN %d, %d segments, %d bytes", l.FirstLSN(), len(segmentFiles(t, dir)), l.SizeBytes())
	}
	records, err := readAll(t, l, 0)
	if err != nil || len(records) != 15 || records[0].lsn != 11 {
		t.Fatalf("records after release: %d, %v", len(records), err)
	}
	// Releasing everything keeps the segment being appended to.
	if err := l.Release(25); err != nil {
		t.Fatal(err)
	}
	if l.FirstLSN() != 21 || len(segmentFiles(t, dir)) != 1 {
		t.Fatalf("after Release(25): FirstLSN %d, %d segments", l.FirstLSN(), len(segmentFiles(t, dir)))
	}
	write(26, 26)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Remove(); !errors.Is(err, ErrNotReleased) {
		t.Fatalf("Remove with LSN 26 unreleased: %v, want ErrNotReleased", err)
	}
	if len(segmentFiles(t, dir)) != 1 {
		t.Fatal("the refused Remove deleted a segment")
	}
	l = openLog(t, dir, Options{SegmentSizeBytes: 64 << 10})
	checkRecordsSized(t, l, 20, 26, 100)
	if err := l.Release(26); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the directory is still there: %v", err)
	}
}

func TestRemoveBeforeClosePanics(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{SegmentSizeBytes: testSegmentSizeBytes})
	defer func() {
		if recover() == nil {
			t.Fatal("Remove before Close did not panic")
		}
	}()
	l.Remove()
}

func TestRemoveKeepsForeignFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	l := openLog(t, dir, Options{SegmentSizeBytes: testSegmentSizeBytes})
	appendRange(t, l, 1, 3)
	l.Release(3)
	l.Close()
	foreign := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(foreign, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := l.Remove(); err == nil {
		t.Fatal("Remove of a directory with a foreign file succeeded")
	}
	if _, err := os.Stat(foreign); err != nil {
		t.Fatalf("the foreign file is gone: %v", err)
	}
}

func checkRecordsSized(t testing.TB, l *Log, afterLSN uint64, through uint64, sizeBytes int) {
	t.Helper()
	records, err := readAll(t, l, afterLSN)
	if err != nil {
		t.Fatal(err)
	}
	if len(records) != int(through-afterLSN) {
		t.Fatalf("%d records after %d, want %d", len(records), afterLSN, through-afterLSN)
	}
	for i, record := range records {
		lsn := afterLSN + 1 + uint64(i)
		if record.lsn != lsn || !bytes.Equal(record.payload, payloadFor(lsn, sizeBytes)) {
			t.Fatalf("record %d: LSN %d or its payload is wrong", i, record.lsn)
		}
	}
}

func TestRecycling(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	opts := Options{SegmentSizeBytes: 8192}
	l := openLog(t, dir, opts)
	for lsn := uint64(1); lsn <= 30; lsn++ {
		if err := l.Append(lsn, payloadFor(lsn, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	first, err := os.Stat(segmentPath(dir, 1))
	if err != nil {
		t.Fatal(err)
	}
	// Wait for the background spare so the pool holds exactly one file:
	// the released segment is then kept as a second spare.
	waitSpares(t, l, 1)
	secondStart := segmentsOf(l)[1].firstLSN
	if err := l.Release(secondStart - 1); err != nil {
		t.Fatal(err)
	}
	spares, _ := filepath.Glob(filepath.Join(dir, "*"+spareSuffix))
	var recycled string
	for _, spare := range spares {
		info, err := os.Stat(spare)
		if err == nil && os.SameFile(info, first) {
			recycled = spare
		}
	}
	if recycled == "" {
		t.Fatalf("the released segment is not among the spares %v", spares)
	}
	// Rotations now take spares, the recycled one among them, without
	// writing a segment of zeros: its stale records end the log.
	next := uint64(31)
	for range 4 {
		l.Rotate()
		if err := l.Append(next, payloadFor(next, 1000)); err != nil {
			t.Fatal(err)
		}
		next++
	}
	found := false
	for _, segment := range segmentsOf(l) {
		info, err := os.Stat(segment.path)
		if err == nil && os.SameFile(info, first) {
			found = true
		}
	}
	if !found {
		t.Fatal("the recycled file was not used as a segment")
	}
	l.Close()
	l = openLog(t, dir, opts)
	if l.LastLSN() != next-1 || l.FirstLSN() != secondStart {
		t.Fatalf("reopened: LastLSN %d FirstLSN %d, want %d and %d", l.LastLSN(), l.FirstLSN(), next-1, secondStart)
	}
	checkRecordsSized(t, l, secondStart-1, next-1, 1000)
	// The next Append goes right after the last record, over stale bytes.
	if err := l.Append(next, payloadFor(next, 1000)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = openLog(t, dir, opts)
	checkRecordsSized(t, l, secondStart-1, next, 1000)
}

func segmentsOf(l *Log) []segment {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.segments)
}

// waitSpares waits until the pool holds want spares and no preparation runs.
func waitSpares(t testing.TB, l *Log, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		l.spares.mu.Lock()
		ready, preparing := len(l.spares.ready), l.spares.preparing != nil
		l.spares.mu.Unlock()
		if ready == want && !preparing {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("the spare pool never held %d spares", want)
}

// failer is what the helpers need of a *testing.T or a *rapid.T.
type failer interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// recordOffsets returns the offset of each valid record of the segment
// file at path whose first LSN is firstLSN.
func recordOffsets(t failer, path string, firstLSN uint64) []int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	info, _ := f.Stat()
	var offsets []int64
	offset := int64(0)
	head := make([]byte, SegmentHeaderSizeBytes)
	f.ReadAt(head, 0)
	if hasMagic(head) {
		offset = SegmentHeaderSizeBytes
	}
	_, err = scanSegment(f, info.Size(), offset, firstLSN, offset > 0, func(record Record) bool {
		offsets = append(offsets, offset)
		offset += recordSizeBytes(len(record.Payload))
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return offsets
}

func TestTornLastRecordEndsTheLog(t *testing.T) {
	damages := map[string]func(t *testing.T, path string, offset int64, size int64){
		"truncated mid-record": func(t *testing.T, path string, offset int64, size int64) {
			if err := os.Truncate(path, offset+size/2); err != nil {
				t.Fatal(err)
			}
		},
		"truncated mid-header": func(t *testing.T, path string, offset int64, size int64) {
			if err := os.Truncate(path, offset+5); err != nil {
				t.Fatal(err)
			}
		},
		"payload byte flipped": func(t *testing.T, path string, offset int64, size int64) {
			flipByte(t, path, offset+RecordHeaderSizeBytes+3)
		},
		"length byte flipped": func(t *testing.T, path string, offset int64, size int64) {
			flipByte(t, path, offset+3)
		},
		"LSN byte flipped": func(t *testing.T, path string, offset int64, size int64) {
			flipByte(t, path, offset+11)
		},
		"checksum byte flipped": func(t *testing.T, path string, offset int64, size int64) {
			flipByte(t, path, offset+15)
		},
		"zeroed": func(t *testing.T, path string, offset int64, size int64) {
			writeBytes(t, path, offset, make([]byte, size))
		},
	}
	for name, damage := range damages {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "wal")
			opts := Options{SegmentSizeBytes: 64 << 10}
			l := openLog(t, dir, opts)
			for lsn := uint64(1); lsn <= 20; lsn++ {
				if err := l.Append(lsn, payloadFor(lsn, 500)); err != nil {
					t.Fatal(err)
				}
			}
			l.Close()
			path := segmentPath(dir, 1)
			offsets := recordOffsets(t, path, 1)
			damage(t, path, offsets[19], recordSizeBytes(500))
			l = openLog(t, dir, opts)
			if l.LastLSN() != 19 {
				t.Fatalf("LastLSN %d after damaging record 20", l.LastLSN())
			}
			checkRecordsSized(t, l, 0, 19, 500)
			for lsn := uint64(20); lsn <= 25; lsn++ {
				if err := l.Append(lsn, payloadFor(lsn, 500)); err != nil {
					t.Fatal(err)
				}
			}
			l.Close()
			l = openLog(t, dir, opts)
			checkRecordsSized(t, l, 0, 25, 500)
		})
	}
}

func flipByte(t failer, path string, offset int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := []byte{0}
	if _, err := f.ReadAt(b, offset); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := f.WriteAt(b, offset); err != nil {
		t.Fatal(err)
	}
}

func writeBytes(t testing.TB, path string, offset int64, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(data, offset); err != nil {
		t.Fatal(err)
	}
}

// threeSegments writes records 1..30 of 500 bytes, rotating after 10 and 20.
func threeSegments(t *testing.T, dir string, opts Options) {
	t.Helper()
	l := openLog(t, dir, opts)
	for lsn := uint64(1); lsn <= 30; lsn++ {
		if err := l.Append(lsn, payloadFor(lsn, 500)); err != nil {
			t.Fatal(err)
		}
		if lsn%10 == 0 {
			l.Rotate()
		}
	}
	l.Close()
}

func TestDamageBeforeTheLastSegmentIsCorrupt(t *testing.T) {
	opts := Options{SegmentSizeBytes: 64 << 10}
	cases := map[string]struct {
		damage func(t *testing.T, dir string)
		names  string // the file the error must name
	}{
		"byte flipped in the first segment": {
			damage: func(t *testing.T, dir string) {
				flipByte(t, segmentPath(dir, 1), recordOffsets(t, segmentPath(dir, 1), 1)[4]+40)
			},
			names: segmentName(1),
		},
		"last record of a middle segment torn": {
			damage: func(t *testing.T, dir string) {
				flipByte(t, segmentPath(dir, 11), recordOffsets(t, segmentPath(dir, 11), 11)[9]+40)
			},
			names: segmentName(11),
		},
		"middle segment missing": {
			damage: func(t *testing.T, dir string) {
				if err := os.Remove(segmentPath(dir, 11)); err != nil {
					t.Fatal(err)
				}
			},
			names: segmentName(21),
		},
		"middle segment's first record flipped": {
			damage: func(t *testing.T, dir string) {
				flipByte(t, segmentPath(dir, 11), 20)
			},
			names: segmentName(11),
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "wal")
			threeSegments(t, dir, opts)
			c.damage(t, dir)
			before := snapshot(t, dir)
			for _, readOnly := range []bool{false, true} {
				_, err := Open(dir, Options{SegmentSizeBytes: opts.SegmentSizeBytes, ReadOnly: readOnly})
				if !errors.Is(err, storage.ErrCorrupt) {
					t.Fatalf("read-only %v: Open: %v, want ErrCorrupt", readOnly, err)
				}
				if !strings.Contains(err.Error(), c.names) || !strings.Contains(err.Error(), "offset") {
					t.Fatalf("read-only %v: the error does not name %s and an offset: %v", readOnly, c.names, err)
				}
			}
			if after := snapshot(t, dir); after != before {
				t.Fatalf("a failed Open changed the directory:\n%s\n%s", before, after)
			}
		})
	}
}

func TestRecordsReportsDamageAfterOpen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	opts := Options{SegmentSizeBytes: 64 << 10}
	threeSegments(t, dir, opts)
	l := openLog(t, dir, opts)
	flipByte(t, segmentPath(dir, 11), recordOffsets(t, segmentPath(dir, 11), 11)[3]+40)
	records, err := readAll(t, l, 0)
	if !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), segmentName(11)) {
		t.Fatalf("Records over a damaged segment: %v", err)
	}
	if len(records) != 13 {
		t.Fatalf("%d records before the damage, want 13", len(records))
	}
}

// snapshot describes every file of dir: name, size, modification time and
// content digest.
func snapshot(t testing.TB, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, entry := range entries {
		info, err := entry.Info()
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(dir, entry.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %d %d %x\n", entry.Name(), info.Size(), info.ModTime().UnixNano(), sha256.Sum256(data))
	}
	return b.String()
}

func TestReadOnlyNeverWrites(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	opts := Options{SegmentSizeBytes: 64 << 10}
	threeSegments(t, dir, opts)
	// A torn tail, an empty stray temporary file and a spare: a writable
	// Open would tidy all three.
	path := segmentPath(dir, 21)
	if err := os.Truncate(path, recordOffsets(t, path, 21)[9]+7); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, tempName(99)), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, spareName(98)), make([]byte, 100), 0o600); err != nil {
		t.Fatal(err)
	}
	dirInfo, _ := os.Stat(dir)
	before := snapshot(t, dir)
	time.Sleep(10 * time.Millisecond) // so that a write would change an mtime
	l, err := Open(dir, Options{SegmentSizeBytes: opts.SegmentSizeBytes, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if l.LastLSN() != 29 || l.FirstLSN() != 1 {
		t.Fatalf("LastLSN %d FirstLSN %d", l.LastLSN(), l.FirstLSN())
	}
	checkRecordsSized(t, l, 0, 29, 500)
	if err := l.Append(30, []byte("x")); !errors.Is(err, storage.ErrReadOnly) {
		t.Fatalf("Append: %v, want ErrReadOnly", err)
	}
	if err := l.Rotate(); !errors.Is(err, storage.ErrReadOnly) {
		t.Fatalf("Rotate: %v, want ErrReadOnly", err)
	}
	if err := l.Release(29); !errors.Is(err, storage.ErrReadOnly) {
		t.Fatalf("Release: %v, want ErrReadOnly", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Remove(); !errors.Is(err, storage.ErrReadOnly) {
		t.Fatalf("Remove: %v, want ErrReadOnly", err)
	}
	if after := snapshot(t, dir); after != before {
		t.Fatalf("a read-only log changed files:\n%s\n%s", before, after)
	}
	if info, _ := os.Stat(dir); !info.ModTime().Equal(dirInfo.ModTime()) {
		t.Fatal("a read-only log changed the directory")
	}

	missing := filepath.Join(t.TempDir(), "missing")
	l, err = Open(missing, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only Open of a missing directory: %v", err)
	}
	if l.LastLSN() != 0 || l.FirstLSN() != 0 || l.SizeBytes() != 0 {
		t.Fatal("a missing directory is not an empty log")
	}
	checkRecords(t, l, 0, 0)
	l.Close()
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a read-only Open created the directory")
	}
}

func TestRecordsLargerThanASegment(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	opts := Options{SegmentSizeBytes: testSegmentSizeBytes}
	l := openLog(t, dir, opts)
	sizes := map[uint64]int{1: 100, 2: 100_000, 3: 100, 4: 100, 5: testSegmentSizeBytes - RecordHeaderSizeBytes, 6: 9000, 7: 9000, 8: 1}
	for lsn := uint64(1); lsn <= 8; lsn++ {
		if err := l.Append(lsn, payloadFor(lsn, sizes[lsn])); err != nil {
			t.Fatal(err)
		}
	}
	check := func(l *Log) {
		t.Helper()
		records, err := readAll(t, l, 0)
		if err != nil || len(records) != 8 {
			t.Fatalf("%d records, %v", len(records), err)
		}
		for _, record := range records {
			if !bytes.Equal(record.payload, payloadFor(record.lsn, sizes[record.lsn])) {
				t.Fatalf("LSN %d: payload differs", record.lsn)
			}
		}
	}
	check(l)
	info, err := os.Stat(segmentPath(dir, 2))
	if err != nil {
		t.Fatal(err)
	}
	if info.Size() != recordSizeBytes(100_000) {
		t.Fatalf("the large record's segment is %d bytes, want %d", info.Size(), recordSizeBytes(100_000))
	}
	// A segment-sized record fills a segment exactly.
	if info, err := os.Stat(segmentPath(dir, 5)); err != nil || info.Size() != testSegmentSizeBytes {
		t.Fatalf("segment of LSN 5: %v", err)
	}
	l.Close()
	check(openLog(t, dir, opts))
}

func TestOversizedRecordIntoAnEmptySegment(t *testing.T) {
	// A crash after a rotation leaves an empty last segment; a record that
	// does not fit it replaces it with a larger file of the same name.
	dir := filepath.Join(t.TempDir(), "wal")
	opts := Options{SegmentSizeBytes: testSegmentSizeBytes}
	l := openLog(t, dir, opts)
	appendRange(t, l, 1, 3)
	l.Close()
	if err := os.WriteFile(segmentPath(dir, 4), make([]byte, testSegmentSizeBytes), 0o600); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, opts)
	if l.LastLSN() != 3 {
		t.Fatalf("LastLSN %d", l.LastLSN())
	}
	if err := l.Append(4, payloadFor(4, 10_000)); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(5, payloadFor(5, 10)); err != nil {
		t.Fatal(err)
	}
	if n := len(segmentsOf(l)); n != 3 {
		t.Fatalf("%d segments, want 3", n)
	}
	l.Close()
	l = openLog(t, dir, opts)
	records, err := readAll(t, l, 0)
	if err != nil || len(records) != 5 || !bytes.Equal(records[3].payload, payloadFor(4, 10_000)) {
		t.Fatalf("%d records, %v", len(records), err)
	}
}

func TestEmptyOnlySegmentIsAnEmptyLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(segmentPath(dir, 7), make([]byte, testSegmentSizeBytes), 0o600); err != nil {
		t.Fatal(err)
	}
	l := openLog(t, dir, Options{SegmentSizeBytes: testSegmentSizeBytes})
	if l.LastLSN() != 0 || l.FirstLSN() != 0 {
		t.Fatalf("LastLSN %d FirstLSN %d", l.LastLSN(), l.FirstLSN())
	}
	if err := l.Append(3, []byte("three")); err != nil {
		t.Fatal(err)
	}
	records, err := readAll(t, l, 0)
	if err != nil || len(records) != 1 || records[0].lsn != 3 {
		t.Fatalf("%v %v", records, err)
	}
}

func TestAppendErrorPoisons(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	opts := Options{SegmentSizeBytes: testSegmentSizeBytes}
	l := openLog(t, dir, opts)
	appendRange(t, l, 1, 3)
	// Close the segment under the log: the next write fails as an I/O error would.
	l.current.Close()
	if err := l.Append(4, []byte("four")); !errors.Is(err, storage.ErrIO) {
		t.Fatalf("Append on a failed file: %v, want ErrIO", err)
	}
	// The record was queued (LastLSN may count it) and its write failed
	// in the sync: it is not durable.
	if l.DurableLSN() != 3 {
		t.Fatalf("DurableLSN %d after a failed append", l.DurableLSN())
	}
	l.Rotate()
	if err := l.Append(4, []byte("four")); !errors.Is(err, storage.ErrIO) {
		t.Fatalf("second Append: %v, want ErrIO", err)
	}
	l.current = nil
	l.Close()
	l = openLog(t, dir, opts)
	checkRecords(t, l, 0, 3)
}

func TestConcurrentAppendReleaseRotate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	opts := Options{SegmentSizeBytes: 8192}
	l := openLog(t, dir, opts)
	const total = 1500
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		for lsn := uint64(1); lsn <= total; lsn++ {
			if err := l.Append(lsn, payloadFor(lsn, 200)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var released uint64
	for i := 0; ; i++ {
		select {
		case <-done:
			wg.Wait()
			if err := l.Release(released); err != nil {
				t.Fatal(err)
			}
			first := l.FirstLSN()
			if first > released+1 {
				t.Fatalf("FirstLSN %d past the released LSN %d", first, released)
			}
			checkRecordsSized(t, l, first-1, total, 200)
			l.Close()
			l = openLog(t, dir, opts)
			checkRecordsSized(t, l, first-1, total, 200)
			return
		default:
		}
		if i%3 == 0 {
			if err := l.Rotate(); err != nil {
				t.Fatal(err)
			}
		}
		if last := l.LastLSN(); last > 20 {
			released = last - 20
			if err := l.Release(released); err != nil {
				t.Fatal(err)
			}
		}
		if l.SizeBytes() <= 0 && l.LastLSN() > 0 {
			t.Fatal("SizeBytes of a log with records is 0")
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// TestSegmentsGrow: the first segment is SegmentSizeInitial and each new one
// twice the previous, up to SegmentSizeBytes; no spare is prepared before
// segments have the full size, released segments of a smaller size are
// removed, not kept as spares, and a reopened log grows from its last
// segment.
func TestSegmentsGrow(t *testing.T) {
	const full = 4 * SegmentSizeInitial
	dir := filepath.Join(t.TempDir(), "wal")
	opts := Options{SegmentSizeBytes: full}
	l := openLog(t, dir, opts)
	spareFiles := func() []string {
		t.Helper()
		matches, err := filepath.Glob(filepath.Join(dir, "*"+spareSuffix))
		if err != nil {
			t.Fatal(err)
		}
		return matches
	}
	want := []int64{SegmentSizeInitial, 2 * SegmentSizeInitial, full, full}
	for i, size := range want {
		lsn := uint64(i + 1)
		if err := l.Append(lsn, payloadFor(lsn, 100)); err != nil {
			t.Fatal(err)
		}
		segments := segmentsOf(l)
		if got := segments[len(segments)-1].sizeBytes; got != size {
			t.Fatalf("segment %d: %d bytes, want %d", i+1, got, size)
		}
		info, err := os.Stat(segments[len(segments)-1].path)
		if err != nil || info.Size() != size {
			t.Fatalf("segment %d on disk: %v, %v", i+1, info, err)
		}
		if size < full {
			l.spares.mu.Lock()
			preparing := l.spares.preparing != nil
			l.spares.mu.Unlock()
			if preparing || len(spareFiles()) != 0 {
				t.Fatalf("a spare is prepared while segments are %d bytes", size)
			}
		}
		l.Rotate()
	}
	waitSpares(t, l, 1)
	// The two smaller segments are removed, the first full-size one is
	// recycled beside the prepared spare.
	if err := l.Release(4); err != nil {
		t.Fatal(err)
	}
	spares := spareFiles()
	if len(spares) != 2 {
		t.Fatalf("spares after the release: %v, want 2", spares)
	}
	for _, spare := range spares {
		if info, err := os.Stat(spare); err != nil || info.Size() != full {
			t.Fatalf("spare %s: %v, %v; want %d bytes", spare, info, err, full)
		}
	}
	if files := segmentFiles(t, dir); len(files) != 1 || filepath.Base(files[0]) != segmentName(4) {
		t.Fatalf("segments after the release: %v", files)
	}
	l.Close()
	// A reopened log grows from its last segment: the next is full size.
	l = openLog(t, dir, opts)
	l.Rotate()
	if err := l.Append(5, payloadFor(5, 100)); err != nil {
		t.Fatal(err)
	}
	if segments := segmentsOf(l); segments[len(segments)-1].sizeBytes != full {
		t.Fatalf("after reopening: a %d-byte segment, want %d", segments[len(segments)-1].sizeBytes, full)
	}
	checkRecordsSized(t, l, 3, 5, 100)
	// A new log on a directory whose spares are full size starts small again.
	l.Release(5)
	l.Close()
	if err := l.Remove(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, opts)
	if err := l.Append(1, payloadFor(1, 100)); err != nil {
		t.Fatal(err)
	}
	if size := l.SizeBytes(); size != SegmentSizeInitial {
		t.Fatalf("a new log's first segment is %d bytes, want %d", size, SegmentSizeInitial)
	}
}

// TestSparesOption: a log with Options.Spares keeps that many released
// segments of the full size, so that the rotations after a release of
// several segments at once write no segment of zeros; the rest are removed.
func TestSparesOption(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	opts := Options{SegmentSizeBytes: 8192, Spares: 4}
	l := openLog(t, dir, opts)
	next := uint64(1)
	for len(segmentsOf(l)) < 12 { // past the growing sizes, then full-size segments
		if err := l.Append(next, payloadFor(next, 1000)); err != nil {
			t.Fatal(err)
		}
		next++
	}
	waitSpares(t, l, 1) // the background preparation, once segments are full size
	segments := segmentsOf(l)
	if err := l.Release(segments[len(segments)-2].firstLSN - 1); err != nil {
		t.Fatal(err)
	}
	spares, _ := filepath.Glob(filepath.Join(dir, "*"+spareSuffix))
	if len(spares) != 4 {
		t.Fatalf("%d spares after releasing %d segments, want 4 (Options.Spares)", len(spares), len(segments)-2)
	}
	numbered := func() uint64 { // files numbered: prepared with zeros, or recycled
		l.spares.mu.Lock()
		defer l.spares.mu.Unlock()
		return l.spares.number
	}
	before := numbered()
	for range 4 {
		l.Rotate()
		if err := l.Append(next, payloadFor(next, 1000)); err != nil {
			t.Fatal(err)
		}
		next++
	}
	if prepared := numbered() - before; prepared > 1 {
		t.Fatalf("%d files numbered for 4 rotations with 4 spares ready, want at most 1 (the refill)", prepared)
	}
	for _, spares := range []int{-1, SparesMax + 1} {
		if _, err := Open(filepath.Join(t.TempDir(), "wal"), Options{Spares: spares}); !errors.Is(err, ErrOptions) {
			t.Fatalf("Spares %d: %v, want ErrOptions", spares, err)
		}
	}
}
