package bolt_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// indexModel is what the index must answer: every key ever appended, per
// chain, with its seq.
type indexModel struct {
	seqs  map[string]map[string]uint64
	heads map[string]uint64
}

func appendKeys(t *testing.T, b *bolt.Backend, m *indexModel, chains []string, keys int, prefix string, commit bool) {
	t.Helper()
	ctx := context.Background()
	stx, err := b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer stx.Rollback()
	heads := map[string]uint64{}
	added := map[string]map[string]uint64{}
	for i := range keys {
		ch := chains[i%len(chains)]
		if _, ok := heads[ch]; !ok {
			heads[ch] = m.heads[ch]
		}
		key := fmt.Sprintf("%s-%d", prefix, i)
		if _, err := stx.LookupKey(ctx, ch, key); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("new key %q of %q: %v", key, ch, err)
		}
		seq := heads[ch] + 1
		if err := stx.Append(ctx, ch, storage.Record{Seq: seq, IdempotencyKey: key, Data: []byte(key)}, storage.Head{Seq: seq}); err != nil {
			t.Fatal(err)
		}
		heads[ch] = seq
		if added[ch] == nil {
			added[ch] = map[string]uint64{}
		}
		added[ch][key] = seq
		// A key appended in this transaction is visible to it at once.
		if got, err := stx.LookupKey(ctx, ch, key); err != nil || got != seq {
			t.Fatalf("key %q just appended: seq %d, %v; want %d", key, got, err, seq)
		}
	}
	if !commit {
		return
	}
	if err := stx.Commit(); err != nil {
		t.Fatal(err)
	}
	for ch, h := range heads {
		m.heads[ch] = h
	}
	for ch, keys := range added {
		if m.seqs[ch] == nil {
			m.seqs[ch] = map[string]uint64{}
		}
		for k, s := range keys {
			m.seqs[ch][k] = s
		}
	}
}

func checkIndex(t *testing.T, b *bolt.Backend, m *indexModel, chains []string) {
	t.Helper()
	ctx := context.Background()
	stx, err := b.Begin(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	defer stx.Rollback()
	n := 0
	for ch, keys := range m.seqs {
		for k, want := range keys {
			got, err := stx.LookupKey(ctx, ch, k)
			if err != nil || got != want {
				t.Fatalf("key %q of %q: seq %d, %v; want %d", k, ch, got, err, want)
			}
			n++
		}
	}
	for _, ch := range chains {
		for _, k := range []string{"never-appended", "rolled-back-0", "rolled-back-1"} {
			if _, err := stx.LookupKey(ctx, ch, k); !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("key %q of %q that was never committed: %v", k, ch, err)
			}
		}
	}
	// A key of one chain is unknown to the others.
	for k := range m.seqs[chains[0]] {
		if _, err := stx.LookupKey(ctx, "other", k); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("key %q on a chain that never held it: %v", k, err)
		}
		break
	}
	if n == 0 {
		t.Fatal("model is empty")
	}
}

func countRuns(t *testing.T, path string, b *bolt.Backend) map[uint8]int {
	t.Helper()
	levels := map[uint8]int{}
	err := b.View(func(btx *bbolt.Tx) error {
		return btx.Bucket(bolt.BucketKeyRuns).ForEach(func(k, v []byte) error {
			levels[k[0]]++
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return levels
}

// TestKeyIndexRunsAndMerges drives the index through every path: small
// transactions into the recent B-tree until it is written out as a run,
// large transactions written as runs directly, merges of full levels, a
// rolled-back transaction, and a reopen; every committed key must be found
// with its seq, every other key not, and a second append of a key must fail.
func TestKeyIndexRunsAndMerges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	b, err := bolt.Open(path, bolt.Options{Log: bolt.LogOff})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { b.Close() }()
	chains := []string{"a", "b", "c"}
	m := &indexModel{seqs: map[string]map[string]uint64{}, heads: map[string]uint64{}}

	for i := range bolt.KeyRunFanout + 2 { // direct runs: one level fills and merges
		appendKeys(t, b, m, chains, bolt.KeyRunDirectMin+17*i, fmt.Sprintf("big%d", i), true)
	}
	appendKeys(t, b, m, chains, bolt.KeyRunDirectMin, "rolled-back", false)
	small := bolt.KeyRunDirectMin - 1
	for i := range bolt.KeyRecentMax/small + 1 { // the recent B-tree fills and is written out
		appendKeys(t, b, m, chains, small, fmt.Sprintf("small%d", i), true)
	}
	levels := countRuns(t, path, b)
	total := 0
	for level, n := range levels {
		if n >= bolt.KeyRunFanout {
			t.Errorf("level %d holds %d runs; a full level must have been merged", level, n)
		}
		total += n
	}
	if total < 2 || len(levels) < 2 {
		t.Errorf("runs by level %v: want runs on several levels", levels)
	}
	checkIndex(t, b, m, chains)

	// A key that exists cannot be appended again, whichever part holds it.
	ctx := context.Background()
	stx, err := b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"big0-0", "big9-6", "small0-3", fmt.Sprintf("small%d-0", bolt.KeyRecentMax/small)} {
		ch := chains[0]
		if _, ok := m.seqs[ch][key]; !ok {
			t.Errorf("test key %q is not in the model", key)
			continue
		}
		seq := m.heads[ch] + 1
		err := stx.Append(ctx, ch, storage.Record{Seq: seq, IdempotencyKey: key, Data: []byte("dup")}, storage.Head{Seq: seq})
		if !errors.Is(err, storage.ErrDuplicate) {
			t.Errorf("second append of key %q: %v, want ErrDuplicate", key, err)
		}
	}
	stx.Rollback()

	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if b, err = bolt.Open(path, bolt.Options{Log: bolt.LogOff}); err != nil {
		t.Fatal(err)
	}
	checkIndex(t, b, m, chains)
	appendKeys(t, b, m, chains, 3, "after-reopen", true)
	checkIndex(t, b, m, chains)
	if err := b.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestUpgradeFromFormatV1 turns a file back into the first layout (every
// key in the keys bucket, no runs) and opens it: read-only it answers as
// it is; for writing it is upgraded, and its keys stay unique.
func TestUpgradeFromFormatV1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	b, err := bolt.Open(path, bolt.Options{Log: bolt.LogOff})
	if err != nil {
		t.Fatal(err)
	}
	chains := []string{"a"}
	m := &indexModel{seqs: map[string]map[string]uint64{}, heads: map[string]uint64{}}
	for i := range 4 { // small transactions: the first layout kept every key in the keys bucket
		appendKeys(t, b, m, chains, bolt.KeyRunDirectMin-1, fmt.Sprintf("old%d", i), true)
	}
	b.Close()
	raw, err := bbolt.Open(path, bolt.FileMode, bolt.BboltOptions(bolt.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	err = raw.Update(func(btx *bbolt.Tx) error {
		if err := bolt.DowngradeToFormatV2(btx); err != nil {
			return err
		}
		if err := btx.DeleteBucket(bolt.BucketKeyRuns); err != nil {
			return err
		}
		meta := btx.Bucket(bolt.BucketMeta)
		if err := meta.Delete([]byte("recent_keys")); err != nil {
			return err
		}
		return meta.Put([]byte("format"), []byte(bolt.FormatV1))
	})
	raw.Close()
	if err != nil {
		t.Fatal(err)
	}

	ro, err := bolt.Open(path, bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	checkIndex(t, ro, m, chains)
	ro.Close()

	if b, err = bolt.Open(path, bolt.Options{Log: bolt.LogOff}); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	err = b.View(func(btx *bbolt.Tx) error {
		if got := string(btx.Bucket(bolt.BucketMeta).Get([]byte("format"))); got != bolt.Format {
			return fmt.Errorf("format %q after upgrade, want %q", got, bolt.Format)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkIndex(t, b, m, chains)
	appendKeys(t, b, m, chains, bolt.KeyRecentMax, "new", true) // a run beside the old keys
	checkIndex(t, b, m, chains)
	if levels := countRuns(t, path, b); len(levels) == 0 {
		t.Fatal("no run after the recent keys filled up")
	}
}

// TestSetKeySeq repoints keys in both parts of the index through the
// helpers tamper tests use, and the backend then answers with the new seq.
func TestSetKeySeq(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	b, err := bolt.Open(path, bolt.Options{Log: bolt.LogOff})
	if err != nil {
		t.Fatal(err)
	}
	chains := []string{"a"}
	m := &indexModel{seqs: map[string]map[string]uint64{}, heads: map[string]uint64{}}
	appendKeys(t, b, m, chains, bolt.KeyRunDirectMin, "run", true) // a run
	appendKeys(t, b, m, chains, 3, "recent", true)                 // the recent B-tree
	b.Close()
	raw, err := bbolt.Open(path, bolt.FileMode, bolt.BboltOptions(bolt.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"run-7", "recent-1"}
	err = raw.Update(func(btx *bbolt.Tx) error {
		for _, k := range keys {
			seq, err := bolt.KeySeq(btx, "a", k)
			if err != nil || seq != m.seqs["a"][k] {
				return fmt.Errorf("KeySeq(%q) = %d, %v; want %d", k, seq, err, m.seqs["a"][k])
			}
			if err := bolt.SetKeySeq(btx, "a", k, 1000+seq); err != nil {
				return err
			}
		}
		if _, err := bolt.KeySeq(btx, "a", "never"); !errors.Is(err, storage.ErrNotFound) {
			return fmt.Errorf("KeySeq of a missing key: %v", err)
		}
		return nil
	})
	raw.Close()
	if err != nil {
		t.Fatal(err)
	}
	if b, err = bolt.Open(path, bolt.Options{Log: bolt.LogOff}); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	stx, err := b.Begin(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer stx.Rollback()
	for _, k := range keys {
		if got, err := stx.LookupKey(context.Background(), "a", k); err != nil || got != 1000+m.seqs["a"][k] {
			t.Errorf("LookupKey(%q) after SetKeySeq = %d, %v; want %d", k, got, err, 1000+m.seqs["a"][k])
		}
	}
}
