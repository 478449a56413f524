package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt/internal/keyindex"
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
	return f != nil && f.Seqs != nil
}

// SeqMapPartial reports whether the handle's seq map had to leave a key
// out, and so no longer rules keys out in place of the filter.
func SeqMapPartial(b *Backend) bool {
	f := b.cache.filter.Load()
	return f != nil && f.Seqs != nil && f.Seqs.Partial.Load()
}

// SeqMapCandidate returns the seq the handle's seq map gives for a key of a
// chain the file holds (ok false: no map, no such chain, or no candidate).
func SeqMapCandidate(b *Backend, chain, key string) (seq uint64, ok bool) {
	f := b.cache.filter.Load()
	id, known := b.cache.chains.get(chain)
	if f == nil || f.Seqs == nil || !known {
		return 0, false
	}
	digest := KeyDigest(key)
	return f.Seqs.Find(id, digest[:])
}

// PlantSeqMapCandidate makes the handle's seq map answer seq for the key,
// a fault ReadKey must correct: the map gives candidates, not answers.
func PlantSeqMapCandidate(b *Backend, chain, key string, seq uint64) error {
	f := b.cache.filter.Load()
	if f == nil || f.Seqs == nil {
		return errors.New("the handle has no seq map")
	}
	id, known := b.cache.chains.get(chain)
	if !known {
		return fmt.Errorf("chain %q has no id in the handle's map of chains", chain)
	}
	digest := KeyDigest(key)
	b.cache.mu.Lock() // the committer adds under it
	f.Seqs.Plant(id, digest[:], seq)
	b.cache.mu.Unlock()
	if got, ok := f.Seqs.Find(id, digest[:]); !ok || got != seq {
		return fmt.Errorf("planted seq %d for %q of chain %q, the map gives %d, %v", seq, key, chain, got, ok)
	}
	return nil
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
		{"the largest seq of a slot", "a", "a-7", 1<<keyindex.SeqMapSeqBits - 2, false},
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
	if f.Seqs == nil || f.Seqs.Partial.Load() {
		t.Fatalf("a new file's seq map: %v, partial %v", f.Seqs, f.Seqs != nil && f.Seqs.Partial.Load())
	}
	l.appendKeys([]string{"a"}, 80_000, "k", true) // seq of "k-i" is i+11
	if l.b.cache.filter.Load() != f {
		t.Fatal("the filter was built again before it outgrew its capacity")
	}
	limit := uint64(len(f.Seqs.Slots)) * keyindex.SeqMapFullNum / keyindex.SeqMapFullDen
	if f.Seqs.Used != limit || !f.Seqs.Partial.Load() {
		t.Fatalf("the map took %d keys of 80,010 in %d slots, partial %v; want %d, partial", f.Seqs.Used, len(f.Seqs.Slots), f.Seqs.Partial.Load(), limit)
	}
	ctx := context.Background()
	id, _ := l.b.cache.chains.get("a")
	left := 0
	for i := range 80_000 {
		key := fmt.Sprintf("k-%d", i)
		digest := KeyDigest(key)
		if got, ok := f.Seqs.Find(id, digest[:]); ok && got == uint64(i+11) && i%50 != 0 {
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
	if g == f || g.Seqs == nil || g.Seqs.Used != 80_010 || g.Seqs.Partial.Load() {
		t.Fatalf("after the rebuild: same filter %v, map %v", g == f, g.Seqs)
	}
	for i := range 80_000 {
		digest := KeyDigest(fmt.Sprintf("k-%d", i))
		if got, ok := g.Seqs.Find(id, digest[:]); !ok || got != uint64(i+11) {
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
	for i := range f.Words {
		atomic.StoreUint64(&f.Words[i], ^uint64(0))
	}
	id, _ := l.b.cache.chains.get("a")
	ruledOut := 0
	for i := range 200 {
		key := fmt.Sprint("never-", i)
		digest := KeyDigest(key)
		_, candidate := f.Seqs.Find(id, digest[:])
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
	f.Seqs.Partial.Store(true)
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
