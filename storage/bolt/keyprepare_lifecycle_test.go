package bolt_test

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// TestPreparationEndsWithItsTransaction prepares keys in a writer and ends
// it in each way a writer ends (a commit, an asynchronous commit, a
// rollback, a commit of nothing), with the prepared keys taken or not, and
// then looks the same keys up, unprepared, in the next writer, which is
// handed the first one's memory, and in a read transaction: each lookup
// answers from the committed data, never from what the ended writer had
// prepared (a key it appended is found, a key it rolled back is not).
func TestPreparationEndsWithItsTransaction(t *testing.T) {
	for _, end := range []string{"commit", "commit-async", "rollback", "commit-nothing"} {
		for _, take := range []bool{false, true} {
			name := end + "-untaken"
			if take {
				name = end + "-taken"
			}
			t.Run(name, func(t *testing.T) {
				b, err := bolt.Open(filepath.Join(t.TempDir(), "ledger.db"), bolt.Options{Log: bolt.LogOn})
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				// "old" is committed before the preparation, "new" only
				// by the writer that prepares it (unless it rolls back).
				commitRecord(t, b, "a", storage.Record{Seq: 1, IdempotencyKey: "old", Data: []byte("old")})

				tx, err := b.Begin(ctx, true)
				if err != nil {
					t.Fatal(err)
				}
				prepared := []storage.ChainKey{{Chain: "a", Key: "new"}, {Chain: "a", Key: "old"}, {Chain: "b", Key: "new"}}
				tx.(storage.KeyPreparer).PrepareKeys(ctx, prepared)
				if take {
					if _, err := tx.LookupKey(ctx, "a", "new"); !errors.Is(err, storage.ErrNotFound) {
						t.Fatalf("prepared lookup of a new key: %v", err)
					}
				}
				appended := end != "rollback" && end != "commit-nothing"
				if end != "commit-nothing" {
					if err := tx.Append(ctx, "a", storage.Record{Seq: 2, IdempotencyKey: "new", Data: []byte("new")}, testHead(2)); err != nil {
						t.Fatal(err)
					}
				}
				if err := endWriter(tx, strings.TrimSuffix(end, "-nothing")); err != nil {
					t.Fatal(err)
				}

				check := func(what string, tx storage.Tx) {
					t.Helper()
					for _, k := range prepared {
						seq, err := tx.LookupKey(ctx, k.Chain, k.Key)
						var want uint64
						switch {
						case k == (storage.ChainKey{Chain: "a", Key: "old"}):
							want = 1
						case k == (storage.ChainKey{Chain: "a", Key: "new"}) && appended:
							want = 2
						}
						if (want != 0 && (err != nil || seq != want)) || (want == 0 && !errors.Is(err, storage.ErrNotFound)) {
							t.Errorf("%s: lookup of %q in %q: %d, %v; want seq %d (0: not found)", what, k.Key, k.Chain, seq, err, want)
						}
					}
				}
				next, err := b.Begin(ctx, true)
				if err != nil {
					t.Fatal(err)
				}
				check("the next writer", next)
				// The next writer appends the key the first one prepared as
				// new only when it was not kept: a second entry of a key
				// is refused.
				err = next.Append(ctx, "a", storage.Record{Seq: 2, IdempotencyKey: "new", Data: []byte("again")}, testHead(2))
				if appended && err == nil {
					t.Errorf("the next writer appended key %q again", "new")
				}
				if !appended && err != nil {
					t.Errorf("the next writer could not append key %q: %v", "new", err)
				}
				if err := next.Rollback(); err != nil {
					t.Fatal(err)
				}
				reader, err := b.Begin(ctx, false)
				if err != nil {
					t.Fatal(err)
				}
				defer reader.Rollback()
				check("a reader", reader)
			})
		}
	}
}

// TestPreparedReaderKeepsItsSnapshot prepares keys in a read transaction,
// then commits one of them and checkpoints the memory table into the
// file: the reader's lookups, prepared, answer as of its snapshot (the key
// committed since is not found), and a reader begun afterwards, prepared
// too, finds it.
func TestPreparedReaderKeepsItsSnapshot(t *testing.T) {
	b, err := bolt.Open(filepath.Join(t.TempDir(), "ledger.db"), bolt.Options{Log: bolt.LogOn})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	commit := func(seq uint64, key string) {
		t.Helper()
		tx, err := b.Begin(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Append(ctx, "a", storage.Record{Seq: seq, IdempotencyKey: key, Data: []byte(key)}, testHead(seq)); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	commit(1, "in-file")
	if err := bolt.Checkpoint(b); err != nil {
		t.Fatal(err)
	}
	commit(2, "in-memory")
	keys := []storage.ChainKey{{Chain: "a", Key: "in-file"}, {Chain: "a", Key: "in-memory"}, {Chain: "a", Key: "later"}}
	lookup := func(what string, tx storage.Tx, want []uint64) {
		t.Helper()
		tx.(storage.KeyPreparer).PrepareKeys(ctx, keys)
		for i, k := range keys {
			seq, err := tx.LookupKey(ctx, k.Chain, k.Key)
			if (want[i] != 0 && (err != nil || seq != want[i])) || (want[i] == 0 && !errors.Is(err, storage.ErrNotFound)) {
				t.Errorf("%s: lookup of %q: %d, %v; want seq %d (0: not found)", what, k.Key, seq, err, want[i])
			}
		}
	}
	early, err := b.Begin(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	defer early.Rollback()
	lookup("a reader before the commit", early, []uint64{1, 2, 0})
	commit(3, "later")
	if err := bolt.Checkpoint(b); err != nil {
		t.Fatal(err)
	}
	lookup("the same reader after the commit and a checkpoint", early, []uint64{1, 2, 0})
	late, err := b.Begin(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Rollback()
	lookup("a reader after the commit", late, []uint64{1, 2, 3})
}

// TestPreparedLookupsOfADamagedIndex damages the chunks of the file's key
// runs (a length no record size divides) and looks keys up prepared and
// unprepared, in writers over the same file: each prepared answer is the
// unprepared one, so that a key whose lookup fails is reported failing,
// never as absent (which would let the engine append it a second time),
// whichever keys came before it in the preparation.
func TestPreparedLookupsOfADamagedIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	b, err := bolt.Open(path, bolt.Options{Log: bolt.LogOn})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	var keys []storage.ChainKey
	for seq := uint64(1); seq <= 40; seq++ {
		key := fmt.Sprint("in-file-", seq)
		if err := tx.Append(ctx, "a", storage.Record{Seq: seq, IdempotencyKey: key, Data: []byte(key)}, testHead(seq)); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, storage.ChainKey{Chain: "a", Key: key}, storage.ChainKey{Chain: "a", Key: fmt.Sprint("absent-", seq)})
	}
	keys = append(keys, storage.ChainKey{Chain: "b", Key: "in-file-1"}, storage.ChainKey{Chain: "a", Key: "in-memory"})
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil { // the close checkpoints the keys into a run
		t.Fatal(err)
	}
	damaged := 0
	bdb, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = bdb.Update(func(btx *bbolt.Tx) error {
		runs := btx.Bucket(bolt.BucketKeyRuns)
		if runs == nil {
			return errors.New("no key runs")
		}
		return runs.ForEachBucket(func(name []byte) error {
			run := runs.Bucket(name)
			var chunks [][2][]byte
			err := run.ForEach(func(k, v []byte) error {
				if string(k) != "count" && string(k) != "filter" {
					chunks = append(chunks, [2][]byte{bytes.Clone(k), append(bytes.Clone(v), 0)})
				}
				return nil
			})
			for _, c := range chunks {
				if err := run.Put(c[0], c[1]); err != nil {
					return err
				}
				damaged++
			}
			return err
		})
	})
	bdb.Close()
	if err != nil {
		t.Fatal(err)
	}
	if damaged == 0 {
		t.Fatal("no chunk of a key run to damage")
	}

	b, err = bolt.Open(path, bolt.Options{Log: bolt.LogOn})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	tx, err = b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Append(ctx, "a", storage.Record{Seq: 41, IdempotencyKey: "in-memory", Data: []byte("m")}, testHead(41)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		seq     uint64
		corrupt bool
		err     string
	}
	lookup := func(tx storage.Tx, k storage.ChainKey) answer {
		seq, err := tx.LookupKey(ctx, k.Chain, k.Key)
		a := answer{seq: seq, corrupt: errors.Is(err, storage.ErrCorrupt)}
		if err != nil && !errors.Is(err, storage.ErrNotFound) && !a.corrupt {
			a.err = err.Error()
		}
		if errors.Is(err, storage.ErrNotFound) {
			a.err = "not found"
		}
		return a
	}
	want := make([]answer, len(keys))
	failing := 0
	for i, k := range keys { // unprepared, each in a writer of its own
		tx, err := b.Begin(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = lookup(tx, k)
		if want[i].corrupt {
			failing++
		}
		tx.Rollback()
	}
	if failing == 0 {
		t.Fatalf("no lookup met the damage: %+v", want)
	}
	tx, err = b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	tx.(storage.KeyPreparer).PrepareKeys(ctx, keys)
	for i, k := range keys {
		if got := lookup(tx, k); got != want[i] {
			t.Errorf("prepared lookup of %q in %q: %+v; unprepared %+v", k.Key, k.Chain, got, want[i])
		}
	}
}
