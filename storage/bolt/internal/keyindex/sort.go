package keyindex

import (
	"encoding/binary"
	"math/bits"
	"slices"
)

// RecordKey is a run record as big-endian words: comparing three words
// orders records as comparing their first keyRecordPrefix bytes does, at a
// fraction of the cost of bytes.Compare.
type RecordKey struct {
	chainID, digestHigh, digestLow, seq uint64
}

func LoadRecord(rec []byte) RecordKey {
	return RecordKey{
		chainID:    binary.BigEndian.Uint64(rec[0:8]),
		digestHigh: binary.BigEndian.Uint64(rec[8:16]),
		digestLow:  binary.BigEndian.Uint64(rec[16:24]),
		seq:        binary.BigEndian.Uint64(rec[24:32]),
	}
}

func (r RecordKey) put(rec []byte) {
	binary.BigEndian.PutUint64(rec[0:8], r.chainID)
	binary.BigEndian.PutUint64(rec[8:16], r.digestHigh)
	binary.BigEndian.PutUint64(rec[16:24], r.digestLow)
	binary.BigEndian.PutUint64(rec[24:32], r.seq)
}

// CompareRecords orders records by their prefix (chain id, digest).
func CompareRecords(a, b RecordKey) int {
	switch {
	case a.chainID != b.chainID:
		return cmpUint64(a.chainID, b.chainID)
	case a.digestHigh != b.digestHigh:
		return cmpUint64(a.digestHigh, b.digestHigh)
	}
	return cmpUint64(a.digestLow, b.digestLow)
}

func cmpUint64(a, b uint64) int {
	if a < b {
		return -1
	}
	if a > b {
		return 1
	}
	return 0
}

// SortRecords sorts records in place by their prefix: chain id, then
// digest. A run of bucketSortMin records or more is sorted by bucketSort;
// a smaller one, or one of more chains than bucketSortChainsMax, by
// comparisons.
func SortRecords(records []byte) {
	if len(records)/RecordSize >= bucketSortMin {
		if sorted, ok := bucketSort(records); ok {
			putRecords(records, sorted)
			return
		}
	}
	sortRecordsByComparison(records)
}

// sortRecordsByComparison is sortRecords by a comparison sort alone.
func sortRecordsByComparison(records []byte) {
	keys := make([]RecordKey, len(records)/RecordSize)
	for i := range keys {
		keys[i] = LoadRecord(records[i*RecordSize:])
	}
	slices.SortFunc(keys, CompareRecords)
	putRecords(records, keys)
}

// putRecords writes keys over records, in order.
func putRecords(records []byte, keys []RecordKey) {
	for i, k := range keys {
		k.put(records[i*RecordSize:])
	}
}

const (
	// bucketSortMin is the fewest records sortRecords bucket-sorts; fewer
	// cost less to compare than to count.
	bucketSortMin = 1024
	// bucketSortChainsMax bounds the chains of the records bucketSort
	// sorts: its buckets are per chain.
	bucketSortChainsMax = 4096
	// bucketRecords is about how many records of uniform digests share a
	// bucket: between half of it and all of it, since a chain's buckets
	// are a power of two.
	bucketRecords = 4
	// bucketInsertionMax is the largest bucket sorted by insertion; a
	// larger one (digests that are not uniform) is sorted by comparisons.
	bucketInsertionMax = 16
)

// bucketSort returns the run records sorted by chain and digest, or false
// (nothing done) when they hold more than bucketSortChainsMax chains.
// Digests are uniform, so the records are distributed into buckets by
// chain and by their digests' leading bits, about bucketRecords to a
// bucket, each bucket then sorted on its own: linear work where a
// comparison sort does n log n comparisons, each a branch it cannot
// predict. Buckets are in the records' order (a lower bucket holds only
// lower records), so the result is sorted whatever the digests are; a
// skewed set only makes larger buckets.
func bucketSort(records []byte) ([]RecordKey, bool) {
	n := len(records) / RecordSize
	chains, buckets, ok := chainRanks(records)
	if !ok {
		return nil, false
	}
	// Each chain gets a power of two of buckets, indexed by its digests'
	// leading bits; shift 64 (one bucket) maps every digest to 0. buckets
	// holds each record's chain rank, then its bucket.
	shifts := make([]uint8, len(chains))
	bases := make([]uint32, len(chains)+1)
	for c, count := range chains {
		leading := bits.Len(uint(max(1, (count+bucketRecords-1)/bucketRecords) - 1))
		shifts[c] = uint8(64 - leading)
		bases[c+1] = bases[c] + 1<<leading
	}
	starts := make([]int, bases[len(chains)]+1)
	for i, rank := range buckets {
		digestHigh := binary.BigEndian.Uint64(records[i*RecordSize+8:])
		b := bases[rank] + uint32(digestHigh>>shifts[rank])
		buckets[i] = b
		starts[b+1]++
	}
	for b := 1; b < len(starts); b++ {
		starts[b] += starts[b-1]
	}
	sorted := make([]RecordKey, n)
	next := slices.Clone(starts[:len(starts)-1])
	for i, b := range buckets {
		sorted[next[b]] = LoadRecord(records[i*RecordSize:])
		next[b]++
	}
	for b := 0; b+1 < len(starts); b++ {
		sortBucket(sorted[starts[b]:starts[b+1]])
	}
	return sorted, true
}

// chainRanks returns how many records each chain holds, in chain id order,
// and each record's chain's index in that order; ok is false when the
// records hold more than bucketSortChainsMax chains.
func chainRanks(records []byte) (counts []int, ranks []uint32, ok bool) {
	n := len(records) / RecordSize
	index := make(map[uint64]uint32)
	ids := []uint64{}
	ranks = make([]uint32, n)
	last, lastIndex := uint64(0), uint32(0)
	for i := range n {
		id := binary.BigEndian.Uint64(records[i*RecordSize:])
		if i == 0 || id != last {
			j, seen := index[id]
			if !seen {
				if len(ids) == bucketSortChainsMax {
					return nil, nil, false
				}
				j = uint32(len(ids))
				index[id] = j
				ids = append(ids, id)
			}
			last, lastIndex = id, j
		}
		ranks[i] = lastIndex
	}
	// Indexes are in order of first appearance; ranks are in id order.
	order := make([]uint32, len(ids))
	for j := range order {
		order[j] = uint32(j)
	}
	slices.SortFunc(order, func(a, b uint32) int { return cmpUint64(ids[a], ids[b]) })
	rankOf := make([]uint32, len(ids))
	for rank, j := range order {
		rankOf[j] = uint32(rank)
	}
	counts = make([]int, len(ids))
	for i, j := range ranks {
		ranks[i] = rankOf[j]
		counts[ranks[i]]++
	}
	return counts, ranks, true
}

// sortBucket sorts one bucket: by insertion when it is as small as
// uniform digests make it, by comparisons otherwise.
func sortBucket(bucket []RecordKey) {
	if len(bucket) > bucketInsertionMax {
		slices.SortFunc(bucket, CompareRecords)
		return
	}
	for i := 1; i < len(bucket); i++ {
		k := bucket[i]
		j := i
		for ; j > 0 && CompareRecords(k, bucket[j-1]) < 0; j-- {
			bucket[j] = bucket[j-1]
		}
		bucket[j] = k
	}
}
