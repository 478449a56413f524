package bolt_test

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	bbolt "go.etcd.io/bbolt"
	"pgregory.net/rapid"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// TestReadKeyOnlyDurable holds the log's sync so that a commit is applied
// to the memory table but not durable: ReadKey must not find its key,
// whichever way it looks (the file's filter rules it out, so the published
// tables are walked), until the sync is let through.
func TestReadKeyOnlyDurable(t *testing.T) {
	b, path, wait2, gate := secondCommitHeld(t, asyncOptions)
	waited := make(chan error, 1)
	go func() { waited <- wait2() }()
	if seq, data, found, err := b.ReadKey(ctx, "c", "k2"); err != nil || found {
		t.Fatalf("ReadKey of a commit not durable = %d, %q, %v, %v; want not found", seq, data, found, err)
	}
	if seq, data, found, err := b.ReadKey(ctx, "c", "k1"); err != nil || !found || seq != 1 || string(data) != "k1" {
		t.Fatalf("ReadKey of a durable commit = %d, %q, %v, %v", seq, data, found, err)
	}
	close(gate)
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	bolt.SetSyncHook(b, nil)
	if seq, data, found, err := b.ReadKey(ctx, "c", "k2"); err != nil || !found || seq != 2 || string(data) != "k2" {
		t.Fatalf("ReadKey once durable = %d, %q, %v, %v", seq, data, found, err)
	}
	closeAndCheck(t, b, path)
}

// TestReadKeyClosed checks that a closed backend refuses ReadKey.
func TestReadKeyClosed(t *testing.T) {
	for _, c := range logConfigurations {
		t.Run(c.name, func(t *testing.T) {
			b, err := bolt.Open(filepath.Join(t.TempDir(), "ledger.db"), c.opts)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if _, _, found, err := b.ReadKey(ctx, "c", "k"); !errors.Is(err, storage.ErrClosed) || found {
				t.Fatalf("ReadKey after Close = %v, %v; want ErrClosed", found, err)
			}
		})
	}
}

// TestReadKeyRapid drives a backend through random commits of keys (small
// and large transactions, new chains, the same key on other chains),
// checkpoints, reopens, crashes and rolled-back transactions, against a
// plain model of the acknowledged entries: ReadKey must find each with its
// seq and bytes, agree with a read transaction's LookupKey and Entry, and
// find no key that was never acknowledged.
func TestReadKeyRapid(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := newKeyedMachine(t, rt)
		actions := m.actions()
		actions["compare"] = func(rt *rapid.T) {
			if len(m.order) == 0 {
				return
			}
			k := rapid.SampledFrom(m.order).Draw(rt, "key")
			tx, err := m.b.Begin(ctx, false)
			if err != nil {
				rt.Fatal(err)
			}
			defer tx.Rollback()
			seq, err := tx.LookupKey(ctx, k[0], k[1])
			if err != nil {
				rt.Fatal(err)
			}
			data, err := tx.Entry(ctx, k[0], seq)
			if err != nil {
				rt.Fatal(err)
			}
			got, gotData, found, err := m.b.ReadKey(ctx, k[0], k[1])
			if err != nil || !found || got != seq || !bytes.Equal(gotData, data) {
				rt.Fatalf("ReadKey(%q, %q) = %d, %q, %v, %v; a read transaction has %d, %q", k[0], k[1], got, gotData, found, err, seq, data)
			}
		}
		actions[""] = m.checkReadKey
		rt.Repeat(actions)
	})
}

// checkReadKey checks that ReadKey finds every acknowledged key with its
// seq and bytes, and none of eight keys never committed.
func (m *keyedMachine) checkReadKey(rt *rapid.T) {
	for k, e := range m.acknowledged {
		seq, data, found, err := m.b.ReadKey(ctx, k[0], k[1])
		if err != nil || !found || seq != e.seq || !bytes.Equal(data, e.data) {
			rt.Fatalf("ReadKey(%q, %q) = %d, %q, %v, %v; want %d, %q", k[0], k[1], seq, data, found, err, e.seq, e.data)
		}
	}
	for i := range 8 {
		chain, key := fmt.Sprintf("rapid/%d", i%8), fmt.Sprintf("new-%d-%d", m.next, i)
		if seq, _, found, err := m.b.ReadKey(ctx, chain, key); err != nil || found {
			rt.Fatalf("ReadKey(%q, %q) of a key never committed = %d, %v, %v", chain, key, seq, found, err)
		}
	}
}

// TestReadKeyReadOnly reads keys through handles opened read-only, which
// have no key filter: of a file closed cleanly, and of a file whose log a
// crash left behind (its commits are read from the log's memory table).
func TestReadKeyReadOnly(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprintf("crash=%v", crash), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ledger.db")
			b, err := bolt.Open(path, bolt.Options{Log: bolt.LogOn})
			if err != nil {
				t.Fatal(err)
			}
			commitN(t, b, "a", 1, 40)
			if err := bolt.Checkpoint(b); err != nil {
				t.Fatal(err)
			}
			commitN(t, b, "a", 41, 45) // in the memory table only
			if crash {
				bolt.Abandon(b)
			} else if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			r, err := bolt.Open(path, bolt.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			for seq := uint64(1); seq <= 45; seq++ {
				want := testRecord("a", seq)
				got, data, found, err := r.ReadKey(ctx, "a", want.IdempotencyKey)
				if err != nil || !found || got != seq || !bytes.Equal(data, want.Data) {
					t.Fatalf("ReadKey(a, %q) = %d, %q, %v, %v; want %d, %q", want.IdempotencyKey, got, data, found, err, seq, want.Data)
				}
			}
			if _, _, found, err := r.ReadKey(ctx, "a", "never"); err != nil || found {
				t.Fatalf("ReadKey of a key never committed = %v, %v", found, err)
			}
		})
	}
}

// TestReadKeyIndexPointsNowhere damages a run record of the file so that
// it maps a key to a seq the chain does not have: ReadKey must return an
// error wrapping storage.ErrCorrupt, not "absent" (which would let an
// append write the key a second time).
func TestReadKeyIndexPointsNowhere(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	b, err := bolt.Open(path, bolt.Options{Log: bolt.LogOn})
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, b, "a", 1, 40) // 40 keys: a run of their own
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	damaged := testRecord("a", 7).IdempotencyKey
	digest := bolt.KeyDigest(damaged)
	raw, err := bbolt.Open(path, bolt.FileMode, bolt.BboltOptions(bolt.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	err = raw.Update(func(btx *bbolt.Tx) error {
		runs := btx.Bucket(bolt.BucketKeyRuns)
		return runs.ForEach(func(name, _ []byte) error {
			run := runs.Bucket(name)
			var chunks [][2][]byte
			run.ForEach(func(k, v []byte) error {
				chunks = append(chunks, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
				return nil
			})
			for _, c := range chunks {
				for o := 0; o+32 <= len(c[1]) && len(c[0]) == 24; o += 32 {
					if bytes.Equal(c[1][o+8:o+24], digest[:]) {
						copy(c[1][o+24:o+32], []byte{0, 0, 0, 0, 0, 0, 0x30, 0x39}) // seq 12345
						found = true
						if err := run.Put(c[0], c[1]); err != nil {
							return err
						}
					}
				}
			}
			return nil
		})
	})
	raw.Close()
	if err != nil || !found {
		t.Fatalf("damaging the run record of %q: found %v, %v", damaged, found, err)
	}
	b, err = bolt.Open(path, bolt.Options{Log: bolt.LogOn})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if seq, data, found, err := b.ReadKey(ctx, "a", damaged); !errors.Is(err, storage.ErrCorrupt) || found {
		t.Fatalf("ReadKey of a key mapped to a missing seq = %d, %q, %v, %v; want ErrCorrupt", seq, data, found, err)
	}
	want := testRecord("a", 8)
	if seq, data, found, err := b.ReadKey(ctx, "a", want.IdempotencyKey); err != nil || !found || seq != 8 || !bytes.Equal(data, want.Data) {
		t.Fatalf("ReadKey of an undamaged key = %d, %q, %v, %v", seq, data, found, err)
	}
}
