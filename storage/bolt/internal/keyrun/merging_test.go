package keyrun

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"

	bbolt "go.etcd.io/bbolt"
	"pgregory.net/rapid"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt/internal/keyindex"
)

// runsBound is the most runs a file of keys keys holds once its merges
// keep up (Fanout runs at each level a run of those keys may sit at, one
// level more for the runs that wait while a merge is in progress):
// logarithmic in the keys, where runs capped at MergeRecordsMax records
// would grow with keys ÷ MergeRecordsMax.
func runsBound(keys int) int { return Fanout * (int(Level(uint64(keys))) + 2) }

// failer is what spread needs of a testing.T or rapid.T.
type failer interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// spread is a file whose merges are spread over transactions: a plain
// map of every key written (chain 1) is the model of its index.
type spread struct {
	tb       failer
	path     string
	db       *bbolt.DB
	cache    *Cache
	mergeMax uint64
	seqs     map[string]uint64
	// largest is the most records one transaction merged.
	largest uint64
}

func newSpread(tb failer, dir string, mergeMax uint64) *spread {
	s := &spread{tb: tb, path: filepath.Join(dir, "k.db"), mergeMax: mergeMax, seqs: map[string]uint64{}}
	s.open()
	err := s.db.Update(func(btx *bbolt.Tx) error {
		for _, name := range [][]byte{bucketRuns, bucketKeys, bucketMeta} {
			if _, err := btx.CreateBucket(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// open opens the file with a new cache, as a process that starts does.
func (s *spread) open() {
	// The backend keeps no freelist in the file either.
	db, err := bbolt.Open(s.path, 0o600, &bbolt.Options{NoFreelistSync: true})
	if err != nil {
		s.tb.Fatal(err)
	}
	s.db, s.cache = db, NewCache()
	s.cache.MergeRecordsMax = s.mergeMax
}

func (s *spread) reopen() {
	if err := s.db.Close(); err != nil {
		s.tb.Fatal(err)
	}
	s.open()
}

// tx runs a write transaction that writes n new keys (none: it only
// steps the merge in progress), committed or rolled back.
func (s *spread) tx(n int, commit bool) {
	s.tb.Helper()
	btx, err := s.db.Begin(true)
	if err != nil {
		s.tb.Fatal(err)
	}
	h := &host{btx: btx, cache: s.cache}
	keys, records := s.newKeys(n)
	if n == 0 {
		err = h.view.Step(h)
	} else {
		err = h.view.Flush(h, n, records, func(put func(uint64, string, uint64) error) error {
			for k, seq := range keys {
				if err := put(1, k, seq); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err != nil {
		btx.Rollback()
		s.tb.Fatal(err)
	}
	if s.mergeMax > 0 && h.view.mergedRecords > s.mergeMax {
		btx.Rollback()
		s.tb.Fatalf("a transaction merged %d records, MergeRecordsMax %d", h.view.mergedRecords, s.mergeMax)
	}
	if !commit {
		if err := btx.Rollback(); err != nil {
			s.tb.Fatal(err)
		}
		return
	}
	if f := h.view.Committed(h, uint64(btx.ID())); f != nil {
		btx.OnCommit(f)
	}
	if err := btx.Commit(); err != nil {
		s.tb.Fatal(err)
	}
	s.largest = max(s.largest, h.view.mergedRecords)
	for k, seq := range keys {
		s.seqs[k] = seq
	}
}

// runs returns the runs of the file, and the largest's records.
func (s *spread) runs() (n int, largest uint64) {
	s.tb.Helper()
	err := s.db.View(func(btx *bbolt.Tx) error {
		h := &host{btx: btx, cache: s.cache}
		if err := h.view.Load(h); err != nil {
			return err
		}
		for _, r := range h.view.Runs() {
			largest = max(largest, r.Count())
		}
		n = len(h.view.Runs())
		return nil
	})
	if err != nil {
		s.tb.Fatal(err)
	}
	return n, largest
}

// check looks up every key of the model and keys never written, and
// checks the merge in progress: its sources are runs, and its output
// holds, in order, as many records as it says it wrote.
func (s *spread) check() {
	s.tb.Helper()
	err := s.db.View(func(btx *bbolt.Tx) error {
		h := &host{btx: btx, cache: s.cache}
		for key, want := range s.seqs {
			digest := storage.KeyDigest(key)
			seq, ok, err := h.view.Lookup(h, 1, &digest)
			if err == nil && !ok {
				seq, ok, err = RecentSeq(h, 1, key)
			}
			if err != nil || !ok || seq != want {
				return fmt.Errorf("key %q: %d, %v, %v; want %d", key, seq, ok, err, want)
			}
		}
		for i := range 20 {
			key := fmt.Sprintf("absent-%d", i)
			digest := storage.KeyDigest(key)
			if _, ok, err := h.view.Lookup(h, 1, &digest); err != nil || ok {
				return fmt.Errorf("key %q: %v, %v", key, ok, err)
			}
		}
		mb := btx.Bucket(MergeBucket)
		if mb == nil {
			return nil
		}
		sources := mb.Get(mergeSourcesKey)
		for o := 0; o < len(sources); o += len(Name{}) {
			if h.RunsBucket().Bucket(sources[o:o+len(Name{})]) == nil {
				return fmt.Errorf("merge source %x is not a run", sources[o:o+len(Name{})])
			}
		}
		out := mb.Bucket(mb.Get(mergeOutputKey))
		var records uint64
		var last []byte
		err := out.ForEach(func(k, v []byte) error {
			if last != nil && string(k) <= string(last) {
				return fmt.Errorf("merge output out of order at %x", k)
			}
			last = k
			records += uint64(len(v) / keyindex.RecordSize)
			return nil
		})
		if written := binary.BigEndian.Uint64(mb.Get(mergeWrittenKey)); err == nil && records != written {
			err = fmt.Errorf("merge output holds %d records, wrote %d", records, written)
		}
		return err
	})
	if err != nil {
		s.tb.Fatal(err)
	}
}

// TestMergeSpread writes 40,000 keys under a MergeRecordsMax of 512: the
// merges past it are spread over transactions, none of which merges more,
// runs of many times that many records are written, the runs stay within
// runsBound after every transaction, and every key is found, before and
// after the file is opened again.
func TestMergeSpread(t *testing.T) {
	const mergeMax = 512
	s := newSpread(t, t.TempDir(), mergeMax)
	defer func() { s.db.Close() }()
	for i := 0; len(s.seqs) < 40000; i++ {
		s.tx(DirectMin+i%(3*DirectMin), true)
		if n, _ := s.runs(); n > runsBound(len(s.seqs)) {
			t.Fatalf("%d runs for %d keys, bound %d", n, len(s.seqs), runsBound(len(s.seqs)))
		}
	}
	n, largest := s.runs()
	if largest < 16*mergeMax {
		t.Errorf("the largest run holds %d records, MergeRecordsMax %d", largest, mergeMax)
	}
	if s.largest > mergeMax {
		t.Errorf("a transaction merged %d records", s.largest)
	}
	t.Logf("%d keys: %d runs, the largest of %d records", len(s.seqs), n, largest)
	s.check()
	s.reopen()
	s.check()
}

// TestMergeSpreadMachine interleaves transactions of new keys (through the
// recent keys or as runs), transactions that only step the merge in
// progress, transactions rolled back after their merge steps (a process
// that stops before its commit), and reopens with a new cache (a process
// that stops between two), and reopens under another MergeRecordsMax,
// against a map of every key committed: every
// key is found, the merge in progress is whole, no transaction merges
// more than MergeRecordsMax records, and the runs stay within runsBound.
func TestMergeSpreadMachine(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		mergeMax := uint64(rapid.IntRange(64, 1024).Draw(rt, "mergeMax"))
		s := newSpread(rt, t.TempDir(), mergeMax)
		defer func() { s.db.Close() }()
		rt.Repeat(map[string]func(*rapid.T){
			"small": func(rt *rapid.T) { s.tx(rapid.IntRange(1, DirectMin-1).Draw(rt, "n"), true) },
			"run":   func(rt *rapid.T) { s.tx(rapid.IntRange(DirectMin, int(mergeMax)/4).Draw(rt, "n"), true) },
			"step":  func(rt *rapid.T) { s.tx(0, true) },
			"crash": func(rt *rapid.T) {
				s.tx(rapid.IntRange(0, int(mergeMax)/4).Draw(rt, "n"), false)
				s.reopen()
			},
			"reopen": func(rt *rapid.T) { s.reopen() },
			// A process with another bound (none, or a larger or smaller
			// one) goes on with the merge in progress, and merges in one
			// transaction the levels that filled meanwhile.
			"rebound": func(rt *rapid.T) {
				s.mergeMax = uint64(rapid.SampledFrom([]int{0, 64, 256, 1024, 1 << 20}).Draw(rt, "bound"))
				s.reopen()
			},
			"": func(rt *rapid.T) {
				s.check()
				if n, _ := s.runs(); n > runsBound(len(s.seqs)) {
					rt.Fatalf("%d runs for %d keys, bound %d", n, len(s.seqs), runsBound(len(s.seqs)))
				}
			},
		})
	})
}

// TestMergeStale merges the sources of the merge in progress in one
// transaction, as a process that does not know the merge bucket does: the
// next transaction drops the merge, and every key is still found.
func TestMergeStale(t *testing.T) {
	s := newSpread(t, t.TempDir(), 256)
	defer func() { s.db.Close() }()
	inProgress := func() (sources []*Run) {
		err := s.db.View(func(btx *bbolt.Tx) error {
			h := &host{btx: btx, cache: s.cache}
			if err := h.view.Load(h); err != nil {
				return err
			}
			mb := btx.Bucket(MergeBucket)
			if mb == nil {
				return nil
			}
			names := mb.Get(mergeSourcesKey)
			for _, r := range h.view.Runs() {
				for o := 0; o < len(names); o += len(Name{}) {
					if Name(names[o:]) == r.Name() {
						sources = append(sources, r)
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return sources
	}
	var sources []*Run
	for sources == nil {
		s.tx(DirectMin, true)
		sources = inProgress()
	}
	err := s.db.Update(func(btx *bbolt.Tx) error {
		h := &host{btx: btx, cache: NewCache()}
		if err := h.view.Load(h); err != nil {
			return err
		}
		return h.view.merge(h, sources)
	})
	if err != nil {
		t.Fatal(err)
	}
	s.reopen()
	s.tx(DirectMin, true)
	err = s.db.View(func(btx *bbolt.Tx) error {
		if mb := btx.Bucket(MergeBucket); mb != nil && string(mb.Get(mergeSourcesKey)[:len(Name{})]) == string(sources[0].name[:]) {
			return fmt.Errorf("the stale merge of %x is still in progress", sources[0].name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s.check()
}

// newKeys returns n keys not written yet, with their seqs, and their
// records in the order of the keys' numbers.
func (s *spread) newKeys(n int) (map[string]uint64, []byte) {
	keys := map[string]uint64{}
	var records []byte
	for i := range n {
		key, seq := fmt.Sprintf("k-%d-%d", len(s.seqs), i), uint64(len(s.seqs)+i+1)
		keys[key] = seq
		records = keyindex.AppendRecord(records, 1, key, seq)
	}
	return keys, records
}

// writeRun commits a transaction that writes n new keys as one run at the
// level, without merging: a level fills past Fanout this way as it does
// while a merge is in progress.
func (s *spread) writeRun(n int, level uint8) {
	s.tb.Helper()
	keys, records := s.newKeys(n)
	keyindex.SortRecords(records)
	err := s.db.Update(func(btx *bbolt.Tx) error {
		h := &host{btx: btx, cache: s.cache}
		if err := h.view.Load(h); err != nil {
			return err
		}
		if _, err := h.view.write(h, records, level); err != nil {
			return err
		}
		btx.OnCommit(h.view.Committed(h, uint64(btx.ID())))
		return nil
	})
	if err != nil {
		s.tb.Fatal(err)
	}
	for k, seq := range keys {
		s.seqs[k] = seq
	}
}

// TestMergeChainNames fills level 1 with 27 runs of 20 keys (540, level
// 3 by their size) and level 2 with 9 runs of 64 (576, level 3 too), then
// commits a run of 20 keys under no merge bound: its transaction merges
// level 1 into a run at level 3 and then level 2, whose run, named by the
// level and the transaction, would take the same name; it goes a level up
// instead, every name stays one run's, and every key is found.
func TestMergeChainNames(t *testing.T) {
	s := newSpread(t, t.TempDir(), 0)
	defer func() { s.db.Close() }()
	for range 27 {
		s.writeRun(20, 1)
	}
	for range 9 {
		s.writeRun(64, 2)
	}
	s.tx(20, true)
	levels := map[uint8]int{}
	err := s.db.View(func(btx *bbolt.Tx) error {
		h := &host{btx: btx, cache: s.cache}
		if err := h.view.Load(h); err != nil {
			return err
		}
		for _, r := range h.view.Runs() {
			levels[r.Name().Level()]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(levels) != 2 || levels[3] != 1 || levels[4] != 1 {
		t.Errorf("runs by level %v, want one at 3 and one at 4", levels)
	}
	s.check()
	s.reopen()
	s.check()
}

// txOverheadBytes is what a transaction allocates besides what the costs
// count: bbolt's transaction, cursors and nodes of the buckets it
// touches, the merge state's values.
const txOverheadBytes = 256 << 10

// TestMergeCosts measures what the transactions of a merge spread over
// transactions allocate (the Go heap's total allocations, an upper bound
// of what they hold at once): each step no more than StepBytes of its
// records, the last no more than FinishBytes of the merge's, whose run's
// filter and freed pages grow with it. A cost that leaves out the run's
// filter, or a merge that held its output's records, fails it.
func TestMergeCosts(t *testing.T) {
	const mergeMax, runRecords = 200_000, 150_000
	s := newSpread(t, t.TempDir(), mergeMax)
	defer func() { s.db.Close() }()
	for range Fanout {
		s.writeRun(runRecords, Level(runRecords))
	}
	s.tx(DirectMin, true) // starts the merge of the eight
	pageBytes := s.db.Info().PageSize
	total := uint64(Fanout * runRecords)
	var steps int
	for {
		written, merging := s.mergeWritten()
		if !merging {
			break
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s.tx(0, true)
		runtime.ReadMemStats(&after)
		allocated := after.TotalAlloc - before.TotalAlloc
		now, still := s.mergeWritten()
		switch {
		case !still: // finished
			if limit := FinishBytes(total, s.cache.stepRecordsMax(), pageBytes) + txOverheadBytes; allocated > limit {
				t.Errorf("the transaction that finished a merge of %d records allocated %d bytes, FinishBytes %d", total, allocated, limit-txOverheadBytes)
			}
			t.Logf("finish of %d records: %d bytes allocated, FinishBytes %d", total, allocated, FinishBytes(total, s.cache.stepRecordsMax(), pageBytes))
		case now > written:
			steps++
			if limit := StepBytes(now-written) + txOverheadBytes; allocated > limit {
				t.Errorf("a step of %d records allocated %d bytes, StepBytes %d", now-written, allocated, limit-txOverheadBytes)
			}
		}
		if steps > 100 {
			t.Fatal("the merge does not end")
		}
	}
	if steps < 4 {
		t.Errorf("%d steps of a merge of %d records under MergeRecordsMax %d", steps, total, mergeMax)
	}
	s.check()
}

// mergeWritten returns the records the merge in progress has written, and
// whether one is.
func (s *spread) mergeWritten() (uint64, bool) {
	var written uint64
	var merging bool
	err := s.db.View(func(btx *bbolt.Tx) error {
		if mb := btx.Bucket(MergeBucket); mb != nil {
			written, merging = binary.BigEndian.Uint64(mb.Get(mergeWrittenKey)), true
		}
		return nil
	})
	if err != nil {
		s.tb.Fatal(err)
	}
	return written, merging
}
