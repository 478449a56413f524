package wal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ledgerworks/ledger/storage"
)

// damageRecordsMax bounds the records of a FuzzLogDamage log: up to about
// five segments of SegmentSizeMin.
const damageRecordsMax = 80

// damageLogs caches the files of the log of n records, so that one
// execution writes a few small files instead of appending n records.
var damageLogs sync.Map // n -> map[string][]byte

func damageLogFiles(t *testing.T, n uint64) map[string][]byte {
	if files, ok := damageLogs.Load(n); ok {
		return files.(map[string][]byte)
	}
	dir := filepath.Join(memoryDirectory(t, t.TempDir), "wal")
	identityLog(t, dir, n)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, entry := range entries {
		if data, err := os.ReadFile(filepath.Join(dir, entry.Name())); err == nil {
			files[entry.Name()] = data
		}
	}
	damageLogs.Store(n, files)
	return files
}

// FuzzLogDamage damages a log with an identity whose records 1..n were all
// acknowledged (each Append synced): a byte flipped, the file cut, a range
// zeroed, a segment deleted, or two segments' names swapped. The open must
// then return every acknowledged record or fail with ErrCorrupt (a log
// whose first segment is gone counts as failed: its caller finds the gap
// against the LSN its file is checkpointed through). The one exception is
// damage confined to the bytes of the newest records, from the first one
// lost to the end of the newest segment, with nothing intact after it: no
// reader can tell it from a torn final write (a group sync writes several
// records at once), and the log then ends before the first damaged record.
// A single flipped byte can therefore lose only the newest record.
func FuzzLogDamage(f *testing.F) {
	for op := range uint8(5) {
		f.Add(op, uint16(100), uint16(8), uint8(0), uint8(60))
		f.Add(op, uint16(4000), uint16(300), uint8(3), uint8(79))
	}
	f.Add(uint8(0), uint16(60), uint16(0), uint8(0), uint8(0))
	f.Fuzz(func(t *testing.T, op uint8, where uint16, length uint16, pick uint8, records uint8) {
		n := 1 + uint64(records)%damageRecordsMax
		dir := filepath.Join(memoryDirectory(t, t.TempDir), "wal")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		for name, data := range damageLogFiles(t, n) {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		files := segmentFiles(t, dir)
		newest := files[len(files)-1]
		target := files[int(pick)%len(files)]
		info, err := os.Stat(target)
		if err != nil {
			t.Fatal(err)
		}
		size := info.Size()
		original := damageLogFiles(t, n)[filepath.Base(newest)]
		switch op % 5 {
		case 0: // flip one byte
			offset := int64(where) % size
			flipByte(t, target, offset)
		case 1: // cut the file short
			if err := os.Truncate(target, int64(where)%size); err != nil {
				t.Fatal(err)
			}
		case 2: // zero a range
			offset := int64(where) % size
			end := min(size, offset+1+int64(length)%512)
			writeBytes(t, target, offset, make([]byte, end-offset))
		case 3: // delete the segment
			if err := os.Remove(target); err != nil {
				t.Fatal(err)
			}
		case 4: // reorder: swap two segments' names, or move the only one
			other := files[(int(pick)+1)%len(files)]
			if other == target {
				other = segmentPath(dir, mustFirstLSN(t, target)+1+uint64(length)%100)
				if err := os.Rename(target, other); err != nil {
					t.Fatal(err)
				}
				break
			}
			swap := target + ".swap"
			for _, move := range [][2]string{{target, swap}, {other, target}, {swap, other}} {
				if err := os.Rename(move[0], move[1]); err != nil {
					t.Fatal(err)
				}
			}
		}
		// unchangedBefore reports whether the damage changed nothing but
		// the newest segment from the record lsn on.
		unchangedBefore := func(lsn uint64) bool {
			first := mustFirstLSN(t, newest)
			if lsn < first || (op%5 != 0 && op%5 != 2) {
				return false
			}
			offset := int64(SegmentHeaderSizeBytes)
			for j := first; j < lsn; j++ {
				offset += recordSizeBytes(len(damagePayload(j)))
			}
			damaged, err := os.ReadFile(newest)
			return err == nil && len(damaged) == len(original) && bytes.Equal(damaged[:offset], original[:offset])
		}
		l, err := Open(dir, Options{SegmentSizeBytes: SegmentSizeMin, ID: testID, ReadOnly: true})
		if err != nil {
			if !errors.Is(err, storage.ErrCorrupt) {
				t.Fatalf("Open: %v, want nil or ErrCorrupt", err)
			}
			return
		}
		defer l.Close()
		if l.LastLSN() > 0 && l.FirstLSN() > 1 {
			return // the caller's checkpoint (0) does not reach the log: ErrCorrupt there
		}
		want := uint64(1)
		for record, err := range l.Records(0) {
			if err != nil {
				if !errors.Is(err, storage.ErrCorrupt) {
					t.Fatalf("Records: %v, want ErrCorrupt", err)
				}
				return
			}
			if record.LSN != want || !bytes.Equal(record.Payload, damagePayload(want)) {
				t.Fatalf("record LSN %d (want %d) or its payload is not what was acknowledged", record.LSN, want)
			}
			want++
		}
		got := want - 1
		if got != n && !unchangedBefore(got+1) {
			t.Fatalf("op %d: the open returned records 1..%d of %d acknowledged without an error, and the damage reached before record %d",
				op%5, got, n, got+1)
		}
	})
}
