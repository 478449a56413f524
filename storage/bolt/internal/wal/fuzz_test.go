package wal

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/ledgerworks/ledger/storage"
)

// encodeSegment returns the bytes of a segment holding payloads from
// firstLSN, padded with zeros to sizeBytes (no padding when smaller).
func encodeSegment(firstLSN uint64, payloads [][]byte, sizeBytes int) []byte {
	var segment []byte
	for i, payload := range payloads {
		var header [RecordHeaderSizeBytes]byte
		encodeHeader(header[:], firstLSN+uint64(i), payload)
		segment = append(segment, header[:]...)
		segment = append(segment, payload...)
		for len(segment)%RecordAlignmentBytes != 0 {
			segment = append(segment, 0)
		}
	}
	for len(segment) < sizeBytes {
		segment = append(segment, 0)
	}
	return segment
}

// FuzzOpen opens a log of one or two segments of arbitrary bytes. Open may
// refuse them only with ErrCorrupt; every record it yields must be the
// bytes at its place in the file with a valid CRC; a writable Open must
// append after them and read everything back.
func FuzzOpen(f *testing.F) {
	valid := encodeSegment(1, [][]byte{[]byte("one"), {}, []byte("three, a longer payload")}, 256)
	f.Add(valid, []byte(nil), uint64(0))
	f.Add(valid[:40], []byte(nil), uint64(0))
	f.Add(valid, encodeSegment(4, [][]byte{[]byte("four")}, 64), uint64(4))
	f.Add(valid, encodeSegment(5, [][]byte{[]byte("gap")}, 64), uint64(5))
	f.Add(encodeSegment(1, [][]byte{[]byte("a"), []byte("b")}, 0), encodeSegment(3, [][]byte{[]byte("c")}, 0)[:10], uint64(3))
	f.Add(make([]byte, 64), []byte(nil), uint64(0))
	headed := encodeSegmentHeader(segmentHeader{id: testID, firstLSN: 1, sizeBytes: 256})
	f.Add(append(headed, encodeSegment(1, [][]byte{[]byte("one")}, 256-len(headed))...), []byte(nil), uint64(0))
	f.Fuzz(func(t *testing.T, first []byte, second []byte, secondLSN uint64) {
		dir := fuzzDirectory(t)
		files := map[uint64][]byte{1: first}
		if secondLSN > 1 && len(second) > 0 {
			files[secondLSN] = second
		}
		for lsn, data := range files {
			if err := os.WriteFile(segmentPath(dir, lsn), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		// The same files as a log with an identity: its headers and seals
		// are parsed too, and refused only with ErrCorrupt.
		if l, err := Open(dir, Options{SegmentSizeBytes: SegmentSizeMin, ReadOnly: true, ID: testID}); err == nil {
			for _, err := range l.Records(0) {
				if err != nil && !errors.Is(err, storage.ErrCorrupt) {
					t.Fatalf("Records of a log with an identity: %v, want nil or ErrCorrupt", err)
				}
			}
			l.Close()
		} else if !errors.Is(err, storage.ErrCorrupt) {
			t.Fatalf("Open with an identity: %v, want nil or ErrCorrupt", err)
		}
		l, err := Open(dir, Options{SegmentSizeBytes: SegmentSizeMin, ReadOnly: true})
		if err != nil {
			if !errors.Is(err, storage.ErrCorrupt) {
				t.Fatalf("Open: %v, want nil or ErrCorrupt", err)
			}
			return
		}
		count := checkFuzzRecords(t, l, files)
		if l.LastLSN() != 0 && uint64(count) != l.LastLSN()-l.FirstLSN()+1 {
			t.Fatalf("%d records from %d to %d", count, l.FirstLSN(), l.LastLSN())
		}
		l.Close()

		l, err = Open(dir, Options{SegmentSizeBytes: SegmentSizeMin})
		if err != nil {
			t.Fatalf("a writable Open of what a read-only one accepted: %v", err)
		}
		next := l.LastLSN() + 1
		if err := l.Append(next, []byte("appended")); err != nil {
			t.Fatal(err)
		}
		l.Close()
		l, err = Open(dir, Options{SegmentSizeBytes: SegmentSizeMin, ReadOnly: true})
		if err != nil {
			t.Fatalf("reopen after an append: %v", err)
		}
		defer l.Close()
		var appended []byte
		records := 0
		for record, err := range l.Records(0) {
			if err != nil {
				t.Fatal(err)
			}
			records++
			appended = record.Payload
		}
		if l.LastLSN() != next || records != count+1 || !bytes.Equal(appended, []byte("appended")) {
			t.Fatalf("after the append: LastLSN %d (want %d), %d records (want %d)", l.LastLSN(), next, records, count+1)
		}
	})
}

// checkFuzzRecords checks each yielded record against the bytes at its
// offset in its file and returns how many there were.
func checkFuzzRecords(t *testing.T, l *Log, files map[uint64][]byte) int {
	t.Helper()
	count := 0
	var segmentStart uint64
	var offset int
	for record, err := range l.Records(0) {
		if err != nil {
			t.Fatalf("Records after a successful Open: %v", err)
		}
		if _, starts := files[record.LSN]; starts {
			segmentStart, offset = record.LSN, 0
		}
		data := files[segmentStart]
		var header [RecordHeaderSizeBytes]byte
		encodeHeader(header[:], record.LSN, record.Payload)
		end := offset + RecordHeaderSizeBytes + len(record.Payload)
		if end > len(data) || !bytes.Equal(data[offset:offset+RecordHeaderSizeBytes], header[:]) || !bytes.Equal(data[offset+RecordHeaderSizeBytes:end], record.Payload) {
			t.Fatalf("record LSN %d is not the bytes at offset %d of segment %d with a valid CRC", record.LSN, offset, segmentStart)
		}
		offset += int(recordSizeBytes(len(record.Payload)))
		count++
	}
	return count
}

// fuzzDirectory is a temporary directory in memory (/dev/shm) when there is
// one: the target checks parsing, not durability, and syncs on a disk would
// bound it to a few hundred executions a second.
func fuzzDirectory(t *testing.T) string {
	t.Helper()
	return memoryDirectory(t, t.TempDir)
}

// memoryDirectory makes a directory under /dev/shm removed at cleanup, or
// returns fallback() where there is no /dev/shm.
func memoryDirectory(t interface{ Cleanup(func()) }, fallback func() string) string {
	dir, err := os.MkdirTemp("/dev/shm", "wal-test-")
	if err != nil {
		return fallback()
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
