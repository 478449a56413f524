package wal

import (
	"bytes"
	"path/filepath"
	"testing"
)

// writeAheadInSteps grows a copy of payload by step bytes at a time,
// calling WriteAhead after each step as a transaction building its record
// does (the first fixedFrom bytes stay zero until the end, then are
// filled), and returns the payload to append.
func writeAheadInSteps(t testing.TB, l *Log, a *Ahead, payload []byte, fixedFrom, step int) []byte {
	t.Helper()
	built := make([]byte, fixedFrom, 16)
	for len(built) < len(payload) {
		n := min(step, len(payload)-len(built))
		built = append(built, payload[len(built):len(built)+n]...)
		if err := l.WriteAhead(a, built, fixedFrom); err != nil {
			t.Fatalf("WriteAhead: %v", err)
		}
	}
	copy(built, payload[:fixedFrom])
	return built
}

// aheadLog opens a new log with 1 MiB segments and 4 KiB pieces written
// ahead, holding the records 1..through.
func aheadLog(t *testing.T, through uint64) (l *Log, dir string, opts Options) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "wal")
	opts = Options{SegmentSizeBytes: 1 << 20, AheadPieceSizeBytes: 4096}
	l = openLog(t, dir, opts)
	appendRange(t, l, 1, through)
	return l, dir, opts
}

// TestWriteAheadRoundTrip: a record written ahead in pieces is in the
// segment before its append, and reads back whole after its Sync and a
// reopen, between records that were not.
func TestWriteAheadRoundTrip(t *testing.T) {
	l, dir, opts := aheadLog(t, 3)
	start := l.offset
	var a Ahead
	big := payloadFor(4, 50_000)
	built := writeAheadInSteps(t, l, &a, big, 5, 1000)
	if a.Written() < 40_000 {
		t.Fatalf("%d bytes written ahead of a 50,000-byte record, want most of it", a.Written())
	}
	onFile := fileBytes(t, segmentFiles(t, dir)[0])
	at := start + RecordHeaderSizeBytes
	if !bytes.Equal(onFile[at+5:at+int64(a.end)], big[5:a.end]) {
		t.Fatal("the pieces are not in the record's place before its append")
	}
	if !bytes.Equal(onFile[start:at+5], make([]byte, RecordHeaderSizeBytes+5)) {
		t.Fatal("WriteAhead wrote the header or the bytes that may still change")
	}
	if err := l.AppendAheadNoSync(4, built, &a); err != nil {
		t.Fatal(err)
	}
	if a != (Ahead{}) {
		t.Fatal("AppendAheadNoSync left the Ahead set")
	}
	if err := l.AppendNoSync(5, payloadFor(5, 100)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Sync(5); err != nil {
		t.Fatal(err)
	}
	appendRange(t, l, 6, 8)
	l.Close()
	l = openLog(t, dir, opts)
	records, err := readAll(t, l, 0)
	if err != nil || len(records) != 8 {
		t.Fatalf("%d records (%v), want 8", len(records), err)
	}
	for _, r := range records {
		want := payloadFor(r.lsn, sizeFor(r.lsn))
		switch r.lsn {
		case 4:
			want = big
		case 5:
			want = payloadFor(5, 100)
		}
		if !bytes.Equal(r.payload, want) {
			t.Fatalf("record %d differs", r.lsn)
		}
	}
}

// TestWriteAheadDiscarded: the pieces of a record that is not appended are
// zeroed, so a shorter record in its place is the end of the log; one
// neither appended nor discarded is zeroed by the next append.
func TestWriteAheadDiscarded(t *testing.T) {
	for _, discard := range []bool{true, false} {
		t.Run(map[bool]string{true: "discarded", false: "abandoned"}[discard], func(t *testing.T) {
			l, dir, opts := aheadLog(t, 2)
			start := l.offset
			var a Ahead
			writeAheadInSteps(t, l, &a, payloadFor(99, 30_000), 0, 5000)
			if a.Written() == 0 {
				t.Fatal("nothing written ahead")
			}
			if discard {
				if err := l.DiscardAhead(&a); err != nil {
					t.Fatal(err)
				}
				if a != (Ahead{}) {
					t.Fatal("DiscardAhead left the Ahead set")
				}
				tail := fileBytes(t, segmentFiles(t, dir)[0])[start:]
				if !bytes.Equal(tail, make([]byte, len(tail))) {
					t.Fatal("DiscardAhead left bytes behind the end of the log")
				}
			}
			if err := l.Append(3, payloadFor(3, 200)); err != nil {
				t.Fatal(err)
			}
			end := l.offset
			tail := fileBytes(t, segmentFiles(t, dir)[0])[end:]
			if !bytes.Equal(tail, make([]byte, len(tail))) {
				t.Fatal("bytes written ahead remain behind the end of the log")
			}
			l.Close()
			l = openLog(t, dir, opts)
			records, err := readAll(t, l, 2)
			if err != nil || l.LastLSN() != 3 || len(records) != 1 || !bytes.Equal(records[0].payload, payloadFor(3, 200)) {
				t.Fatalf("LastLSN %d, %d records after 2 (%v): want the record of LSN 3 alone", l.LastLSN(), len(records), err)
			}
		})
	}
}

// TestWriteAheadRecordMoves: a record that outgrows the segment it was
// written ahead into, or meets a rotation, is written whole into a new
// segment; what was written ahead stays behind the old segment's end,
// where no header covers it, and the log reopens with every record.
func TestWriteAheadRecordMoves(t *testing.T) {
	for _, rotate := range []bool{false, true} {
		t.Run(map[bool]string{false: "outgrown", true: "rotated"}[rotate], func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "wal")
			opts := Options{SegmentSizeBytes: 64 << 10, AheadPieceSizeBytes: 4096}
			l := openLog(t, dir, opts)
			for len(segmentsOf(l)) < 7 { // grow segments to 64 KiB
				appendRange(t, l, l.LastLSN()+1, l.LastLSN()+1)
			}
			var a Ahead
			size := 40_000
			if !rotate {
				size = 100_000
			}
			payload := payloadFor(l.LastLSN()+1, size)
			built := make([]byte, 0, size)
			for len(built) < size {
				built = append(built, payload[len(built):len(built)+1000]...)
				if rotate && len(built) == 20_000 {
					if err := l.Rotate(); err != nil {
						t.Fatal(err)
					}
				}
				if err := l.WriteAhead(&a, built, 0); err != nil {
					t.Fatal(err)
				}
			}
			if a.Written() == 0 || !a.stopped {
				t.Fatalf("written %d, stopped %v: want pieces, then a stop", a.Written(), a.stopped)
			}
			lsn := l.LastLSN() + 1
			segments := len(segmentsOf(l))
			if err := l.AppendAheadNoSync(lsn, built, &a); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Sync(lsn); err != nil {
				t.Fatal(err)
			}
			if len(segmentsOf(l)) != segments+1 {
				t.Fatal("the record did not start a new segment")
			}
			appendRange(t, l, lsn+1, lsn+3)
			l.Close()
			l = openLog(t, dir, opts)
			records, err := readAll(t, l, lsn-1)
			if err != nil || len(records) != 4 || !bytes.Equal(records[0].payload, payload) {
				t.Fatalf("%d records after %d (%v), or the moved record differs", len(records), lsn-1, err)
			}
		})
	}
}

// TestWriteAheadThenCrash: pieces written for a record that never got
// appended (the process stopped) end nothing: the log reopens at its last
// record, and the first append zeroes them before records take their place.
func TestWriteAheadThenCrash(t *testing.T) {
	l, dir, opts := aheadLog(t, 5)
	end := l.offset
	var a Ahead
	writeAheadInSteps(t, l, &a, payloadFor(6, 60_000), 5, 7000)
	l.Close() // as a crash leaves it: no append, no discard
	l = openLog(t, dir, opts)
	if l.LastLSN() != 5 {
		t.Fatalf("LastLSN %d, want 5", l.LastLSN())
	}
	if err := l.Append(6, payloadFor(6, 10)); err != nil {
		t.Fatal(err)
	}
	tail := fileBytes(t, segmentFiles(t, dir)[0])[end+recordSizeBytes(10):]
	if !bytes.Equal(tail, make([]byte, len(tail))) {
		t.Fatal("the pieces of the lost record remain behind the new end")
	}
}

// TestWriteAheadOptions: the piece size is checked on Open.
func TestWriteAheadOptions(t *testing.T) {
	for _, size := range []int64{-1, AheadPieceSizeMin - 1, RecordSizeMax + 1} {
		if _, err := Open(filepath.Join(t.TempDir(), "wal"), Options{AheadPieceSizeBytes: size}); err == nil {
			t.Fatalf("AheadPieceSizeBytes %d accepted", size)
		}
	}
}
