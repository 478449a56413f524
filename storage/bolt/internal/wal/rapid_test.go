package wal

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"pgregory.net/rapid"
)

// TestLogStateMachine runs random appends (some larger than a segment),
// rotations, releases, reopens and torn tails against a model: the list of
// records the log must hold, and the LSN through which it may have dropped
// them.
func TestLogStateMachine(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		// In memory where possible: this test checks what the log holds
		// after each step, the crash test checks durability on disk.
		dir := filepath.Join(memoryDirectory(t, func() string { return testingTempDir(t) }), "wal")
		opts := Options{SegmentSizeBytes: SegmentSizeMin}
		l, err := Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { l.Close() }()
		var model []copiedRecord // what the log holds at least, from the oldest unreleased record
		var released uint64
		firstLSN := rapid.Uint64Range(1, 1<<40).Draw(t, "firstLSN")
		next := firstLSN
		reopen := func() {
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if l, err = Open(dir, opts); err != nil {
				t.Fatal(err)
			}
		}
		t.Repeat(map[string]func(*rapid.T){
			"append": func(t *rapid.T) {
				size := rapid.OneOf(rapid.IntRange(0, 300), rapid.IntRange(SegmentSizeMin-64, 3*SegmentSizeMin)).Draw(t, "size")
				payload := payloadFor(next, size)
				if err := l.Append(next, payload); err != nil {
					t.Fatal(err)
				}
				model = append(model, copiedRecord{next, payload})
				next++
			},
			"rotate": func(t *rapid.T) {
				if err := l.Rotate(); err != nil {
					t.Fatal(err)
				}
			},
			"release": func(t *rapid.T) {
				if len(model) == 0 {
					t.Skip("nothing to release")
				}
				through := rapid.Uint64Range(model[0].lsn-1, next-1).Draw(t, "through")
				if err := l.Release(through); err != nil {
					t.Fatal(err)
				}
				released = max(released, through)
			},
			"reopen": func(t *rapid.T) {
				reopen()
			},
			"tear the last record and reopen": func(t *rapid.T) {
				if len(model) == 0 || model[len(model)-1].lsn <= released {
					// A record released is durable elsewhere: it was
					// acknowledged, so it cannot be torn.
					t.Skip("no unreleased record")
				}
				segments := segmentsOf(l)
				if len(segments) == 0 {
					t.Skip("no segment")
				}
				last := segments[len(segments)-1]
				if last.firstLSN > model[len(model)-1].lsn {
					t.Skip("the last segment is empty")
				}
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				offsets := recordOffsets(t, last.path, last.firstLSN)
				flipByte(t, last.path, offsets[len(offsets)-1]+RecordHeaderSizeBytes/2)
				model = model[:len(model)-1]
				next--
				if l, err = Open(dir, opts); err != nil {
					t.Fatal(err)
				}
				if l.LastLSN() == 0 {
					// The torn record was alone in its segment and everything
					// before it was released: the log is empty.
					if len(model) > 0 && model[len(model)-1].lsn > released {
						t.Fatalf("the log is empty, but LSN %d was not released", model[len(model)-1].lsn)
					}
					model = nil
				}
			},
		})
		// The end: everything the model holds past the released LSN is there.
		checkModel(t, l, model, released, next)
		reopen()
		checkModel(t, l, model, released, next)
	})
}

func checkModel(t *rapid.T, l *Log, model []copiedRecord, released uint64, next uint64) {
	if len(model) == 0 {
		return
	}
	if l.LastLSN() != next-1 {
		t.Fatalf("LastLSN %d, want %d", l.LastLSN(), next-1)
	}
	first := l.FirstLSN()
	if first < model[0].lsn || first > max(released+1, model[0].lsn) {
		t.Fatalf("FirstLSN %d: model holds from %d, released through %d", first, model[0].lsn, released)
	}
	after := max(released, model[0].lsn-1)
	i := int(after + 1 - model[0].lsn)
	for record, err := range l.Records(after) {
		if err != nil {
			t.Fatal(err)
		}
		if i >= len(model) || record.LSN != model[i].lsn || !bytes.Equal(record.Payload, model[i].payload) {
			t.Fatalf("record LSN %d differs from the model at %d", record.LSN, i)
		}
		i++
	}
	if i != len(model) {
		t.Fatalf("Records ended after %d of %d model records", i, len(model))
	}
}

// testingTempDir is a temporary directory removed when the test of t ends;
// rapid.T has no TempDir of its own.
func testingTempDir(t *rapid.T) string {
	dir, err := os.MkdirTemp("", "wal-rapid-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
