package segment

import (
	"encoding/binary"
	"math"
	"path/filepath"
	"testing"

	bbolt "go.etcd.io/bbolt"
)

// segmentsFile writes, for each chain, segments whose last seqs are given,
// as keys of the entry_segments bucket with a small value each.
func segmentsFile(t *testing.T, chains map[uint64][]uint64) *bbolt.DB {
	t.Helper()
	db, err := bbolt.Open(filepath.Join(t.TempDir(), "s.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	err = db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucket([]byte("entry_segments"))
		if err != nil {
			return err
		}
		for id, lasts := range chains {
			for _, last := range lasts {
				var k [KeySize]byte
				binary.BigEndian.PutUint64(k[:8], id)
				binary.BigEndian.PutUint64(k[8:], last)
				if err := b.Put(k[:], []byte{1}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// every returns n last seqs of segments of step entries each.
func every(n int, step uint64) []uint64 {
	lasts := make([]uint64, n)
	for i := range lasts {
		lasts[i] = uint64(i+1) * step
	}
	return lasts
}

// TestBuildEstimatesLongChains checks that Build maps a chain within the
// bound, gives up after IndexSampleSegments on one whose first segments
// say it is longer than the bound (even when the rest packs more entries a
// segment and would have fit: its reads then descend), and reads the whole
// chain where it cannot estimate.
func TestBuildEstimatesLongChains(t *testing.T) {
	const segmentsMax = 1_000
	// chain 3: 64 segments of 45 entries, then 900 of one entry: 964
	// segments, estimated at 64 × 3,780 / 2,880 = 84 — mapped.
	// chain 4: 64 segments of one entry, then 900 of 45: 964 segments,
	// estimated at 64 × 40,564 / 64 = 40,564 — not mapped.
	dense := append(every(64, 45), make([]uint64, 900)...)
	for i := range 900 {
		dense[64+i] = 64*45 + uint64(i+1)
	}
	sparse := append(every(64, 1), make([]uint64, 900)...)
	for i := range 900 {
		sparse[64+i] = 64 + uint64(i+1)*45
	}
	db := segmentsFile(t, map[uint64][]uint64{
		2: every(10, 45), 3: dense, 4: sparse, 5: every(1_200, 45), 6: every(500, 45),
		math.MaxUint64: every(900, 1),
	})
	err := db.View(func(tx *bbolt.Tx) error {
		for _, c := range []struct {
			id       uint64
			mapped   bool
			segments int
		}{{2, true, 10}, {3, true, 964}, {4, false, 0}, {5, false, 0}, {6, true, 500}, {math.MaxUint64, true, 900}} {
			var x Index
			got := x.build(tx.Bucket([]byte("entry_segments")).Cursor(), c.id, segmentsMax)
			if got != c.mapped || x.Built() != c.mapped || x.Count() != c.segments {
				t.Errorf("chain %d: build %v, built %v, %d segments; want %v and %d", c.id, got, x.Built(), x.Count(), c.mapped, c.segments)
			}
			if c.mapped && x.lasts[len(x.lasts)-1] == 0 {
				t.Errorf("chain %d: mapped without its last segment", c.id)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSegmentsEstimate checks the estimate's arithmetic, overflow included.
func TestSegmentsEstimate(t *testing.T) {
	for _, c := range []struct {
		first []uint64
		last  uint64
		want  uint64
	}{
		{every(64, 45), 64 * 45, 64},
		{every(64, 45), 100_000_000, 2_222_222},
		{every(64, 1), 100_000_000, 100_000_000},
		{[]uint64{0}, 10, math.MaxUint64},
		{every(64, 1), math.MaxUint64, math.MaxUint64},
	} {
		if got := segmentsEstimate(c.first, c.last); got != c.want {
			t.Errorf("segmentsEstimate(%d segments to %d, last %d) = %d, want %d", len(c.first), c.first[len(c.first)-1], c.last, got, c.want)
		}
	}
}
