package wal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/storage"
)

var testID = ID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}

// identityLog creates a log with testID holding records 1 to through (in
// several segments of SegmentSizeMin) and closes it.
func identityLog(t testing.TB, dir string, through uint64) {
	t.Helper()
	l, err := Open(dir, Options{SegmentSizeBytes: SegmentSizeMin, ID: testID, Create: true, FirstLSN: 1})
	if err != nil {
		t.Fatal(err)
	}
	for lsn := uint64(1); lsn <= through; lsn++ {
		if err := l.Append(lsn, damagePayload(lsn)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// damagePayload is the payload of record lsn in the damage tests: sizes
// from 0 to 400 bytes, so a segment of SegmentSizeMin holds about twenty.
func damagePayload(lsn uint64) []byte {
	return payloadFor(lsn, int(lsn*53)%401)
}

func openIdentity(dir string) (*Log, error) {
	return Open(dir, Options{SegmentSizeBytes: SegmentSizeMin, ID: testID, ReadOnly: true})
}

func TestIdentityLogRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	identityLog(t, dir, 100)
	l, err := Open(dir, Options{SegmentSizeBytes: SegmentSizeMin, ID: testID})
	if err != nil {
		t.Fatal(err)
	}
	if l.NextLSN() != 101 {
		t.Fatalf("NextLSN %d, want 101", l.NextLSN())
	}
	appendOne(t, l, 101)
	l.Close()
	l, err = openIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	checkDamageRecords(t, l, 101)
	if len(segmentFiles(t, dir)) < 3 {
		t.Fatalf("segments %v: want several", segmentFiles(t, dir))
	}
}

func appendOne(t *testing.T, l *Log, lsn uint64) {
	t.Helper()
	if err := l.Append(lsn, damagePayload(lsn)); err != nil {
		t.Fatal(err)
	}
}

func checkDamageRecords(t testing.TB, l *Log, through uint64) {
	t.Helper()
	want := uint64(1)
	for record, err := range l.Records(0) {
		if err != nil {
			t.Fatal(err)
		}
		if record.LSN != want || !bytes.Equal(record.Payload, damagePayload(want)) {
			t.Fatalf("record LSN %d where %d was expected, or its payload differs", record.LSN, want)
		}
		want++
	}
	if want-1 != through {
		t.Fatalf("records through %d, want %d", want-1, through)
	}
}

func TestPreparedLogHasASegmentBeforeItsFirstRecord(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	l, err := Open(dir, Options{SegmentSizeBytes: SegmentSizeMin, ID: testID, Create: true, FirstLSN: 7})
	if err != nil {
		t.Fatal(err)
	}
	if files := segmentFiles(t, dir); len(files) != 0 {
		t.Fatalf("segments %v before Prepare", files)
	}
	if err := l.Prepare(7); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if files := segmentFiles(t, dir); len(files) != 1 || filepath.Base(files[0]) != segmentName(7) {
		t.Fatalf("segments %v, want one named LSN 7", files)
	}
	l, err = Open(dir, Options{SegmentSizeBytes: SegmentSizeMin, ID: testID})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.LastLSN() != 0 || l.NextLSN() != 7 {
		t.Fatalf("LastLSN %d NextLSN %d, want 0 and 7", l.LastLSN(), l.NextLSN())
	}
}

// TestIdentityDamageIsCorrupt: every kind of damage to a log with an
// identity, anywhere but in its newest record, fails the open with
// ErrCorrupt naming the segment.
func TestIdentityDamageIsCorrupt(t *testing.T) {
	const through = 100
	newest := func(t *testing.T, dir string) string {
		files := segmentFiles(t, dir)
		return files[len(files)-1]
	}
	cases := map[string]func(t *testing.T, dir string){
		"byte flipped mid-log": func(t *testing.T, dir string) {
			path := newest(t, dir)
			offsets := recordOffsets(t, path, mustFirstLSN(t, path))
			flipByte(t, path, offsets[0]+RecordHeaderSizeBytes/2)
		},
		"byte flipped in an older segment": func(t *testing.T, dir string) {
			path := segmentFiles(t, dir)[1]
			flipByte(t, path, recordOffsets(t, path, mustFirstLSN(t, path))[1]+RecordHeaderSizeBytes+1)
		},
		"newest segment cut short": func(t *testing.T, dir string) {
			path := newest(t, dir)
			offsets := recordOffsets(t, path, mustFirstLSN(t, path))
			if err := os.Truncate(path, offsets[len(offsets)-1]); err != nil {
				t.Fatal(err)
			}
		},
		"newest segment deleted": func(t *testing.T, dir string) {
			if err := os.Remove(newest(t, dir)); err != nil {
				t.Fatal(err)
			}
		},
		"newest segment emptied": func(t *testing.T, dir string) {
			if err := os.Truncate(newest(t, dir), 0); err != nil {
				t.Fatal(err)
			}
		},
		"newest segment zeroed": func(t *testing.T, dir string) {
			path := newest(t, dir)
			info, _ := os.Stat(path)
			writeBytes(t, path, 0, make([]byte, info.Size()))
		},
		"newest segment renamed away": func(t *testing.T, dir string) {
			path := newest(t, dir)
			if err := os.Rename(path, path+".bak"); err != nil {
				t.Fatal(err)
			}
		},
		"segments renamed in a gap": func(t *testing.T, dir string) {
			path := newest(t, dir)
			first := mustFirstLSN(t, path)
			if err := os.Rename(path, segmentPath(dir, first+1)); err != nil {
				t.Fatal(err)
			}
		},
		"middle segment deleted": func(t *testing.T, dir string) {
			if err := os.Remove(segmentFiles(t, dir)[1]); err != nil {
				t.Fatal(err)
			}
		},
		"every segment deleted": func(t *testing.T, dir string) {
			for _, path := range segmentFiles(t, dir) {
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
			}
		},
		"stray file": func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "zzz.txt"), []byte("x\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "wal")
			identityLog(t, dir, through)
			damage(t, dir)
			before := snapshot(t, dir)
			for _, readOnly := range []bool{true, false} {
				l, err := Open(dir, Options{SegmentSizeBytes: SegmentSizeMin, ID: testID, ReadOnly: readOnly})
				if err == nil {
					l.Close()
					t.Fatalf("read-only %v: the damaged log opened (through LSN %d)", readOnly, l.LastLSN())
				}
				if !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), dir) {
					t.Fatalf("read-only %v: %v, want ErrCorrupt naming a file of %s", readOnly, err, dir)
				}
			}
			if after := snapshot(t, dir); after != before {
				t.Fatal("a failed open changed the log")
			}
		})
	}
}

func mustFirstLSN(t failer, path string) uint64 {
	t.Helper()
	lsn, ok := parseNumbered(filepath.Base(path), segmentSuffix)
	if !ok {
		t.Fatal("not a segment name: " + path)
	}
	return lsn
}

// TestTornNewestRecordEndsTheLog: damage confined to the newest record,
// with nothing after it, reads as a torn write: the log ends before it.
func TestTornNewestRecordEndsTheLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	identityLog(t, dir, 100)
	files := segmentFiles(t, dir)
	path := files[len(files)-1]
	offsets := recordOffsets(t, path, mustFirstLSN(t, path))
	last := offsets[len(offsets)-1]
	writeBytes(t, path, last+RecordHeaderSizeBytes, make([]byte, 8))
	flipByte(t, path, last+RecordHeaderSizeBytes)
	l, err := openIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	checkDamageRecords(t, l, 99)
}

func TestForeignSegmentNamesBothLogs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	identityLog(t, dir, 10)
	other := testID
	other[0] = 0xee
	for _, want := range []ID{other, {}} {
		_, err := Open(dir, Options{SegmentSizeBytes: SegmentSizeMin, ID: want, ReadOnly: true})
		var foreign *ForeignSegmentError
		if !errors.As(err, &foreign) || !errors.Is(err, storage.ErrCorrupt) || foreign.Found != testID || foreign.Want != want {
			t.Fatalf("open with ID %s: %v, want a ForeignSegmentError naming %s", want, err, testID)
		}
		if !strings.Contains(err.Error(), testID.String()) || (!want.IsZero() && !strings.Contains(err.Error(), want.String())) {
			t.Fatalf("%v does not name both logs", err)
		}
	}
}

func TestSalvageKeepsWhatPrecedesTheDamage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	identityLog(t, dir, 100)
	path := segmentFiles(t, dir)[1]
	first := mustFirstLSN(t, path)
	flipByte(t, path, recordOffsets(t, path, first)[2]+RecordHeaderSizeBytes+1)
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := Open(dir, Options{SegmentSizeBytes: SegmentSizeMin, ID: testID, Salvage: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Damage() == nil || !errors.Is(l.Damage(), storage.ErrCorrupt) {
		t.Fatalf("Damage() = %v, want the damage", l.Damage())
	}
	checkDamageRecords(t, l, first+1)
}
