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
	"github.com/ledgerworks/ledger/storage/bolt/internal/segment"
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
		if !read.segmentIndex.Built() || read.segmentIndex.Count() < 2 {
			t.Fatalf("%s: after %d reads the chain is not mapped (%d segments)", name, len(entries), read.segmentIndex.Count())
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
	for i := range 4 * segment.IndexReadsMin {
		for _, name := range []string{"a", "c"} {
			got, err := stx.Entry(ctx, name, uint64(i+1))
			if err != nil || !bytes.Equal(got, want[name][i]) {
				t.Fatalf("%s seq %d: %q, %v; want %q", name, i+1, got, err, want[name][i])
			}
		}
	}
	if read.segmentIndex.Built() {
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
		damagedFirst, damagedLast = s.First, s.Last
		v := bytes.Clone(s.Value)
		binary.BigEndian.PutUint32(v, 0)
		return btx.Bucket(BucketSegments).Put(segment.Key(id, s.Last), v)
	})
	if err != nil {
		t.Fatal(err)
	}
	stx, read := readTx(t, b)
	for i := range 2 * segment.IndexReadsMin {
		got, err := stx.Entry(ctx, "a", uint64(i+1))
		if err != nil || !bytes.Equal(got, want["a"][i]) {
			t.Fatalf("a seq %d: %q, %v; want %q", i+1, got, err, want["a"][i])
		}
	}
	if !read.segmentIndex.Built() {
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
	if write.segmentIndex.Reads() != 0 || write.segmentIndex.Built() {
		t.Fatalf("a write transaction counted %d reads for a map", write.segmentIndex.Reads())
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

// TestSegmentIndexDamagedHeader: the map's read of a segment, which knows
// the segment's seqs from its neighbour and reads the count and offsets it
// needs at once, finds every damage of the header that a descent's decode
// finds: a count that disagrees with the map, a last offset that does not
// end the value, an entry's offset beyond the data. Each damaged entry is
// storage.ErrCorrupt, read through the map, and the entries of the
// segments around it stay readable.
func TestSegmentIndexDamagedHeader(t *testing.T) {
	damages := []struct {
		name string
		// damage changes the header of a segment of n entries; entry is
		// the index of the one entry that must fail, or -1 for all.
		damage func(v []byte, n int)
		entry  int
	}{
		{"count one more", func(v []byte, n int) { binary.BigEndian.PutUint32(v, uint32(n+1)) }, -1},
		{"count one less", func(v []byte, n int) { binary.BigEndian.PutUint32(v, uint32(n-1)) }, -1},
		{"last offset short", func(v []byte, n int) {
			o := segment.CountSize + segment.OffsetSize*(n-1)
			binary.BigEndian.PutUint32(v[o:], binary.BigEndian.Uint32(v[o:])-1)
		}, -1},
		{"an entry's end past the data", func(v []byte, n int) {
			binary.BigEndian.PutUint32(v[segment.CountSize+segment.OffsetSize*2:], uint32(len(v)))
		}, 2},
		{"an entry's end before its start", func(v []byte, n int) {
			binary.BigEndian.PutUint32(v[segment.CountSize+segment.OffsetSize*5:], 0)
		}, 5},
	}
	for _, d := range damages {
		t.Run(d.name, func(t *testing.T) {
			ctx := context.Background()
			b, want := segmentIndexFile(t)
			var damaged segment.Segment
			err := b.db.Update(func(btx *bbolt.Tx) error {
				id := chainIDOf(t, btx, "a")
				s, ok := heldBy(btx, id, 700)
				if !ok || s.First == 1 || s.Count < 8 {
					t.Fatalf("the segment of seq 700 of chain a: %v, first %d, %d entries", ok, s.First, s.Count)
				}
				damaged = s
				v := bytes.Clone(s.Value)
				d.damage(v, s.Count)
				return btx.Bucket(BucketSegments).Put(segment.Key(id, s.Last), v)
			})
			if err != nil {
				t.Fatal(err)
			}
			stx, read := readTx(t, b)
			for i := range segment.IndexReadsMin {
				if _, err := stx.Entry(ctx, "a", uint64(i+1)); err != nil {
					t.Fatal(err)
				}
			}
			if !read.segmentIndex.Built() {
				t.Fatal("the chain is not mapped")
			}
			for seq := damaged.First - 3; seq <= damaged.Last+3; seq++ {
				got, err := stx.Entry(ctx, "a", seq)
				inside := seq >= damaged.First && seq <= damaged.Last
				if inside && (d.entry < 0 || seq == damaged.First+uint64(d.entry)) {
					if !errors.Is(err, storage.ErrCorrupt) {
						t.Fatalf("seq %d of the damaged segment (%d..%d): %q, %v; want storage.ErrCorrupt", seq, damaged.First, damaged.Last, got, err)
					}
					continue
				}
				if inside && d.entry >= 0 && seq == damaged.First+uint64(d.entry)+1 {
					continue // begins where the damaged offset says: read as a descent reads it
				}
				if err != nil || !bytes.Equal(got, want["a"][seq-1]) {
					t.Fatalf("seq %d: %q, %v; want %q", seq, got, err, want["a"][seq-1])
				}
			}
		})
	}
}
