package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage"
)

// segmentIndexFile writes a file whose chains hold entries of varied sizes,
// in several transactions, so that segments are extended across them.
func segmentIndexFile(t *testing.T) (*Backend, map[string][][]byte) {
	t.Helper()
	b, want := openLogOff(t)
	for i := range 5 {
		appendRaw(t, b, want, 900, string(rune('a'+i)))
	}
	return b, want
}

// readTx begins a read transaction and returns it with its tx.
func readTx(t *testing.T, b *Backend) (storage.Tx, *tx) {
	t.Helper()
	stx, err := b.Begin(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stx.Rollback() })
	return stx, stx.(*guardedTx).t
}

// TestSegmentIndexReadsAsDescents reads every entry of each chain in a
// scattered order, so that the first segmentIndexReadsMin go through
// descents and the rest through the transaction's map of the chain, and
// compares each with what was appended; seqs outside the chain are not
// found either way.
func TestSegmentIndexReadsAsDescents(t *testing.T) {
	ctx := context.Background()
	b, want := segmentIndexFile(t)
	stx, read := readTx(t, b)
	random := rand.New(rand.NewPCG(1, 2))
	for name, entries := range want {
		for _, i := range random.Perm(len(entries)) {
			got, err := stx.Entry(ctx, name, uint64(i+1))
			if err != nil || !bytes.Equal(got, entries[i]) {
				t.Fatalf("%s seq %d: %q, %v; want %q", name, i+1, got, err, entries[i])
			}
		}
		if !read.segmentIndex.built || len(read.segmentIndex.lasts) < 2 {
			t.Fatalf("%s: after %d reads the chain is not mapped (%d segments)", name, len(entries), len(read.segmentIndex.lasts))
		}
		for _, seq := range []uint64{0, uint64(len(entries) + 1), 1 << 40} {
			if _, err := stx.Entry(ctx, name, seq); !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("%s seq %d: %v, want storage.ErrNotFound", name, seq, err)
			}
		}
	}
}

// TestSegmentIndexAlternatingChains: reads that alternate between two
// chains never map either (each read of the other chain starts the count
// again) and read the same entries.
func TestSegmentIndexAlternatingChains(t *testing.T) {
	ctx := context.Background()
	b, want := segmentIndexFile(t)
	stx, read := readTx(t, b)
	for i := range 4 * segmentIndexReadsMin {
		for _, name := range []string{"a", "c"} {
			got, err := stx.Entry(ctx, name, uint64(i+1))
			if err != nil || !bytes.Equal(got, want[name][i]) {
				t.Fatalf("%s seq %d: %q, %v; want %q", name, i+1, got, err, want[name][i])
			}
		}
	}
	if read.segmentIndex.built {
		t.Fatal("alternating reads mapped a chain")
	}
}

// TestSegmentIndexDamagedSegment: in a mapped chain, a segment that does
// not decode leaves its neighbours readable, and its own entries are
// storage.ErrCorrupt, as they are through a descent.
func TestSegmentIndexDamagedSegment(t *testing.T) {
	ctx := context.Background()
	b, want := segmentIndexFile(t)
	var damagedFirst, damagedLast uint64
	err := b.db.Update(func(btx *bbolt.Tx) error {
		id := chainIDOf(t, btx, "a")
		s, ok := heldBy(btx, id, 700)
		if !ok {
			t.Fatal("no segment holds seq 700 of chain a")
		}
		damagedFirst, damagedLast = s.first, s.last
		v := bytes.Clone(s.value)
		binary.BigEndian.PutUint32(v, 0)
		return btx.Bucket(BucketSegments).Put(segmentKey(id, s.last), v)
	})
	if err != nil {
		t.Fatal(err)
	}
	stx, read := readTx(t, b)
	for i := range 2 * segmentIndexReadsMin {
		got, err := stx.Entry(ctx, "a", uint64(i+1))
		if err != nil || !bytes.Equal(got, want["a"][i]) {
			t.Fatalf("a seq %d: %q, %v; want %q", i+1, got, err, want["a"][i])
		}
	}
	if !read.segmentIndex.built {
		t.Fatal("a chain with a damaged segment is not mapped")
	}
	for _, seq := range []uint64{damagedFirst, damagedLast} {
		if _, err := stx.Entry(ctx, "a", seq); !errors.Is(err, storage.ErrCorrupt) {
			t.Fatalf("seq %d of the damaged segment: %v, want storage.ErrCorrupt", seq, err)
		}
	}
}

// TestSegmentIndexNotInWriteTransactions: a write transaction, whose
// segments change as it appends, reads every entry by descent (or from its
// builders), its own new ones included.
func TestSegmentIndexNotInWriteTransactions(t *testing.T) {
	ctx := context.Background()
	b, want := segmentIndexFile(t)
	stx, err := b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer stx.Rollback()
	write := stx.(*guardedTx).t
	entries := want["b/long-chain"]
	for i := range 100 {
		seq := uint64(len(entries) + 1)
		data := []byte{byte(i)}
		if err := stx.Append(ctx, "b/long-chain", storage.Record{Seq: seq, Data: data}, storage.Head{Seq: seq}); err != nil {
			t.Fatal(err)
		}
		entries = append(entries, data)
		for _, s := range []uint64{seq, uint64(i + 1)} {
			got, err := stx.Entry(ctx, "b/long-chain", s)
			if err != nil || !bytes.Equal(got, entries[s-1]) {
				t.Fatalf("seq %d: %q, %v; want %q", s, got, err, entries[s-1])
			}
		}
	}
	if write.segmentIndex.reads != 0 || write.segmentIndex.built {
		t.Fatalf("a write transaction counted %d reads for a map", write.segmentIndex.reads)
	}
}

// chainIDOf returns the id of a chain from the chains bucket.
func chainIDOf(t *testing.T, btx *bbolt.Tx, name string) uint64 {
	t.Helper()
	tx := &tx{tx: btx}
	c, err := tx.chain(name)
	if err != nil {
		t.Fatal(err)
	}
	return c.id
}
