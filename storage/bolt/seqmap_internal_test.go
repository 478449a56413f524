package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ledgerworks/ledger/storage"
)

// keyBeforeBar is the EntryKey of these tests' entries: the key, then '|'
// and a payload, or the key alone (as filterLedger.appendKeys writes it).
func keyBeforeBar(entry []byte) ([]byte, bool) {
	key, _, _ := bytes.Cut(entry, []byte("|"))
	return key, len(key) > 0
}

// HasSeqMap reports whether the handle keeps a seq map now, so that the
// external tests can tell a handle that reads candidates from one that
// does not.
func HasSeqMap(b *Backend) bool {
	f := b.cache.filter.Load()
	return f != nil && f.seqs != nil
}

// SeqMapPartial reports whether the handle's seq map had to leave a key
// out, and so no longer rules keys out in place of the filter.
func SeqMapPartial(b *Backend) bool {
	f := b.cache.filter.Load()
	return f != nil && f.seqs != nil && f.seqs.partial.Load()
}

// SeqMapCandidate returns the seq the handle's seq map gives for a key of a
// chain the file holds (ok false: no map, no such chain, or no candidate).
func SeqMapCandidate(b *Backend, chain, key string) (seq uint64, ok bool) {
	f := b.cache.filter.Load()
	id, known := b.cache.chains.get(chain)
	if f == nil || f.seqs == nil || !known {
		return 0, false
	}
	digest := KeyDigest(key)
	return f.seqs.find(id, digest[:])
}

// PlantSeqMapCandidate makes the handle's seq map answer seq for the key,
// a fault ReadKey must correct: the map gives candidates, not answers.
func PlantSeqMapCandidate(b *Backend, chain, key string, seq uint64) error {
	f := b.cache.filter.Load()
	if f == nil || f.seqs == nil {
		return errors.New("the handle has no seq map")
	}
	id, known := b.cache.chains.get(chain)
	if !known {
		return fmt.Errorf("chain %q has no id in the handle's map of chains", chain)
	}
	digest := KeyDigest(key)
	b.cache.mu.Lock() // the committer adds under it
	f.seqs.plant(id, digest[:], seq)
	b.cache.mu.Unlock()
	if got, ok := f.seqs.find(id, digest[:]); !ok || got != seq {
		return fmt.Errorf("planted seq %d for %q of chain %q, the map gives %d, %v", seq, key, chain, got, ok)
	}
	return nil
}

// plant puts a slot with the key's fingerprint and seq where the key's
// search begins, and moves the filled slots from there on (up to the open
// slot that ends them) one slot further, so that the key's search meets the
// planted slot first and every other key is still found: its slot moves,
// the slots between its start and it stay filled. The map must have an open
// slot, and no other goroutine may add to it meanwhile.
func (m *seqMap) plant(chainID uint64, digest []byte, seq uint64) {
	start, fingerprint := m.hashes(chainID, digest)
	n := uint64(len(m.slots))
	end := start
	for atomic.LoadUint64(&m.slots[end]) != 0 {
		if end = (end + 1) % n; end == start {
			panic("plant: the seq map has no open slot")
		}
	}
	for i := end; i != start; {
		prev := (i + n - 1) % n
		atomic.StoreUint64(&m.slots[i], atomic.LoadUint64(&m.slots[prev]))
		i = prev
	}
	atomic.StoreUint64(&m.slots[start], fingerprint|(seq+1))
	m.used++
}

// mapKey is a key added to a map in the tests below.
type mapKey struct {
	chainID uint64
	digest  [KeyDigestSize]byte
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
		k.seq = r.Uint64N(1<<seqMapSeqBits - 1)
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
func checkFound(t *testing.T, m *seqMap, k mapKey, bySeq map[uint64][]mapKey) {
	t.Helper()
	got, ok := m.find(k.chainID, k.digest[:])
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
	if m == nil || len(m.slots) != capacity*seqMapLoadDen/seqMapLoadNum {
		t.Fatalf("newSeqMap(%d) = %v", capacity, m)
	}
	keys := randomMapKeys(r, capacity*2)
	added, absent := keys[:capacity], keys[capacity:]
	bySeq := map[uint64][]mapKey{}
	for _, k := range added {
		m.add(k.chainID, k.digest[:], k.seq)
		bySeq[k.seq] = append(bySeq[k.seq], k)
	}
	if m.used != capacity {
		t.Fatalf("used = %d after %d adds below the fill limit", m.used, capacity)
	}
	for _, k := range added {
		checkFound(t, m, k, bySeq)
	}
	misses := 0
	for _, k := range absent {
		for _, id := range []uint64{k.chainID, k.chainID + 4} { // +4: an id no key was added under
			got, ok := m.find(id, k.digest[:])
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
		if got, ok := m.find(k.chainID+4, k.digest[:]); ok && got == k.seq {
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
	digest := func(i int) []byte { d := KeyDigest(fmt.Sprint("k", i)); return d[:] }
	for i, seq := range []uint64{1<<seqMapSeqBits - 1, 1 << seqMapSeqBits, 1<<64 - 1} {
		m.add(1, digest(i), seq)
		if got, ok := m.find(1, digest(i)); ok {
			t.Fatalf("seq %d was added (find = %d)", seq, got)
		}
	}
	if m.used != 0 {
		t.Fatalf("used = %d after adds of seqs too large", m.used)
	}
	if !m.partial.Load() {
		t.Fatal("a map that left a key out is not partial: it would rule the key out")
	}
	m = newSeqMap(0, 100, SeqMapBytesMaxDefault)
	for i, seq := range []uint64{0, 1, 1<<seqMapSeqBits - 2} {
		m.add(2, digest(i), seq)
		if got, ok := m.find(2, digest(i)); !ok || got != seq {
			t.Fatalf("seq %d: find = %d, %v", seq, got, ok)
		}
	}
	if m.partial.Load() {
		t.Fatal("a map that took every key is partial")
	}
}

// TestSeqMapStopsAtFillLimit adds twice as many keys as the map's slots:
// it takes them up to 90% of its slots and no more, so that a search always
// meets an open slot, and finds still end, for keys taken and not.
func TestSeqMapStopsAtFillLimit(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	m := newSeqMap(0, 800, SeqMapBytesMaxDefault) // 1,000 slots
	keys := randomMapKeys(r, 2*len(m.slots))
	bySeq := map[uint64][]mapKey{}
	for i, k := range keys {
		if m.partial.Load() != (uint64(i) > uint64(len(m.slots))*seqMapFullNum/seqMapFullDen) {
			t.Fatalf("partial %v after %d adds to %d slots", m.partial.Load(), i, len(m.slots))
		}
		m.add(k.chainID, k.digest[:], k.seq)
		bySeq[k.seq] = append(bySeq[k.seq], k)
	}
	limit := uint64(len(m.slots)) * seqMapFullNum / seqMapFullDen
	if !m.partial.Load() {
		t.Fatal("a map that stopped taking keys is not partial")
	}
	filled := uint64(0)
	for _, s := range m.slots {
		if s != 0 {
			filled++
		}
	}
	if m.used != limit || filled != limit {
		t.Fatalf("%d slots: used %d, %d filled, after %d adds; want %d", len(m.slots), m.used, filled, len(keys), limit)
	}
	for _, k := range keys[:limit] { // added in order until the limit
		checkFound(t, m, k, bySeq)
	}
	for _, k := range keys[limit:] {
		m.find(k.chainID, k.digest[:]) // must return
	}
}

// TestSeqMapFindOnFullMap fills every slot directly (adds never do) and
// checks that find ends after one pass: without the key's fingerprint it
// finds nothing, and one in the slot before the key's start is found after
// the search wraps around the end.
func TestSeqMapFindOnFullMap(t *testing.T) {
	m := newSeqMap(0, 80, SeqMapBytesMaxDefault) // 100 slots
	digest := KeyDigest("the key")
	start, fingerprint := m.hashes(7, digest[:])
	other := (fingerprint + 1<<seqMapSeqBits) // another fingerprint
	for i := range m.slots {
		m.slots[i] = other | uint64(i+1)
	}
	if seq, ok := m.find(7, digest[:]); ok {
		t.Fatalf("find on a full map without the fingerprint = %d, true", seq)
	}
	before := (start + uint64(len(m.slots)) - 1) % uint64(len(m.slots))
	m.slots[before] = fingerprint | 42
	if seq, ok := m.find(7, digest[:]); !ok || seq != 41 {
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
			got = len(m.slots)
		}
		if got != c.slots {
			t.Errorf("newSeqMap(%d keys, capacity %d, %d bytes) has %d slots, want %d", c.keys, c.capacity, c.bytesMax, got, c.slots)
		}
	}
}

// appendEntries appends the keys to chain in one transaction, each entry
// "key|" and a payload of 300 bytes, so that a chain of a hundred entries
// fills a few segments.
func (l *filterLedger) appendEntries(chain string, keys ...string) {
	l.t.Helper()
	ctx := context.Background()
	stx, err := l.b.Begin(ctx, true)
	if err != nil {
		l.t.Fatal(err)
	}
	defer stx.Rollback()
	seq := l.heads[chain]
	for _, key := range keys {
		seq++
		data := []byte(key + "|" + strings.Repeat("x", 300))
		if err := stx.Append(ctx, chain, storage.Record{Seq: seq, IdempotencyKey: key, Data: data}, storage.Head{Seq: seq}); err != nil {
			l.t.Fatalf("append %q to %s: %v", key, chain, err)
		}
	}
	if err := stx.Commit(); err != nil {
		l.t.Fatal(err)
	}
	l.heads[chain] = seq
	l.keys += len(keys)
}

func keyNames(prefix string, from, to int) []string {
	var keys []string
	for i := from; i < to; i++ {
		keys = append(keys, fmt.Sprintf("%s-%d", prefix, i))
	}
	return keys
}

// readByTransaction is what a read transaction's lookup (the filter and the
// key runs, never the seq map) and read of the entry give for a key.
func readByTransaction(t *testing.T, b *Backend, chain, key string) (seq uint64, data []byte, found bool) {
	t.Helper()
	ctx := context.Background()
	stx, err := b.Begin(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	defer stx.Rollback()
	seq, err = stx.LookupKey(ctx, chain, key)
	if errors.Is(err, storage.ErrNotFound) {
		return 0, nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	if data, err = stx.Entry(ctx, chain, seq); err != nil {
		t.Fatal(err)
	}
	return seq, data, true
}

// plantedLedger writes chain a (ids are given in order: 1), seqs 1..101,
// and chain b (2), seqs 1..151, in small and large transactions (keys in
// the recent B-tree and in runs); the key "both" is a's seq 101 and b's
// seq 50. With the log it checkpoints them and then commits "a-mem" (a's
// seq 102) to the memory table only. Every key of the file must be in the
// seq map with its seq.
func plantedLedger(t *testing.T, opts Options) *filterLedger {
	t.Helper()
	l := newFilterLedgerWith(t, opts)
	l.appendEntries("a", keyNames("a", 0, 40)...)
	l.appendEntries("a", keyNames("a", 40, 50)...)
	l.appendEntries("a", append(keyNames("a", 50, 100), "both")...)
	l.appendEntries("b", append(append(keyNames("b", 0, 49), "both"), keyNames("b", 49, 100)...)...)
	l.appendEntries("b", keyNames("b", 100, 150)...)
	if opts.Log == LogOn {
		if err := l.b.forceCheckpoint(context.Background()); err != nil {
			t.Fatal(err)
		}
		l.appendEntries("a", "a-mem")
	}
	if !HasSeqMap(l.b) {
		t.Fatal("no seq map on a writable handle with an EntryKey")
	}
	for chain, n := range map[string]int{"a": 100, "b": 150} {
		for _, key := range append(keyNames(chain, 0, n), "both") {
			want, _, _ := readByTransaction(t, l.b, chain, key)
			if got, ok := SeqMapCandidate(l.b, chain, key); !ok || got != want {
				t.Fatalf("seq map for %q of %s: %d, %v; the index has %d", key, chain, got, ok, want)
			}
		}
	}
	return l
}

// TestSeqMapPlantedCandidates plants wrong candidates in the seq map, each
// where the key's search meets it first, and checks that ReadKey answers
// as the key runs do: a candidate is read and kept only when its entry
// holds the key. The candidates name another key's entry, seqs the chain
// does not have (0, past its head, where the next chain's entries are, the
// largest a slot holds), and, for keys the file lacks, existing entries.
func TestSeqMapPlantedCandidates(t *testing.T) {
	type plantCase struct {
		name       string
		chain, key string
		seq        uint64 // planted
		logOnly    bool   // needs the memory table
	}
	cases := []plantCase{
		{"another key's entry", "a", "a-7", 21, false},
		{"seq 0", "a", "a-7", 0, false},
		{"the largest seq of a slot", "a", "a-7", 1<<seqMapSeqBits - 2, false},
		{"past the head, in the next chain's range", "a", "a-7", 102, false},
		{"the key's seq on another chain", "a", "both", 50, false},
		{"a new key, an existing entry", "a", "a-new", 8, false},
		{"a key of another chain only, at its seq there", "a", "b-3", 4, false},
		{"a key of the other chain only, at its seq there", "b", "a-99", 100, false},
		{"a key of the memory table only", "a", "a-mem", 8, true},
	}
	configurations := []struct {
		name string
		opts Options
	}{
		{"LogOff", Options{Log: LogOff, EntryKey: keyBeforeBar}},
		{"LogOn", Options{Log: LogOn, MemtableBytesMax: 1 << 40, EntryKey: keyBeforeBar}},
	}
	ctx := context.Background()
	for _, c := range configurations {
		for _, pc := range cases {
			if pc.logOnly && c.opts.Log != LogOn {
				continue
			}
			t.Run(c.name+"/"+pc.name, func(t *testing.T) {
				l := plantedLedger(t, c.opts)
				// Enough reads of chain a for a pooled read transaction
				// (with the log) to map its segments, so that the planted
				// seq is also looked up in that map.
				for range 2 {
					for _, key := range keyNames("a", 0, 100) {
						if _, _, found, err := l.b.ReadKey(ctx, "a", key); err != nil || !found {
							t.Fatalf("ReadKey(a, %q) = %v, %v", key, found, err)
						}
					}
				}
				wantSeq, wantData, wantFound := readByTransaction(t, l.b, pc.chain, pc.key)
				if err := PlantSeqMapCandidate(l.b, pc.chain, pc.key, pc.seq); err != nil {
					t.Fatal(err)
				}
				seq, data, found, err := l.b.ReadKey(ctx, pc.chain, pc.key)
				if err != nil || found != wantFound || seq != wantSeq || !bytes.Equal(data, wantData) {
					t.Fatalf("ReadKey(%s, %q) with seq %d planted = %d, %.20q, %v, %v; the key runs give %d, %.20q, %v",
						pc.chain, pc.key, pc.seq, seq, data, found, err, wantSeq, wantData, wantFound)
				}
				if found {
					if k, _ := keyBeforeBar(data); string(k) != pc.key {
						t.Fatalf("ReadKey(%s, %q) returned the entry of %q", pc.chain, pc.key, k)
					}
				}
				// ReadKeys reads the candidates of a batch the same way.
				batch := []storage.ChainKey{{Chain: "a", Key: "a-6"}, {Chain: pc.chain, Key: pc.key}, {Chain: "b", Key: "b-3"}}
				reads := make([]storage.KeyRead, len(batch))
				if err := l.b.ReadKeys(ctx, batch, reads); err != nil {
					t.Fatal(err)
				}
				if r := reads[1]; r.Found != wantFound || r.Seq != wantSeq || !bytes.Equal(r.Data, wantData) {
					t.Fatalf("ReadKeys(%s, %q) with seq %d planted = %d, %.20q, %v; the key runs give %d, %.20q, %v",
						pc.chain, pc.key, pc.seq, r.Seq, r.Data, r.Found, wantSeq, wantData, wantFound)
				}
				if !reads[0].Found || reads[0].Seq != 7 || !reads[2].Found || reads[2].Seq != 4 {
					t.Fatalf("ReadKeys beside the planted key: %+v, %+v", reads[0], reads[2])
				}
				// The other keys still read through the map.
				for _, key := range []string{"a-6", "a-8", "a-99", "both"} {
					ws, wd, wf := readByTransaction(t, l.b, "a", key)
					if s, d, f, err := l.b.ReadKey(ctx, "a", key); err != nil || f != wf || s != ws || !bytes.Equal(d, wd) {
						t.Fatalf("ReadKey(a, %q) after the plant = %d, %v, %v; want %d", key, s, f, err, ws)
					}
				}
			})
		}
	}
}

// TestSeqMapBeyondFillLimit commits more keys in one transaction than the
// map of a new file takes (90% of the slots of a filter of the minimum
// capacity): the map says it is partial, MayHoldKey and ReadKey still find
// the keys it left out (through the filter and the key runs), and the next
// write transaction, which builds the filter larger, builds the map with
// every key.
func TestSeqMapBeyondFillLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("commits 80,000 keys")
	}
	l := newFilterLedgerWith(t, Options{Log: LogOff, EntryKey: keyBeforeBar})
	l.appendKeys([]string{"a"}, 10, "first", true)
	f := l.b.cache.filter.Load()
	if f.seqs == nil || f.seqs.partial.Load() {
		t.Fatalf("a new file's seq map: %v, partial %v", f.seqs, f.seqs != nil && f.seqs.partial.Load())
	}
	l.appendKeys([]string{"a"}, 80_000, "k", true) // seq of "k-i" is i+11
	if l.b.cache.filter.Load() != f {
		t.Fatal("the filter was built again before it outgrew its capacity")
	}
	limit := uint64(len(f.seqs.slots)) * seqMapFullNum / seqMapFullDen
	if f.seqs.used != limit || !f.seqs.partial.Load() {
		t.Fatalf("the map took %d keys of 80,010 in %d slots, partial %v; want %d, partial", f.seqs.used, len(f.seqs.slots), f.seqs.partial.Load(), limit)
	}
	ctx := context.Background()
	id, _ := l.b.cache.chains.get("a")
	left := 0
	for i := range 80_000 {
		key := fmt.Sprintf("k-%d", i)
		digest := KeyDigest(key)
		if got, ok := f.seqs.find(id, digest[:]); ok && got == uint64(i+11) && i%50 != 0 {
			continue // read through the map: a sample is enough
		}
		left++
		// A key the map left out: neither the probe nor ReadKey may
		// take the map's "no" for it.
		if !l.b.MayHoldKey("a", key) {
			t.Fatalf("MayHoldKey(a, %q) = false for a key the map left out", key)
		}
		if seq, data, found, err := l.b.ReadKey(ctx, "a", key); err != nil || !found || seq != uint64(i+11) || string(data) != key {
			t.Fatalf("ReadKey(a, %q) = %d, %q, %v, %v; want %d", key, seq, data, found, err, i+11)
		}
	}
	if left < 80_010-int(limit) {
		t.Fatalf("only %d keys were left out of a map that took %d of 80,010", left, limit)
	}
	l.lookupOnce("a") // past its capacity: built again
	g := l.checkFilterCovers()
	if g == f || g.seqs == nil || g.seqs.used != 80_010 || g.seqs.partial.Load() {
		t.Fatalf("after the rebuild: same filter %v, map %v", g == f, g.seqs)
	}
	for i := range 80_000 {
		digest := KeyDigest(fmt.Sprintf("k-%d", i))
		if got, ok := g.seqs.find(id, digest[:]); !ok || got != uint64(i+11) {
			t.Fatalf("rebuilt map: k-%d = %d, %v; want %d", i, got, ok, i+11)
		}
	}
}

// TestSeqMapRulesOutInPlaceOfFilter sets every bit of a handle's key filter,
// so that the filter rules nothing out: while the seq map holds every key
// it answers for the filter (a key it lacks is new, a key of the file is
// not), and once it is partial the filter answers again.
func TestSeqMapRulesOutInPlaceOfFilter(t *testing.T) {
	l := newFilterLedgerWith(t, Options{Log: LogOff, EntryKey: keyBeforeBar})
	l.appendKeys([]string{"a", "b"}, 40, "k", true)
	f := l.b.cache.filter.Load()
	for i := range f.words {
		atomic.StoreUint64(&f.words[i], ^uint64(0))
	}
	id, _ := l.b.cache.chains.get("a")
	ruledOut := 0
	for i := range 200 {
		key := fmt.Sprint("never-", i)
		digest := KeyDigest(key)
		_, candidate := f.seqs.find(id, digest[:])
		if got := l.b.MayHoldKey("a", key); got != candidate {
			t.Fatalf("MayHoldKey(a, %q) = %v with a complete map whose search finds %v", key, got, candidate)
		}
		if !candidate {
			ruledOut++
		}
	}
	if ruledOut < 190 {
		t.Fatalf("the map ruled out %d of 200 new keys", ruledOut)
	}
	for i := range 40 {
		if key := fmt.Sprint("k-", i); !l.b.MayHoldKey([]string{"a", "b"}[i%2], key) {
			t.Fatalf("MayHoldKey of committed %q = false", key)
		}
	}
	f.seqs.partial.Store(true)
	for i := range 20 {
		key := fmt.Sprint("never-", i)
		if !l.b.MayHoldKey("a", key) {
			t.Fatalf("MayHoldKey(a, %q) = false with a partial map and a filter that rules nothing out", key)
		}
		if _, _, found, err := l.b.ReadKey(context.Background(), "a", key); err != nil || found {
			t.Fatalf("ReadKey(a, %q) of a key never committed = %v, %v", key, found, err)
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
	m := newSeqMap(0, max(chains*keysPerChain*keyFilterGrowth, keyFilterCapacityMin), SeqMapBytesMaxDefault)
	var digests [keysPerChain][KeyDigestSize]byte
	for k := range digests {
		digests[k] = KeyDigest(fmt.Sprintf("deposit-%d", k))
	}
	for id := uint64(1); id <= chains; id++ {
		for k := range digests {
			m.add(id, digests[k][:], id*keysPerChain+uint64(k))
		}
	}
	walked, longest := 0, 0
	for id := uint64(1); id <= chains; id++ {
		for k := range digests {
			seq, ok := m.find(id, digests[k][:])
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
func slotsWalked(m *seqMap, chainID uint64, digest []byte) int {
	i, fingerprint := m.hashes(chainID, digest)
	for n := range len(m.slots) {
		if m.slots[i] == 0 || m.slots[i]&^(1<<seqMapSeqBits-1) == fingerprint {
			return n
		}
		i = (i + 1) % uint64(len(m.slots))
	}
	return len(m.slots)
}
