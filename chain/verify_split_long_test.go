package chain_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// longVerifyEntries is the length of the chain TestVerifySplitLongChain
// damages: more than two batches of verifyBatchSize (256) entries in a
// chunk, and more than keyCheckBatchSize (512) keyed entries in a row
// without a failure, so that the loop that takes the entries without a
// failure crosses batches and sums a full batch of keys itself.
const longVerifyEntries = 1300

// longVerifyWays are the CPU counts and chunk sizes the chain is read with
// besides whole: chunks longer than a batch, and one of a batch and one.
var longVerifyWays = []struct {
	procs int
	chunk uint64
}{{2, 700}, {3, 520}, {4, 257}}

// TestVerifySplitLongChain damages a long chain around the edges of the
// verify's batches of entries and of keys (an entry undecodable, its hash
// or link wrong, missing, swapped with the next) and checks that a verify
// in chunks reports exactly the failures a verify of the chain read whole
// does, in the same order, and that the damage is found at all.
func TestVerifySplitLongChain(t *testing.T) {
	dir := t.TempDir()
	base, entries := newLongVerifyBase(t, filepath.Join(dir, "base.db"))
	type edit struct {
		kind string
		seq  uint64
	}
	cases := [][]edit{nil} // the clean chain first
	for _, seq := range []uint64{1, 2, 256, 257, 512, 513, 514, 1025, longVerifyEntries} {
		for _, kind := range []string{"flip", "forge", "delete", "truncate", "swap"} {
			cases = append(cases, []edit{{kind, seq}})
		}
	}
	cases = append(cases, []edit{{"forge", 256}, {"flip", 257}, {"delete", 513}}, []edit{{"truncate", 255}, {"swap", 511}, {"forge", 1025}})
	for n, edits := range cases {
		path := filepath.Join(dir, fmt.Sprintf("ledger-%d.db", n))
		if err := os.WriteFile(path, base, 0o600); err != nil {
			t.Fatal(err)
		}
		damageLongChain(t, path, entries, func(get func(uint64) []byte, put func(uint64, []byte) error, remove func(uint64) error) error {
			for _, e := range edits {
				v := get(e.seq)
				switch e.kind {
				case "flip": // a payload byte: the hash differs
					v[len(v)-1] ^= 1
					if err := put(e.seq, v); err != nil {
						return err
					}
				case "forge": // a consistent entry with another previous hash
					forged := entries[e.seq-1]
					forged.PrevHash = chain.Genesis("forged")
					forged.Hash = forged.ComputeHash()
					if err := put(e.seq, chain.EncodeRecord(&forged)); err != nil {
						return err
					}
				case "delete":
					if err := remove(e.seq); err != nil {
						return err
					}
				case "truncate":
					if err := put(e.seq, v[:len(v)/2]); err != nil {
						return err
					}
				case "swap":
					other := e.seq%longVerifyEntries + 1
					w := get(other)
					if err := put(e.seq, w); err != nil {
						return err
					}
					if err := put(other, v); err != nil {
						return err
					}
				}
			}
			return nil
		})
		t.Run(fmt.Sprint(edits), func(t *testing.T) {
			db, err := chain.Open(path, chain.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			ctx := context.Background()
			opts := chain.VerifyOptions{FailuresMax: 1000}
			restore := chain.SetVerifyChunkEntries(math.MaxUint64)
			whole, wholeErr := db.Verify(ctx, opts)
			restore()
			if wholeErr != nil {
				t.Fatal(wholeErr)
			}
			if (len(edits) == 0) != whole.OK() {
				t.Fatalf("edits %v: read whole, failures %+v", edits, whole.Failures)
			}
			for _, way := range longVerifyWays {
				restore := chain.SetVerifyChunkEntries(way.chunk)
				previous := runtime.GOMAXPROCS(way.procs)
				split, err := db.Verify(ctx, opts)
				runtime.GOMAXPROCS(previous)
				restore()
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(split, whole) {
					t.Fatalf("in chunks of %d on %d CPUs:\n%+v\nread whole:\n%+v", way.chunk, way.procs, split, whole)
				}
			}
		})
		os.Remove(path)
	}
}

// newLongVerifyBase writes a ledger whose chain "c" holds longVerifyEntries
// keyed entries, and returns its file and entries.
func newLongVerifyBase(t *testing.T, path string) ([]byte, []chain.Entry) {
	t.Helper()
	db, err := chain.Open(path, chain.Options{Clock: testClock()})
	if err != nil {
		t.Fatal(err)
	}
	reqs := make([]chain.Request, longVerifyEntries)
	for i := range reqs {
		reqs[i] = chain.Request{Chain: "c", IdempotencyKey: fmt.Sprint("op-", i+1), Type: "t/v1", Payload: fmt.Appendf(nil, "payload %d", i+1)}
	}
	var results []chain.Result
	if err := db.Update(context.Background(), func(tx *chain.Tx) error {
		var err error
		results, err = tx.AppendBatch(reqs, results[:0])
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	entries := make([]chain.Entry, len(results))
	for i, res := range results {
		entries[i] = res.Entry
	}
	return file, entries
}

// damageLongChain runs edit on the raw entries of chain "c" of the file.
func damageLongChain(t *testing.T, path string, entries []chain.Entry, edit func(get func(uint64) []byte, put func(uint64, []byte) error, remove func(uint64) error) error) {
	t.Helper()
	bdb, err := bbolt.Open(path, 0o600, &bbolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	err = bdb.Update(func(btx *bbolt.Tx) error {
		id, err := bolt.ChainID(btx, "c")
		if err != nil {
			return err
		}
		get := func(seq uint64) []byte { return append([]byte(nil), bolt.RawEntry(btx, id, seq)...) }
		put := func(seq uint64, v []byte) error { return bolt.PutRawEntry(btx, id, seq, v) }
		remove := func(seq uint64) error { return bolt.DeleteRawEntry(btx, id, seq) }
		return edit(get, put, remove)
	})
	if err != nil {
		t.Fatal(err)
	}
}
