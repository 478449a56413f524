package bolt

import (
	"encoding/binary"
	"slices"
	"sort"
	"testing"

	"pgregory.net/rapid"
)

// TestSearchChunk checks the search in a run's chunk, which compares
// words, against a binary search over the records' bytes, on chunks of one
// chain or several, with uniform digests and with digests bunched at the
// ends of the range, for targets that are in the chunk, between its
// records and outside it.
func TestSearchChunk(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, keyChunkRecords).Draw(t, "records")
		chains := rapid.IntRange(1, 3).Draw(t, "chains")
		digest := rapid.OneOf(
			rapid.Uint64(),
			rapid.Uint64Range(0, 16),
			rapid.Uint64Range(^uint64(0)-16, ^uint64(0)),
		)
		records := make([]recordKey, n)
		for i := range records {
			records[i] = recordKey{
				chainID:    uint64(rapid.IntRange(1, chains).Draw(t, "chain")),
				digestHigh: digest.Draw(t, "high"),
				digestLow:  rapid.Uint64Range(0, 3).Draw(t, "low"),
				seq:        uint64(i + 1),
			}
		}
		slices.SortFunc(records, compareRecords)
		records = slices.CompactFunc(records, func(a, b recordKey) bool { return compareRecords(a, b) == 0 })
		chunk := make([]byte, len(records)*keyRecordSize)
		for i, r := range records {
			r.put(chunk[i*keyRecordSize:])
		}
		// Every record, each record's neighbours on either side (between
		// records, or past the ends), and a drawn target.
		var targets []recordPrefix
		for _, r := range records {
			p := recordPrefix{r.chainID, r.digestHigh, r.digestLow}
			targets = append(targets, p, recordPrefix{p.chainID, p.digestHigh, p.digestLow - 1}, recordPrefix{p.chainID, p.digestHigh, p.digestLow + 1},
				recordPrefix{p.chainID, p.digestHigh - 1, p.digestLow}, recordPrefix{p.chainID, p.digestHigh + 1, p.digestLow})
		}
		targets = append(targets, recordPrefix{uint64(rapid.IntRange(0, chains+1).Draw(t, "target chain")), digest.Draw(t, "target high"), rapid.Uint64Range(0, 4).Draw(t, "target low")})
		for _, want := range targets {
			var target [keyRecordPrefix]byte
			binary.BigEndian.PutUint64(target[0:], want.chainID)
			binary.BigEndian.PutUint64(target[8:], want.digestHigh)
			binary.BigEndian.PutUint64(target[16:], want.digestLow)
			if loadPrefix(target[:], 0) != want {
				t.Fatalf("loadPrefix of the target = %+v, want %+v", loadPrefix(target[:], 0), want)
			}
			expected := sort.Search(len(records), func(i int) bool {
				return string(chunk[i*keyRecordSize:i*keyRecordSize+keyRecordPrefix]) >= string(target[:])
			})
			if got := searchChunk(chunk, want); got != expected {
				t.Fatalf("searchChunk(%+v) = %d, want %d (%d records)", want, got, expected, len(records))
			}
		}
	})
}
