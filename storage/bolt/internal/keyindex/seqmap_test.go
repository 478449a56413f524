package keyindex

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ledgerworks/ledger/storage"
)

// mapKey is a key added to a map in the tests below.
type mapKey struct {
	chainID uint64
	digest  [DigestSize]byte
	seq     uint64
}

// randomMapKeys returns n keys of distinct (chain id, digest), over a few
// chain ids, with random seqs that fit a slot.
func randomMapKeys(r *rand.Rand, n int) []mapKey {
	keys := make([]mapKey, 0, n)
	seen := map[[2]any]bool{}
	for len(keys) < n {
		var k mapKey
		k.chainID = r.Uint64N(4)
		for i := range k.digest {
			k.digest[i] = byte(r.Uint32())
		}
		k.seq = r.Uint64N(1<<SeqMapSeqBits - 1)
		if id := [2]any{k.chainID, k.digest}; !seen[id] {
			seen[id] = true
			keys = append(keys, k)
		}
	}
	return keys
}

// checkFound fails unless find gives the key's own seq, or the seq of a
// key added to the map that has the same fingerprint (a candidate a reader
// would reject): a fingerprint is 24 bits, not the key.
func checkFound(t *testing.T, m *SeqMap, k mapKey, bySeq map[uint64][]mapKey) {
	t.Helper()
	got, ok := m.Find(k.chainID, k.digest[:])
	if ok && got == k.seq {
		return
	}
	_, want := m.hashes(k.chainID, k.digest[:])
	for _, other := range bySeq[got] {
		if _, fp := m.hashes(other.chainID, other.digest[:]); ok && fp == want {
			return
		}
	}
	t.Fatalf("find(%d, %x) = %d, %v; added with seq %d", k.chainID, k.digest, got, ok, k.seq)
}

// TestSeqMapRoundTrip adds random keys up to the load a filter's capacity
// gives (80% of the slots) and finds each; keys never added, among them the
// added digests under other chain ids, find nothing (or a candidate of the
// same fingerprint).
func TestSeqMapRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const capacity = 20_000
	m := newSeqMap(0, capacity, SeqMapBytesMaxDefault)
	if m == nil || len(m.Slots) != capacity*seqMapLoadDen/seqMapLoadNum {
		t.Fatalf("newSeqMap(%d) = %v", capacity, m)
	}
	keys := randomMapKeys(r, capacity*2)
	added, absent := keys[:capacity], keys[capacity:]
	bySeq := map[uint64][]mapKey{}
	for _, k := range added {
		m.add(k.chainID, k.digest[:], k.seq)
		bySeq[k.seq] = append(bySeq[k.seq], k)
	}
	if m.Used != capacity {
		t.Fatalf("used = %d after %d adds below the fill limit", m.Used, capacity)
	}
	for _, k := range added {
		checkFound(t, m, k, bySeq)
	}
	misses := 0
	for _, k := range absent {
		for _, id := range []uint64{k.chainID, k.chainID + 4} { // +4: an id no key was added under
			got, ok := m.Find(id, k.digest[:])
			if !ok {
				misses++
				continue
			}
			_, want := m.hashes(id, k.digest[:])
			sameFingerprint := false
			for _, other := range bySeq[got] {
				if _, fp := m.hashes(other.chainID, other.digest[:]); fp == want {
					sameFingerprint = true
				}
			}
			if !sameFingerprint {
				t.Fatalf("find(%d, %x) of a key never added = %d, true, the seq of no key of its fingerprint", id, k.digest, got)
			}
		}
	}
	// The same digest under another chain id is another key.
	for _, k := range added[:1000] {
		if got, ok := m.Find(k.chainID+4, k.digest[:]); ok && got == k.seq {
			t.Fatalf("find(%d, %x) gives the seq of chain %d's key", k.chainID+4, k.digest, k.chainID)
		}
	}
	// 24-bit fingerprints: a candidate for a key never added is rare.
	if misses < len(absent)*2*99/100 {
		t.Fatalf("%d of %d keys never added found a candidate", len(absent)*2-misses, len(absent)*2)
	}
}

// TestSeqMapSeqBounds: a seq that does not fit a slot's 40 bits (seq+1 is
// stored) is left out, the largest that fits round-trips.
func TestSeqMapSeqBounds(t *testing.T) {
	m := newSeqMap(0, 100, SeqMapBytesMaxDefault)
	digest := func(i int) []byte { d := storage.KeyDigest(fmt.Sprint("k", i)); return d[:] }
	for i, seq := range []uint64{1<<SeqMapSeqBits - 1, 1 << SeqMapSeqBits, 1<<64 - 1} {
		m.add(1, digest(i), seq)
		if got, ok := m.Find(1, digest(i)); ok {
			t.Fatalf("seq %d was added (find = %d)", seq, got)
		}
	}
	if m.Used != 0 {
		t.Fatalf("used = %d after adds of seqs too large", m.Used)
	}
	if !m.Partial.Load() {
		t.Fatal("a map that left a key out is not partial: it would rule the key out")
	}
	m = newSeqMap(0, 100, SeqMapBytesMaxDefault)
	for i, seq := range []uint64{0, 1, 1<<SeqMapSeqBits - 2} {
		m.add(2, digest(i), seq)
		if got, ok := m.Find(2, digest(i)); !ok || got != seq {
			t.Fatalf("seq %d: find = %d, %v", seq, got, ok)
		}
	}
	if m.Partial.Load() {
		t.Fatal("a map that took every key is partial")
	}
}

// TestSeqMapStopsAtFillLimit adds twice as many keys as the map's slots:
// it takes them up to 90% of its slots and no more, so that a search always
// meets an open slot, and finds still end, for keys taken and not.
func TestSeqMapStopsAtFillLimit(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	m := newSeqMap(0, 800, SeqMapBytesMaxDefault) // 1,000 slots
	keys := randomMapKeys(r, 2*len(m.Slots))
	bySeq := map[uint64][]mapKey{}
	for i, k := range keys {
		if m.Partial.Load() != (uint64(i) > uint64(len(m.Slots))*SeqMapFullNum/SeqMapFullDen) {
			t.Fatalf("partial %v after %d adds to %d slots", m.Partial.Load(), i, len(m.Slots))
		}
		m.add(k.chainID, k.digest[:], k.seq)
		bySeq[k.seq] = append(bySeq[k.seq], k)
	}
	limit := uint64(len(m.Slots)) * SeqMapFullNum / SeqMapFullDen
	if !m.Partial.Load() {
		t.Fatal("a map that stopped taking keys is not partial")
	}
	filled := uint64(0)
	for _, s := range m.Slots {
		if s != 0 {
			filled++
		}
	}
	if m.Used != limit || filled != limit {
		t.Fatalf("%d slots: used %d, %d filled, after %d adds; want %d", len(m.Slots), m.Used, filled, len(keys), limit)
	}
	for _, k := range keys[:limit] { // added in order until the limit
		checkFound(t, m, k, bySeq)
	}
	for _, k := range keys[limit:] {
		m.Find(k.chainID, k.digest[:]) // must return
	}
}

// TestSeqMapFindOnFullMap fills every slot directly (adds never do) and
// checks that find ends after one pass: without the key's fingerprint it
// finds nothing, and one in the slot before the key's start is found after
// the search wraps around the end.
func TestSeqMapFindOnFullMap(t *testing.T) {
	m := newSeqMap(0, 80, SeqMapBytesMaxDefault) // 100 slots
	digest := storage.KeyDigest("the key")
	start, fingerprint := m.hashes(7, digest[:])
	other := (fingerprint + 1<<SeqMapSeqBits) // another fingerprint
	for i := range m.Slots {
		m.Slots[i] = other | uint64(i+1)
	}
	if seq, ok := m.Find(7, digest[:]); ok {
		t.Fatalf("find on a full map without the fingerprint = %d, true", seq)
	}
	before := (start + uint64(len(m.Slots)) - 1) % uint64(len(m.Slots))
	m.Slots[before] = fingerprint | 42
	if seq, ok := m.Find(7, digest[:]); !ok || seq != 41 {
		t.Fatalf("find of the fingerprint one slot before the start = %d, %v; want 41", seq, ok)
	}
}

// TestNewSeqMapBound: no map for a negative bound or one below the map's
// size (1.25 slots of 8 bytes per key of capacity); a map at the bound.
func TestNewSeqMapBound(t *testing.T) {
	for _, c := range []struct {
		keys, capacity uint64
		bytesMax       int64
		slots          int // 0: no map
	}{
		{0, 80, -1, 0},
		{80, 80, -1, 0},
		{0, 80, 800, 100},  // sized for the capacity at 80%
		{80, 80, 800, 100}, // the keys there are fill 80% of it
		{0, 80, 799, 99},   // the bound's size: smaller than the capacity wants
		{79, 80, 799, 99},  // 79 keys fill under 80% of 99 slots
		{80, 80, 799, 0},   // 80 keys would fill more than 80% of 99 slots
		{0, 0, 800, 1},     // never an empty slice
		// Under the default bound: a filter built at 30,000,000 keys has
		// none, one built at 20,000,000 (for 60,000,000) has the bound's.
		{30_000_000, 90_000_000, SeqMapBytesMaxDefault, 0},
		{20_000_000, 60_000_000, SeqMapBytesMaxDefault, SeqMapBytesMaxDefault / seqMapSlotBytes},
	} {
		m := newSeqMap(c.keys, c.capacity, c.bytesMax)
		got := 0
		if m != nil {
			got = len(m.Slots)
		}
		if got != c.slots {
			t.Errorf("newSeqMap(%d keys, capacity %d, %d bytes) has %d slots, want %d", c.keys, c.capacity, c.bytesMax, got, c.slots)
		}
	}
}

// TestSeqMapOneKeyInManyChains: the same keys in 10,000 chains (an
// account's "deposit-1" in each account) share their digests, and a map
// that began their searches at one slot per digest grew one cluster per
// key, which every search walked: 5,000 slots at the mean. The chain's
// offset spreads them as distinct keys are spread.
func TestSeqMapOneKeyInManyChains(t *testing.T) {
	const chains, keysPerChain = 10_000, 10
	m := newSeqMap(0, max(chains*keysPerChain*FilterGrowth, FilterCapacityMin), SeqMapBytesMaxDefault)
	var digests [keysPerChain][DigestSize]byte
	for k := range digests {
		digests[k] = storage.KeyDigest(fmt.Sprintf("deposit-%d", k))
	}
	for id := uint64(1); id <= chains; id++ {
		for k := range digests {
			m.add(id, digests[k][:], id*keysPerChain+uint64(k))
		}
	}
	walked, longest := 0, 0
	for id := uint64(1); id <= chains; id++ {
		for k := range digests {
			seq, ok := m.Find(id, digests[k][:])
			if !ok || seq != id*keysPerChain+uint64(k) {
				t.Fatalf("find(chain %d, deposit-%d) = %d, %v", id, k, seq, ok)
			}
			n := slotsWalked(m, id, digests[k][:])
			walked += n
			longest = max(longest, n)
		}
	}
	if mean := float64(walked) / (chains * keysPerChain); mean > 2 || longest > 64 {
		t.Fatalf("a search walks %.1f slots at the mean, %d at most: the chains' copies of a key cluster", mean, longest)
	}
}

// slotsWalked counts the slots find reads before the key's own slot.
func slotsWalked(m *SeqMap, chainID uint64, digest []byte) int {
	i, fingerprint := m.hashes(chainID, digest)
	for n := range len(m.Slots) {
		if m.Slots[i] == 0 || m.Slots[i]&^(1<<SeqMapSeqBits-1) == fingerprint {
			return n
		}
		i = (i + 1) % uint64(len(m.Slots))
	}
	return len(m.Slots)
}
