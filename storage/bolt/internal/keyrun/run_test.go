package keyrun

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt/internal/keyindex"
)

var (
	bucketRuns = []byte("key_runs")
	bucketKeys = []byte("keys")
	bucketMeta = []byte("meta")
)

// host is a RecentHost over one bbolt transaction.
type host struct {
	btx   *bbolt.Tx
	cache *Cache
	keys  *bbolt.Bucket
	view  View
}

func (h *host) BoltTx() *bbolt.Tx         { return h.btx }
func (h *host) RunsBucket() *bbolt.Bucket { return h.btx.Bucket(bucketRuns) }
func (h *host) RunCache() *Cache          { return h.cache }
func (h *host) FilePath() string          { return "test.db" }
func (h *host) WriteError(err error) error {
	return fmt.Errorf("write test.db: %w: %v", storage.ErrIO, err)
}
func (h *host) KeysBucket() *bbolt.Bucket {
	if h.keys == nil {
		h.keys = h.btx.Bucket(bucketKeys)
	}
	return h.keys
}
func (h *host) MetaBucket() *bbolt.Bucket { return h.btx.Bucket(bucketMeta) }
func (h *host) RenewKeysBucket() error {
	if err := h.btx.DeleteBucket(bucketKeys); err != nil {
		return err
	}
	var err error
	h.keys, err = h.btx.CreateBucket(bucketKeys)
	return err
}

type ledger struct {
	t     *testing.T
	db    *bbolt.DB
	cache *Cache
	seqs  map[string]uint64 // key -> seq, every key written, of chain 1
}

func newLedger(t *testing.T) *ledger {
	db, err := bbolt.Open(filepath.Join(t.TempDir(), "k.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	err = db.Update(func(btx *bbolt.Tx) error {
		for _, name := range [][]byte{bucketRuns, bucketKeys, bucketMeta} {
			if _, err := btx.CreateBucket(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return &ledger{t: t, db: db, cache: NewCache(), seqs: map[string]uint64{}}
}

// commit writes n new keys of chain 1 in one transaction, as the backend
// does at commit.
func (l *ledger) commit(n int) {
	l.t.Helper()
	btx, err := l.db.Begin(true)
	if err != nil {
		l.t.Fatal(err)
	}
	h := &host{btx: btx, cache: l.cache}
	type key struct {
		key string
		seq uint64
	}
	var keys []key
	var records []byte
	for range n {
		k := key{fmt.Sprintf("k-%d", len(l.seqs)+len(keys)+1), uint64(len(l.seqs) + len(keys) + 1)}
		keys = append(keys, k)
		records = keyindex.AppendRecord(records, 1, k.key, k.seq)
	}
	err = h.view.Flush(h, n, records, func(put func(uint64, string, uint64) error) error {
		for _, k := range keys {
			if err := put(1, k.key, k.seq); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		btx.Rollback()
		l.t.Fatal(err)
	}
	if f := h.view.Committed(h, uint64(btx.ID())); f != nil {
		btx.OnCommit(f)
	}
	if err := btx.Commit(); err != nil {
		l.t.Fatal(err)
	}
	for _, k := range keys {
		l.seqs[k.key] = k.seq
	}
}

// levels returns how many runs each level holds, and the recent count.
func (l *ledger) levels() (map[uint8]int, uint64) {
	l.t.Helper()
	levels := map[uint8]int{}
	var recent uint64
	err := l.db.View(func(btx *bbolt.Tx) error {
		h := &host{btx: btx, cache: l.cache}
		var err error
		if recent, err = RecentCount(h); err != nil {
			return err
		}
		return h.RunsBucket().ForEach(func(name, _ []byte) error {
			levels[Name(name).Level()]++
			return nil
		})
	})
	if err != nil {
		l.t.Fatal(err)
	}
	return levels, recent
}

// check looks every key up, and keys never written, in one read
// transaction, rounds times over, and returns its view.
func (l *ledger) check(rounds int) *View {
	l.t.Helper()
	btx, err := l.db.Begin(false)
	if err != nil {
		l.t.Fatal(err)
	}
	defer btx.Rollback()
	h := &host{btx: btx, cache: l.cache}
	for range rounds {
		for key, want := range l.seqs {
			digest := storage.KeyDigest(key)
			seq, ok, err := h.view.Lookup(h, 1, &digest)
			if err == nil && !ok {
				seq, ok, err = RecentSeq(h, 1, key)
			}
			if err != nil || !ok || seq != want {
				l.t.Fatalf("key %q: %d, %v, %v; want %d", key, seq, ok, err, want)
			}
			if _, ok, err := h.view.Lookup(h, 2, &digest); err != nil || ok {
				l.t.Fatalf("key %q of chain 2: %v, %v", key, ok, err)
			}
		}
		for i := range 50 {
			key := fmt.Sprintf("absent-%d", i)
			digest := storage.KeyDigest(key)
			if _, ok, err := h.view.Lookup(h, 1, &digest); err != nil || ok {
				l.t.Fatalf("key %q: %v, %v", key, ok, err)
			}
			if _, ok, err := RecentSeq(h, 1, key); err != nil || ok {
				l.t.Fatalf("key %q in the recent keys: %v, %v", key, ok, err)
			}
		}
	}
	return &h.view
}

// TestFlushMerge writes runs directly and through the recent keys, and
// checks the levels they merge into and that every key is found.
func TestFlushMerge(t *testing.T) {
	l := newLedger(t)
	for range Fanout - 1 {
		l.commit(DirectMin) // level 1: 16 records
	}
	if levels, recent := l.levels(); levels[1] != Fanout-1 || len(levels) != 1 || recent != 0 {
		t.Fatalf("levels %v, recent %d", levels, recent)
	}
	l.check(1)
	l.commit(DirectMin) // the eighth of level 1: merged into one of 128 records, level 2
	if levels, _ := l.levels(); levels[2] != 1 || len(levels) != 1 {
		t.Fatalf("after the merge: levels %v", levels)
	}
	for range 3 {
		l.commit(DirectMin - 1) // into the recent keys
	}
	if levels, recent := l.levels(); len(levels) != 1 || recent != 3*(DirectMin-1) {
		t.Fatalf("levels %v, recent %d", levels, recent)
	}
	view := l.check(TableAfter + 2) // through the cursor, then the table
	tables := view.Tables()
	if len(tables) != 1 {
		t.Fatalf("tables %+v", tables)
	}
	for name, s := range tables {
		if s.Searches != TableAfter+1 || s.Chunks != 1 {
			t.Fatalf("run %x: table %+v", name, s)
		}
		if r := l.cache.Get(name); r == nil || r.Radix() == nil || r.Count() != Fanout*DirectMin {
			t.Fatalf("run %x: cached %+v", name, r)
		}
	}
	if runs := l.cache.Latest(); len(runs) != 1 {
		t.Fatalf("the cached list holds %d runs", len(runs))
	}
	// The recent keys fill: they become one run (of level 4, 4,096 records
	// or a few more), and the recent count starts again.
	for range (RecentMax - 3*(DirectMin-1)) / (DirectMin - 1) {
		l.commit(DirectMin - 1)
	}
	l.commit(DirectMin - 1)
	levels, recent := l.levels()
	if levels[2] != 1 || levels[4] != 1 || len(levels) != 2 || recent != 0 {
		t.Fatalf("after the recent keys filled: levels %v, recent %d", levels, recent)
	}
	l.check(1)
}

// TestRunLayout checks the bytes of a run's bucket: u64be count, a filter
// of whole blocks, chunks keyed by their last record's prefix.
func TestRunLayout(t *testing.T) {
	l := newLedger(t)
	l.commit(100)
	err := l.db.View(func(btx *bbolt.Tx) error {
		runs := btx.Bucket(bucketRuns)
		c := runs.Cursor()
		name, v := c.First()
		if len(name) != 9 || v != nil || Name(name) != NewName(2, binary.BigEndian.Uint64(name[1:])) {
			return fmt.Errorf("run name %x", name)
		}
		b := runs.Bucket(name)
		if got := b.Get(CountKey); binary.BigEndian.Uint64(got) != 100 || len(got) != 8 {
			return fmt.Errorf("count %x", got)
		}
		if f := b.Get(FilterKey); len(f) != len(keyindex.FilterWords(100))*8 {
			return fmt.Errorf("filter of %d bytes", len(f))
		}
		var records int
		err := b.ForEach(func(k, v []byte) error {
			if len(k) != keyindex.RecordPrefixSize {
				return nil
			}
			if string(k) != string(v[len(v)-keyindex.RecordSize:][:keyindex.RecordPrefixSize]) {
				return errors.New("a chunk's key is not its last record's prefix")
			}
			records += len(v) / keyindex.RecordSize
			return nil
		})
		if err == nil && records != 100 {
			err = fmt.Errorf("%d records", records)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
