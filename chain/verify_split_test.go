package chain_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"

	bbolt "go.etcd.io/bbolt"
	"pgregory.net/rapid"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// splitWays are the CPU counts and chunk sizes verifyEachWay reads chains
// with.
var splitWays = []struct {
	procs int
	chunk uint64
}{{2, 1}, {3, 3}, {4, 10}}

// verifyEachWay verifies with every chain read whole, then with every chain
// read in chunks in each of splitWays (where the store can fork its
// transaction), and fails the test unless every report and error equals
// the whole reading's. It returns that one.
func verifyEachWay(t fatalf, db *chain.DB, ctx context.Context, opts chain.VerifyOptions) (chain.Report, error) {
	t.Helper()
	restore := chain.SetVerifyChunkEntries(math.MaxUint64)
	whole, wholeErr := db.Verify(ctx, opts)
	restore()
	for _, way := range splitWays {
		restore := chain.SetVerifyChunkEntries(way.chunk)
		previous := runtime.GOMAXPROCS(way.procs)
		split, err := db.Verify(ctx, opts)
		runtime.GOMAXPROCS(previous)
		restore()
		if fmt.Sprint(err) != fmt.Sprint(wholeErr) {
			t.Fatalf("verify in chunks of %d on %d CPUs: error %v, read whole %v", way.chunk, way.procs, err, wholeErr)
		}
		if !reflect.DeepEqual(split, whole) {
			t.Fatalf("verify in chunks of %d on %d CPUs:\n%+v\nread whole:\n%+v", way.chunk, way.procs, split, whole)
		}
	}
	return whole, wholeErr
}

// fatalf is what verifyEachWay needs of a *testing.T or a *rapid.T.
type fatalf interface {
	Helper()
	Fatalf(format string, args ...any)
}

// splitLedger is a closed ledger with chain "long" of splitEntries keyed
// entries (key op-<seq>) and chain "short" of 3.
const splitEntries = 40

func newSplitLedger(t *testing.T) tamperLedger {
	t.Helper()
	db, path := openFile(t, chain.Options{})
	l := tamperLedger{path: path, entries: map[string][]chain.Entry{}}
	err := db.Update(context.Background(), func(tx *chain.Tx) error {
		clear(l.entries)
		for _, c := range []struct {
			name string
			n    int
		}{{"long", splitEntries}, {"short", 3}} {
			for seq := 1; seq <= c.n; seq++ {
				res, err := tx.Append(chain.Request{Chain: c.name, IdempotencyKey: fmt.Sprintf("op-%d", seq), Type: "t/v1",
					Payload: fmt.Appendf(nil, "%s %d", c.name, seq)})
				if err != nil {
					return err
				}
				l.entries[c.name] = append(l.entries[c.name], res.Entry)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return l
}

// The chunks: the long chain of the tests below is read in chunks that
// begin at seqs 1, 11, 21 and 31 when a chunk has 10 entries, 1, 4, 7...
// with 3, and at every seq with 1 (verifyEachWay reads each way).
func TestVerifyChunking(t *testing.T) {
	for _, c := range []struct {
		head, chunk, size, count uint64
	}{
		{splitEntries, 10, 10, 4},
		{splitEntries, 3, 3, 14},
		{splitEntries, 1, 1, splitEntries},
		{splitEntries, 100, 100, 1},
		{0, 10, 10, 0},
		{1 << 20, 1 << 16, 1 << 16, 16},
		{1<<20 + 1, 1 << 16, 1 << 16, 17},
		// A damaged head claiming a huge seq: the chunks grow instead.
		{math.MaxUint64, 1 << 16, math.MaxUint64>>16 + 1, 1 << 16},
		{1 << 40, 1, 1<<24 + 1, 1 << 16},
	} {
		restore := chain.SetVerifyChunkEntries(c.chunk)
		size, count := chain.VerifyChunking(c.head)
		restore()
		if size != c.size || count != c.count {
			t.Errorf("chunks of %d entries at most %d: %d of %d, want %d of %d", c.head, c.chunk, count, size, c.count, c.size)
		}
	}
}

// Damage on and around the chunks' boundaries is reported as when the chain
// is read whole (verifyEachWay compares), and as expected.
func TestVerifySplitDamageOnPartBoundaries(t *testing.T) {
	type want = []failureKey
	for _, c := range []struct {
		name   string
		edit   func(l tamperLedger, r rawLedger)
		opts   func(l tamperLedger) chain.VerifyOptions
		expect want
	}{
		{"FirstEntryOfAPartDeleted", func(l tamperLedger, r rawLedger) { r.delete("long", 11) }, nil,
			want{{"long", 11, chain.ReasonSeqGap}}},
		{"LastAndFirstEntriesAcrossABoundaryDeleted", func(l tamperLedger, r rawLedger) {
			r.delete("long", 20)
			r.delete("long", 21)
		}, nil, want{{"long", 20, chain.ReasonSeqGap}}},
		{"WholePartDeleted", func(l tamperLedger, r rawLedger) {
			for seq := uint64(11); seq <= 20; seq++ {
				r.delete("long", seq)
			}
		}, nil, want{{"long", 11, chain.ReasonSeqGap}}},
		{"LinkBrokenAcrossABoundary", func(l tamperLedger, r rawLedger) {
			e := l.entries["long"][20] // seq 21
			e.PrevHash = chain.Genesis("forged")
			r.rewrite(e)
		}, nil, want{{"long", 21, chain.ReasonBrokenLink}, {"long", 22, chain.ReasonBrokenLink}}},
		{"LastEntryOfAPartRewritten", func(l tamperLedger, r rawLedger) {
			e := l.entries["long"][9] // seq 10
			e.Payload = []byte("forged")
			r.rewrite(e)
		}, nil, want{{"long", 11, chain.ReasonBrokenLink}}},
		{"FirstEntryOfAPartFlipped", func(l tamperLedger, r rawLedger) {
			rec := r.get("long", 21)
			rec[len(rec)-1] ^= 1
			r.put("long", 21, rec)
		}, nil, want{{"long", 21, chain.ReasonHashMismatch}}},
		{"FirstEntryOfAPartUndecodable", func(l tamperLedger, r rawLedger) { r.put("long", 31, []byte{9}) }, nil,
			want{{"long", 31, chain.ReasonUndecodable}}},
		{"KeyIndexRecordOfTheSecondPartWrong", func(l tamperLedger, r rawLedger) {
			if err := bolt.SetKeySeq(r.btx, "long", "op-25", 24); err != nil {
				r.t.Fatal(err)
			}
		}, nil, want{{"long", 25, chain.ReasonKeyIndexMismatch}}},
		{"KeyIndexRecordOfAPartsFirstEntryMissing", func(l tamperLedger, r rawLedger) {
			if err := bolt.DeleteKeyRecord(r.btx, "long", "op-21"); err != nil {
				r.t.Fatal(err)
			}
		}, nil, want{{"long", 21, chain.ReasonKeyIndexMismatch}}},
		{"SwapAcrossParts", func(l tamperLedger, r rawLedger) {
			a, b := r.get("long", 5), r.get("long", 35)
			r.put("long", 5, b)
			r.put("long", 35, a)
		}, nil, want{
			{"long", 5, chain.ReasonHashMismatch}, {"long", 5, chain.ReasonBrokenLink}, {"long", 5, chain.ReasonKeyIndexMismatch},
			{"long", 6, chain.ReasonBrokenLink},
			{"long", 35, chain.ReasonHashMismatch}, {"long", 35, chain.ReasonBrokenLink}, {"long", 35, chain.ReasonKeyIndexMismatch},
			{"long", 36, chain.ReasonBrokenLink}}},
		{"SwapOnABoundary", func(l tamperLedger, r rawLedger) {
			a, b := r.get("long", 20), r.get("long", 21)
			r.put("long", 20, b)
			r.put("long", 21, a)
		}, nil, want{
			{"long", 20, chain.ReasonHashMismatch}, {"long", 20, chain.ReasonBrokenLink}, {"long", 20, chain.ReasonKeyIndexMismatch},
			{"long", 21, chain.ReasonHashMismatch}, {"long", 21, chain.ReasonBrokenLink}, {"long", 21, chain.ReasonKeyIndexMismatch},
			{"long", 22, chain.ReasonBrokenLink}}},
		{"SavedHeadAtABrokenFirstEntry", func(l tamperLedger, r rawLedger) {
			e := l.entries["long"][20] // seq 21
			e.PrevHash = chain.Genesis("forged")
			r.rewrite(e)
		}, func(l tamperLedger) chain.VerifyOptions {
			return chain.VerifyOptions{ExpectHeads: []chain.Head{l.entries["long"][20].Head(), l.entries["long"][10].Head()}}
		}, want{{"long", 21, chain.ReasonBrokenLink}, {"long", 21, chain.ReasonHeadMismatch}, {"long", 22, chain.ReasonBrokenLink}}},
		{"TailCutWithTheHead", func(l tamperLedger, r rawLedger) {
			for seq := uint64(31); seq <= splitEntries; seq++ {
				r.delete("long", seq)
			}
			r.setHead(l.entries["long"][29])
		}, nil, want{
			{"long", 31, chain.ReasonKeyIndexMismatch}, {"long", 32, chain.ReasonKeyIndexMismatch}, {"long", 33, chain.ReasonKeyIndexMismatch},
			{"long", 34, chain.ReasonKeyIndexMismatch}, {"long", 35, chain.ReasonKeyIndexMismatch}, {"long", 36, chain.ReasonKeyIndexMismatch},
			{"long", 37, chain.ReasonKeyIndexMismatch}, {"long", 38, chain.ReasonKeyIndexMismatch}, {"long", 39, chain.ReasonKeyIndexMismatch},
			{"long", 40, chain.ReasonKeyIndexMismatch}}},
		{"EntriesPastTheStoredHead", func(l tamperLedger, r rawLedger) { r.setHead(l.entries["long"][4]) }, nil,
			want{{"long", 5, chain.ReasonHeadMismatch}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newSplitLedger(t)
			l.tamper(t, func(r rawLedger) { c.edit(l, r) })
			opts := chain.VerifyOptions{}
			if c.opts != nil {
				opts = c.opts(l)
			}
			report := l.verify(t, opts)
			assertFailures(t, report.Failures, c.expect...)
		})
	}
}

// FailuresMax bounds the failures of a chain read in chunks as of one read
// whole: the first ones, in seq order, and Truncated.
func TestVerifySplitFailuresMax(t *testing.T) {
	l := newSplitLedger(t)
	l.tamper(t, func(r rawLedger) {
		for seq := uint64(1); seq <= splitEntries; seq++ {
			rec := r.get("long", seq)
			rec[len(rec)-1] ^= 1
			r.put("long", seq, rec)
		}
	})
	for _, max := range []int{1, 5, 11, 25, splitEntries, splitEntries + 1} {
		report := l.verify(t, chain.VerifyOptions{FailuresMax: max})
		if got := min(max, splitEntries); len(report.Failures) != got || report.Truncated != (max < splitEntries) {
			t.Fatalf("FailuresMax %d: %d failures, truncated %v", max, len(report.Failures), report.Truncated)
		}
		for i, f := range report.Failures {
			if f.Seq != uint64(i+1) || f.Reason != chain.ReasonHashMismatch {
				t.Fatalf("FailuresMax %d: failure %d is %v", max, i, f)
			}
		}
	}
}

// A chain read in chunks reports progress exactly as one read whole: at
// every multiple of 16,384 entries, counted across chains, then at the end;
// and it stops when its context ends, with the context's error.
func TestVerifySplitProgressAndCancel(t *testing.T) {
	db, _ := openFile(t, chain.Options{})
	ctx := context.Background()
	const entries = 2*16384 + 500
	appendBigAndSmall(t, db, entries, 7)
	verify := func(chunk uint64) ([]chain.Progress, int64) {
		defer chain.SetVerifyChunkEntries(chunk)()
		splits := chain.VerifySplitChains()
		var progress []chain.Progress
		report, err := db.Verify(ctx, chain.VerifyOptions{Progress: func(p chain.Progress) { progress = append(progress, p) }})
		if err != nil || !report.OK() || report.Entries != entries {
			t.Fatalf("verify: %+v %v", report, err)
		}
		return progress, chain.VerifySplitChains() - splits
	}
	whole, wholeSplits := verify(math.MaxUint64)
	split, splits := verify(1000)
	if wholeSplits != 0 || splits != 2 {
		t.Fatalf("%d and %d chains verified in chunks, want 0 and 2", wholeSplits, splits)
	}
	want := []chain.Progress{{Chains: 0, Entries: 16384}, {Chains: 1, Entries: 2 * 16384}, {Chains: 2, Entries: entries}}
	if !reflect.DeepEqual(whole, want) || !reflect.DeepEqual(split, want) {
		t.Fatalf("progress read whole %v, in parts %v; want %v", whole, split, want)
	}

	defer chain.SetVerifyChunkEntries(1000)()
	canceled, cancel := context.WithCancel(ctx)
	defer cancel()
	calls := 0
	report, err := db.Verify(canceled, chain.VerifyOptions{Progress: func(chain.Progress) { calls++; cancel() }})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("verify canceled at the first progress report: %+v %v", report, err)
	}
	if calls != 1 {
		t.Fatalf("%d progress reports, want 1", calls)
	}
}

// Any damage to a chain's entries, index and head is reported the same
// whether the chain is read whole or in chunks on 2 to 4 CPUs.
func TestVerifySplitMatchesWholeProperty(t *testing.T) {
	dir := t.TempDir()
	type base struct {
		file    []byte
		entries []chain.Entry
	}
	bases := map[[2]int]base{} // by entries and key spacing, written once
	files := 0
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.SampledFrom([]int{2, 3, 5, 8, 13, 61}).Draw(rt, "entries")
		keyEvery := rapid.IntRange(1, 3).Draw(rt, "keyEvery")
		b, ok := bases[[2]int{n, keyEvery}]
		if !ok {
			b = newPropertyBase(rt, filepath.Join(dir, fmt.Sprintf("base-%d-%d.db", n, keyEvery)), n, keyEvery)
			bases[[2]int{n, keyEvery}] = b
		}
		entries := b.entries
		files++
		path := filepath.Join(dir, fmt.Sprintf("ledger-%d.db", files))
		if err := os.WriteFile(path, b.file, 0o600); err != nil {
			rt.Fatal(err)
		}
		defer os.Remove(path)
		seqOf := func(label string) uint64 { return uint64(rapid.IntRange(1, n).Draw(rt, label)) }
		edits := rapid.SliceOfN(rapid.IntRange(0, 7), 1, 6).Draw(rt, "edits")
		bdb, err := bbolt.Open(path, 0o600, &bbolt.Options{NoSync: true})
		if err != nil {
			rt.Fatal(err)
		}
		err = bdb.Update(func(btx *bbolt.Tx) error {
			r := rawLedger{t: t, btx: btx}
			id, err := bolt.ChainID(btx, "c")
			if err != nil {
				return err
			}
			get := func(seq uint64) []byte { return append([]byte(nil), bolt.RawEntry(btx, id, seq)...) }
			put := func(seq uint64, v []byte) error { return bolt.PutRawEntry(btx, id, seq, v) }
			for _, edit := range edits {
				seq := seqOf("seq")
				var err error
				switch v := get(seq); edit {
				case 0:
					err = bolt.DeleteRawEntry(btx, id, seq)
				case 1:
					if len(v) > 0 {
						v[len(v)-1] ^= 1
						err = put(seq, v)
					}
				case 2:
					e := entries[seq-1]
					e.PrevHash = chain.Genesis("forged")
					e.Hash = e.ComputeHash()
					err = put(seq, chain.EncodeRecord(&e))
				case 3:
					err = put(seq, v[:len(v)/2])
				case 4:
					other := seqOf("other")
					w := get(other)
					if len(v) > 0 && len(w) > 0 {
						if err = put(seq, w); err == nil {
							err = put(other, v)
						}
					}
				case 5:
					r.setHead(entries[seq-1])
				case 6:
					if key := entries[seq-1].IdempotencyKey; key != "" {
						err = bolt.SetKeySeq(btx, "c", key, seqOf("indexSeq"))
					}
				case 7:
					if key := entries[seq-1].IdempotencyKey; key != "" {
						err = bolt.DeleteKeyRecord(btx, "c", key)
					}
				}
				if err != nil && !errors.Is(err, storage.ErrNotFound) { // a key record removed already
					return err
				}
			}
			return nil
		})
		bdb.Close()
		if err != nil {
			rt.Fatal(err)
		}
		var heads []chain.Head
		for _, i := range rapid.SliceOfN(rapid.IntRange(0, n), 0, 3).Draw(rt, "savedHeads") {
			if i == 0 {
				heads = append(heads, chain.Head{Chain: "c", Seq: uint64(n + 5), Hash: entries[0].Hash})
			} else {
				heads = append(heads, entries[i-1].Head())
			}
		}
		db, err := chain.Open(path, chain.Options{})
		if err != nil {
			rt.Fatal(err)
		}
		defer db.Close()
		opts := chain.VerifyOptions{ExpectHeads: heads, FailuresMax: rapid.IntRange(0, 12).Draw(rt, "failuresMax")}
		verifyEachWay(rt, db, context.Background(), opts)
	})
}

// newPropertyBase writes a ledger of chain "c" with n entries, every
// keyEvery-th keyed, and returns its file and entries.
func newPropertyBase(t *rapid.T, path string, n, keyEvery int) (b struct {
	file    []byte
	entries []chain.Entry
}) {
	db, err := chain.Open(path, chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(context.Background(), func(tx *chain.Tx) error {
		b.entries = b.entries[:0]
		for seq := 1; seq <= n; seq++ {
			key := ""
			if seq%keyEvery == 0 {
				key = fmt.Sprintf("op-%d", seq)
			}
			res, err := tx.Append(chain.Request{Chain: "c", IdempotencyKey: key, Type: "t/v1", Payload: fmt.Appendf(nil, "%d", seq)})
			if err != nil {
				return err
			}
			b.entries = append(b.entries, res.Entry)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if b.file, err = os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	return b
}

// The key index of a chain read in chunks is summed on a goroutine of its
// own while the entries are read: a clean index passes, a record removed
// from a run or from the recent keys is reported at its entry, and a run
// that cannot be read stops the verify with ErrCorrupt, as when the index
// is read after the entries.
func TestVerifyIndexAhead(t *testing.T) {
	defer chain.SetVerifyChunkEntries(100)()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	verify := func(t *testing.T, path string) (chain.Report, error) {
		t.Helper()
		db, err := chain.Open(path, chain.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		ahead := chain.VerifyIndexAheadChains()
		report, err := db.Verify(context.Background(), chain.VerifyOptions{})
		if chain.VerifyIndexAheadChains() == ahead {
			t.Fatal("no key index was summed while the entries were read")
		}
		return report, err
	}
	t.Run("clean", func(t *testing.T) {
		l := newKeyedLedger(t)
		if report, err := verify(t, l.path); err != nil || !report.OK() {
			t.Fatalf("verify: %v %v", report.Failures, err)
		}
	})
	t.Run("missing", func(t *testing.T) {
		l := newKeyedLedger(t)
		l.tamper(t, func(btx *bbolt.Tx) error {
			if err := bolt.DeleteKeyRecord(btx, keyedLedgerBig, l.runKey); err != nil {
				return err
			}
			return bolt.DeleteKeyRecord(btx, keyedLedgerBig, l.recentKey)
		})
		report, err := verify(t, l.path)
		if err != nil {
			t.Fatal(err)
		}
		assertFailures(t, report.Failures,
			failureKey{keyedLedgerBig, l.runSeq, chain.ReasonKeyIndexMismatch},
			failureKey{keyedLedgerBig, l.recentSeq, chain.ReasonKeyIndexMismatch})
	})
	t.Run("unreadable", func(t *testing.T) {
		l := newKeyedLedger(t)
		l.tamper(t, func(btx *bbolt.Tx) error {
			runs := btx.Bucket(bolt.BucketKeyRuns)
			name, _ := runs.Cursor().First()
			run := runs.Bucket(name)
			k, v := run.Cursor().First()
			return run.Put(bytes.Clone(k), append(bytes.Clone(v), 0))
		})
		report, err := verify(t, l.path)
		if !errors.Is(err, chain.ErrCorrupt) {
			t.Fatalf("verify: %v (failures %v), want an error matching ErrCorrupt", err, report.Failures)
		}
	})
}
