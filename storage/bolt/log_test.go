package bolt_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt"
	"github.com/ledgerworks/ledger/storage/storagetest"
)

// logConfigurations are the ways the backend commits: straight to the file;
// through the log with a memory table so small that nearly every commit is
// checkpointed (reads constantly cross the boundary between the file and
// memory); and with one so large that nothing reaches the file before Close.
var logConfigurations = []struct {
	name string
	opts bolt.Options
}{
	{"LogOff", bolt.Options{Log: bolt.LogOff, InitialMmapSize: 64 << 20}},
	{"TinyMemtable", bolt.Options{Log: bolt.LogOn, InitialMmapSize: 64 << 20, MemtableBytesMax: 1, LogSegmentSizeBytes: 64 << 10}},
	{"HugeMemtable", bolt.Options{Log: bolt.LogOn, InitialMmapSize: 64 << 20, MemtableBytesMax: 1 << 40, LogSegmentSizeBytes: 64 << 10}},
}

// opener returns a storagetest opener for opts that, like
// storagetest.OpenBolt, closes the file at cleanup and runs bbolt's check
// on it, and also checks that Close left no log behind.
func opener(opts bolt.Options) func(t testing.TB) storage.Backend {
	return func(t testing.TB) storage.Backend {
		t.Helper()
		path := filepath.Join(t.TempDir(), "ledger.db")
		b, err := bolt.Open(path, opts)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		t.Cleanup(func() { closeAndCheck(t, b, path) })
		return b
	}
}

func closeAndCheck(t testing.TB, b *bolt.Backend, path string) {
	t.Helper()
	if err := b.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if _, err := os.Stat(bolt.LogDirectory(path)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("log directory after Close: %v, want none", err)
	}
	checked, err := bolt.Open(path, bolt.Options{ReadOnly: true})
	if err != nil {
		t.Errorf("reopen for the check: %v", err)
		return
	}
	defer checked.Close()
	if err := checked.Check(); err != nil {
		t.Errorf("consistency check: %v", err)
	}
}

func TestConformanceConfigurations(t *testing.T) {
	for _, c := range logConfigurations {
		t.Run(c.name, func(t *testing.T) {
			storagetest.Run(t, opener(c.opts))
			storagetest.RunFork(t, opener(c.opts))
		})
	}
}

var ctx = context.Background()

func testHead(seq uint64) storage.Head {
	h := storage.Head{Seq: seq, TimeUnixNano: int64(seq)}
	h.Hash[0], h.Hash[1] = byte(seq), byte(seq>>8)
	return h
}

func testRecord(chain string, seq uint64) storage.Record {
	return storage.Record{Seq: seq, IdempotencyKey: fmt.Sprintf("%s-key-%d", chain, seq), Data: fmt.Appendf(nil, "%s-entry-%d", chain, seq)}
}

// commitN appends entries from..to to chain and puts state key chain ->
// the last seq, in one transaction.
func commitN(t testing.TB, b storage.Backend, chain string, from, to uint64) {
	t.Helper()
	tx, err := b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	for seq := from; seq <= to; seq++ {
		if err := tx.Append(ctx, chain, testRecord(chain, seq), testHead(seq)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.StatePut(ctx, []byte("s/"+chain), fmt.Appendf(nil, "%d", to)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// snapshot is everything a transaction reads of the ledger.
type snapshot struct {
	heads   map[string]uint64
	entries map[string][]string
	keys    map[string]map[[storage.KeyDigestSize]byte]uint64
	state   []string
}

// fataler is what the read helpers need of a *testing.T or a *rapid.T.
type fataler interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

func readSnapshot(t fataler, tx storage.Tx) snapshot {
	t.Helper()
	s := snapshot{heads: map[string]uint64{}, entries: map[string][]string{}, keys: map[string]map[[storage.KeyDigestSize]byte]uint64{}}
	for ch, err := range tx.Chains(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		s.heads[ch.Chain] = ch.Head.Seq
		head, err := tx.Head(ctx, ch.Chain)
		if err != nil || head != ch.Head {
			t.Fatalf("head of %q: %+v, %v; Chains said %+v", ch.Chain, head, err, ch.Head)
		}
		for rec, err := range tx.Entries(ctx, ch.Chain, 1) {
			if err != nil {
				t.Fatal(err)
			}
			if want := uint64(len(s.entries[ch.Chain]) + 1); rec.Seq != want {
				t.Fatalf("chain %q: entry %d where %d was expected", ch.Chain, rec.Seq, want)
			}
			s.entries[ch.Chain] = append(s.entries[ch.Chain], string(rec.Data))
			data, err := tx.Entry(ctx, ch.Chain, rec.Seq)
			if err != nil || !bytes.Equal(data, rec.Data) {
				t.Fatalf("entry %d of %q: %q, %v; Entries said %q", rec.Seq, ch.Chain, data, err, rec.Data)
			}
		}
		s.keys[ch.Chain] = map[[storage.KeyDigestSize]byte]uint64{}
		for ref, err := range tx.ScanKeys(ctx, ch.Chain) {
			if err != nil {
				t.Fatal(err)
			}
			if _, dup := s.keys[ch.Chain][ref.Digest]; dup {
				t.Fatalf("chain %q: key digest %x scanned twice", ch.Chain, ref.Digest)
			}
			s.keys[ch.Chain][ref.Digest] = ref.Seq
		}
	}
	for kv, err := range tx.StateScan(ctx, nil, nil, false) {
		if err != nil {
			t.Fatal(err)
		}
		s.state = append(s.state, string(kv.Key)+"="+string(kv.Value))
	}
	return s
}

func (s snapshot) equal(o snapshot) bool { return fmt.Sprint(s) == fmt.Sprint(o) }

// TestViewAcrossCheckpoints holds a read transaction while later commits
// are checkpointed into the file, table after table, and reads its
// snapshot exactly, before and after; a fork of it reads the same.
func TestViewAcrossCheckpoints(t *testing.T) {
	for _, c := range logConfigurations {
		t.Run(c.name, func(t *testing.T) {
			b := opener(c.opts)(t)
			for i := range uint64(5) {
				commitN(t, b, "a", 10*i+1, 10*i+10)
				commitN(t, b, fmt.Sprintf("c%d", i), 1, 3)
			}
			view, err := b.Begin(ctx, false)
			if err != nil {
				t.Fatal(err)
			}
			defer view.Rollback()
			before := readSnapshot(t, view)
			for i := range uint64(20) {
				commitN(t, b, "a", 50+10*i+1, 50+10*i+10)
				commitN(t, b, "b", i+1, i+1)
				tx, err := b.Begin(ctx, true)
				if err != nil {
					t.Fatal(err)
				}
				if err := tx.StateDelete(ctx, []byte("s/c0")); err != nil {
					t.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
			}
			after := readSnapshot(t, view)
			if !before.equal(after) {
				t.Fatalf("the view changed across checkpoints:\nbefore %v\nafter  %v", before, after)
			}
			if before.heads["a"] != 50 || len(before.keys["a"]) != 50 || len(before.state) != 6 {
				t.Fatalf("snapshot %v: want chain a at 50 with 50 keys and 6 state keys", before)
			}
			fork, err := view.(storage.Forker).Fork(ctx)
			switch {
			case errors.Is(err, storage.ErrRetry):
				// a checkpoint past the view committed: allowed by the contract
			case err != nil:
				t.Fatal(err)
			default:
				if got := readSnapshot(t, fork); !got.equal(before) {
					t.Fatalf("the fork reads %v, want %v", got, before)
				}
				fork.Rollback()
			}
			now, err := b.Begin(ctx, false)
			if err != nil {
				t.Fatal(err)
			}
			defer now.Rollback()
			latest := readSnapshot(t, now)
			if latest.heads["a"] != 250 || latest.heads["b"] != 20 || len(latest.keys["a"]) != 250 || len(latest.state) != 6 {
				t.Fatalf("latest snapshot %v", latest)
			}
		})
	}
}

// TestCrashRecovery abandons a handle as a crash would (no checkpoint, no
// log removal) and reopens it: every committed transaction is there, read
// through the log by a read-only open and checkpointed by a writable one.
func TestCrashRecovery(t *testing.T) {
	for _, c := range logConfigurations[1:] {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ledger.db")
			b, err := bolt.Open(path, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			for i := range uint64(30) {
				commitN(t, b, "a", 3*i+1, 3*i+3)
			}
			tx, err := b.Begin(ctx, true)
			if err != nil {
				t.Fatal(err)
			}
			if err := tx.Append(ctx, "a", testRecord("a", 91), testHead(91)); err != nil {
				t.Fatal(err)
			}
			tx.Rollback() // never committed: must not come back
			view, err := b.Begin(ctx, false)
			if err != nil {
				t.Fatal(err)
			}
			want := readSnapshot(t, view)
			view.Rollback()
			bolt.Abandon(b)
			if _, err := os.Stat(bolt.LogDirectory(path)); err != nil {
				t.Fatalf("log directory after a crash: %v", err)
			}

			ro, err := bolt.Open(path, bolt.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			view, err = ro.Begin(ctx, false)
			if err != nil {
				t.Fatal(err)
			}
			if got := readSnapshot(t, view); !got.equal(want) {
				t.Fatalf("read-only open after a crash reads %v, want %v", got, want)
			}
			view.Rollback()
			if _, err := ro.Begin(ctx, true); !errors.Is(err, storage.ErrReadOnly) {
				t.Fatalf("writable begin on a read-only handle: %v", err)
			}
			ro.Close()

			b, err = bolt.Open(path, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			view, err = b.Begin(ctx, false)
			if err != nil {
				t.Fatal(err)
			}
			if got := readSnapshot(t, view); !got.equal(want) {
				t.Fatalf("writable open after a crash reads %v, want %v", got, want)
			}
			view.Rollback()
			commitN(t, b, "a", 91, 92)
			closeAndCheck(t, b, path)
			raw, err := bolt.Open(path, bolt.Options{ReadOnly: true, Log: bolt.LogOff})
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			view, err = raw.Begin(ctx, false)
			if err != nil {
				t.Fatal(err)
			}
			defer view.Rollback()
			if h, err := view.Head(ctx, "a"); err != nil || h.Seq != 92 {
				t.Fatalf("head after recovery, a commit and Close: %+v, %v", h, err)
			}
		})
	}
}

// TestLogOffReplaysACrashedLog: a handle opened without the log still
// recovers the log a crash left, then removes it.
func TestLogOffReplaysACrashedLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	b, err := bolt.Open(path, bolt.Options{Log: bolt.LogOn})
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, b, "a", 1, 5)
	bolt.Abandon(b)
	b, err = bolt.Open(path, bolt.Options{Log: bolt.LogOff})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bolt.LogDirectory(path)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("log directory after a recovering open without the log: %v", err)
	}
	commitN(t, b, "a", 6, 6)
	view, err := b.Begin(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := readSnapshot(t, view); got.heads["a"] != 6 || len(got.keys["a"]) != 6 || len(got.state) != 1 {
		t.Fatalf("after recovery without the log: %v", got)
	}
	view.Rollback()
	closeAndCheck(t, b, path)
}

// TestWriterWaitHonoursContext: a writable Begin waiting for the writer
// slot returns when its context ends.
func TestWriterWaitHonoursContext(t *testing.T) {
	b := opener(bolt.Options{Log: bolt.LogOn})(t)
	first, err := b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.Begin(canceled, true); !errors.Is(err, context.Canceled) {
		t.Fatalf("begin with a canceled context: %v", err)
	}
	first.Rollback()
	second, err := b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	second.Rollback()
}

// TestCheckpointFailure: when a checkpoint cannot write the file, every
// later commit is refused with storage.ErrIO and writes nothing, reads
// still see every acknowledged commit, Close keeps the log, and the next
// Open recovers everything from it.
func TestCheckpointFailure(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	b, err := bolt.Open(path, bolt.Options{Log: bolt.LogOn, MemtableBytesMax: 1, LogSegmentSizeBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, b, "a", 1, 3)
	bolt.FailCheckpoints(b, fmt.Errorf("injected: %w", os.ErrPermission))
	// This transaction's Begin freezes the first table, whose checkpoint
	// fails on another goroutine: before or after this Commit.
	tx, err := b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(4); seq <= 6; seq++ {
		if err := tx.Append(ctx, "a", testRecord("a", seq), testHead(seq)); err != nil {
			t.Fatal(err)
		}
	}
	acknowledged := uint64(6)
	if err := tx.Commit(); err != nil {
		if !errors.Is(err, storage.ErrIO) {
			t.Fatalf("commit while the checkpoint fails: %v, want storage.ErrIO", err)
		}
		acknowledged = 3
	}
	if err := bolt.Checkpoint(b); !errors.Is(err, storage.ErrIO) {
		t.Fatalf("checkpoint after the failure: %v, want storage.ErrIO", err)
	}
	if _, err := b.Begin(ctx, true); !errors.Is(err, storage.ErrIO) {
		t.Fatalf("writable begin after a failed checkpoint: %v, want storage.ErrIO", err)
	}
	view, err := b.Begin(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	want := readSnapshot(t, view)
	view.Rollback()
	if want.heads["a"] != acknowledged || len(want.keys["a"]) != int(acknowledged) {
		t.Fatalf("reads after a failed checkpoint: %v", want)
	}
	if err := b.Close(); !errors.Is(err, storage.ErrIO) || !strings.Contains(err.Error(), "is kept") {
		t.Fatalf("close after a failed checkpoint: %v, want storage.ErrIO saying the log is kept", err)
	}
	if _, err := os.Stat(bolt.LogDirectory(path)); err != nil {
		t.Fatalf("the log after a failed checkpoint and Close: %v", err)
	}
	b, err = bolt.Open(path, bolt.Options{Log: bolt.LogOn})
	if err != nil {
		t.Fatal(err)
	}
	view, err = b.Begin(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := readSnapshot(t, view); !got.equal(want) {
		t.Fatalf("after reopening: %v, want %v", got, want)
	}
	view.Rollback()
	commitN(t, b, "a", acknowledged+1, acknowledged+1)
	closeAndCheck(t, b, path)
}

// TestStateScanAcrossChunks scans more state keys than a memory table
// hands out at once, spread over the file, two commits of the memory table
// (the second overwriting and deleting some of the first's) and the
// transaction's own writes, with deletes in every layer, in both
// directions and with bounds, against a map of what should be there.
func TestStateScanAcrossChunks(t *testing.T) {
	b := opener(bolt.Options{Log: bolt.LogOn, MemtableBytesMax: 1 << 40, LogSegmentSizeBytes: 1 << 20})(t)
	want := map[string]string{}
	write := func(tx storage.Tx, from, to, step int, round string, remove bool) {
		t.Helper()
		for i := from; i < to; i += step {
			k := fmt.Sprintf("k%05d", i)
			if remove {
				if err := tx.StateDelete(ctx, []byte(k)); err != nil {
					t.Fatal(err)
				}
				delete(want, k)
				continue
			}
			v := round + k
			if err := tx.StatePut(ctx, []byte(k), []byte(v)); err != nil {
				t.Fatal(err)
			}
			want[k] = v
		}
	}
	commit := func(fn func(tx storage.Tx)) {
		t.Helper()
		tx, err := b.Begin(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		fn(tx)
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	commit(func(tx storage.Tx) { write(tx, 0, 3000, 1, "file-", false) })
	if err := bolt.Checkpoint(b.(*bolt.Backend)); err != nil { // into the file
		t.Fatal(err)
	}
	commit(func(tx storage.Tx) { write(tx, 0, 3000, 7, "", true); write(tx, 3000, 3600, 1, "table-", false) })
	commit(func(tx storage.Tx) { write(tx, 1, 3600, 5, "", true); write(tx, 100, 900, 3, "newer-", false) })
	tx, err := b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	write(tx, 2, 3600, 11, "", true)
	write(tx, 500, 700, 2, "own-", false)
	for _, bounds := range [][2]string{{"", ""}, {"k00250", "k03100"}, {"k00999", ""}, {"", "k00001"}} {
		for _, reverse := range []bool{false, true} {
			var expected []string
			for k, v := range want {
				if k >= bounds[0] && (bounds[1] == "" || k < bounds[1]) {
					expected = append(expected, k+"="+v)
				}
			}
			slices.Sort(expected)
			if reverse {
				slices.Reverse(expected)
			}
			var end []byte
			if bounds[1] != "" {
				end = []byte(bounds[1])
			}
			var got []string
			for kv, err := range tx.StateScan(ctx, []byte(bounds[0]), end, reverse) {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, string(kv.Key)+"="+string(kv.Value))
			}
			if !slices.Equal(got, expected) {
				t.Fatalf("scan %v reverse %v: %d pairs, want %d (first difference near %v)", bounds, reverse, len(got), len(expected), firstDifference(got, expected))
			}
		}
	}
}

func firstDifference(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("%d: %q vs %q", i, a[i], b[i])
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(a), len(b))
}
