package memtable

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt/internal/commitrec"
)

// TestKeyTableModel runs a keyTable against a Go map: puts of new and
// existing keys, lookups of present and absent ones, and resets, through
// growth. Hashes are drawn from a small set part of the time, so that
// distinct keys share a hash (and the filter's word and bits) and must be
// told apart by the keys the entries hold.
func TestKeyTableModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var table KeyTable
		var entries []Entry
		model := map[string]int{}
		hashes := map[string]uint64{} // one hash per key, as keyHash gives
		hashOf := func(t *rapid.T, key string) uint64 {
			if h, ok := hashes[key]; ok {
				return h
			}
			h := KeyHash(key)
			if rapid.Bool().Draw(t, "shared hash") {
				h = rapid.Uint64Range(1, 4).Draw(t, "hash")
			}
			hashes[key] = h
			return h
		}
		key := func(t *rapid.T) string { return fmt.Sprintf("k%d", rapid.IntRange(0, 300).Draw(t, "key")) }
		t.Repeat(map[string]func(*rapid.T){
			"put": func(t *rapid.T) {
				k := key(t)
				entries = append(entries, Entry{Seq: uint64(len(entries) + 1), Key: k})
				table.Put(hashOf(t, k), k, len(entries)-1, entries)
				model[k] = len(entries) - 1
			},
			"find": func(t *rapid.T) {
				k := key(t)
				position, ok := table.Find(hashOf(t, k), k, entries)
				want, wantOK := model[k]
				if ok != wantOK || position != want {
					t.Fatalf("find %q: %d %v, want %d %v", k, position, ok, want, wantOK)
				}
			},
			"reset": func(t *rapid.T) {
				table.Reset()
				entries = entries[:0]
				clear(model)
			},
			"": func(t *rapid.T) {
				if table.count != len(model) {
					t.Fatalf("count %d, model %d", table.count, len(model))
				}
				if table.count > 0 && 2*table.count > len(table.slots) {
					t.Fatalf("%d keys in %d slots", table.count, len(table.slots))
				}
			},
		})
	})
}

// TestKeyTableFilterRulesOut checks that the filter, not the slots, answers
// most absent keys, and never rules a present key out.
func TestKeyTableFilterRulesOut(t *testing.T) {
	var table KeyTable
	var entries []Entry
	const keys = 10_000
	for i := range keys {
		k := fmt.Sprintf("present-%d", i)
		entries = append(entries, Entry{Seq: uint64(i + 1), Key: k})
		table.Put(KeyHash(k), k, i, entries)
	}
	for i := range keys {
		k := fmt.Sprintf("present-%d", i)
		if p, ok := table.Find(KeyHash(k), k, entries); !ok || p != i {
			t.Fatalf("find %q: %d %v", k, p, ok)
		}
	}
	passed := 0
	for i := range keys {
		h := KeyHash(fmt.Sprintf("absent-%d", i))
		if bits := filterBits(h); *table.filterWord(h)&bits == bits {
			passed++
		}
		if _, ok := table.Find(h, fmt.Sprintf("absent-%d", i), entries); ok {
			t.Fatalf("found absent key %d", i)
		}
	}
	// 10,000 keys in 32,768 slots: 4,096 words, about 10 bits set in each;
	// four of them all set by chance about (10/64)^4, 0.06%.
	if passed > keys/100 {
		t.Fatalf("the filter let %d of %d absent keys through", passed, keys)
	}
}

// TestMemtableKeysVisibleAsOf checks lookups of a memory table against the
// LSN of a view: a key is found only by views that include its commit,
// across the table's growth.
func TestMemtableKeysVisibleAsOf(t *testing.T) {
	m := New()
	const commits, perCommit = 40, 50
	for c := range commits {
		var ops []commitrec.Operation
		for i := range perCommit {
			seq := uint64(c*perCommit + i + 1)
			o := commitrec.Operation{Kind: commitrec.KindAppend, Chain: "a", Seq: seq, Key: fmt.Sprintf("key-%d", seq),
				Head: storage.Head{Seq: seq}, Data: []byte{byte(seq)}}
			if i%2 == 0 { // half as a writer hands them over, half as decoded from the log
				o.KeyHash = KeyHash(o.Key)
			}
			ops = append(ops, o)
		}
		m.Apply(uint64(c+1), nil, ops)
	}
	for seq := uint64(1); seq <= commits*perCommit; seq++ {
		lsn := (seq-1)/perCommit + 1
		key := fmt.Sprintf("key-%d", seq)
		if got, ok := m.LookupKey("a", key, lsn); !ok || got != seq {
			t.Fatalf("%s as of %d: %d %v, want %d", key, lsn, got, ok, seq)
		}
		if _, ok := m.LookupKey("a", key, lsn-1); ok {
			t.Fatalf("%s seen as of %d, before its commit %d", key, lsn-1, lsn)
		}
		if _, ok := m.LookupKey("b", key, lsn); ok {
			t.Fatalf("%s seen on another chain", key)
		}
	}
	if _, ok := m.LookupKey("a", "key-0", commits); ok {
		t.Fatal("absent key found")
	}
}

// TestMemtableHeadVisibleAsOf checks a chain's head and entries in a
// memory table as of each commit: the newest entry of a commit up to the
// view's LSN, none before the first, all of them at or past the last.
func TestMemtableHeadVisibleAsOf(t *testing.T) {
	m := New()
	const commits, perCommit = 5, 3
	for c := range commits {
		var ops []commitrec.Operation
		for i := range perCommit {
			seq := uint64(c*perCommit + i + 1)
			ops = append(ops, commitrec.Operation{Kind: commitrec.KindAppend, Chain: "a", Seq: seq, Head: storage.Head{Seq: seq}, Data: []byte{byte(seq)}})
		}
		m.Apply(uint64(10*(c+1)), nil, ops) // LSNs 10, 20, ...: views between commits too
	}
	for asOf := uint64(0); asOf <= 10*commits+5; asOf++ {
		want := min(asOf/10, commits) * perCommit
		h, ok := m.Head("a", asOf)
		if ok != (want > 0) || ok && h.Seq != want {
			t.Fatalf("head as of %d: %d %v, want %d", asOf, h.Seq, ok, want)
		}
		if got := m.EntriesChunk("a", 1, asOf, 100, nil); uint64(len(got)) != want {
			t.Fatalf("as of %d: %d entries, want %d", asOf, len(got), want)
		}
	}
}

// TestMemtablePresizeLike checks that a new table takes the sizes of the
// previous table's large chains (and only theirs, within the bounds), that
// commits then fill it without growing, and that a table that already
// holds a commit is left as it is.
func TestMemtablePresizeLike(t *testing.T) {
	previous := New()
	var ops []commitrec.Operation
	for c := range presizeChainsMax + 4 {
		name := fmt.Sprintf("big-%02d", c)
		for seq := uint64(1); seq <= presizeEntriesMin; seq++ {
			ops = append(ops, commitrec.Operation{Kind: commitrec.KindAppend, Chain: name, Seq: seq, Key: fmt.Sprintf("k%d", seq), Head: storage.Head{Seq: seq}})
		}
	}
	ops = append(ops, commitrec.Operation{Kind: commitrec.KindAppend, Chain: "small", Seq: 1, Key: "k", Head: storage.Head{Seq: 1}})
	previous.Apply(1, nil, ops)

	m := New()
	m.PresizeLike(previous)
	if len(m.chains) != presizeChainsMax {
		t.Fatalf("%d chains presized, want %d", len(m.chains), presizeChainsMax)
	}
	var name string
	for n, c := range m.chains {
		if cap(c.entries) != presizeEntriesMin || len(c.entries) != 0 || c.keys.count != 0 || len(c.keys.slots) < 2*(presizeEntriesMin+1) {
			t.Fatalf("chain %s: %d of %d entries, %d keys in %d slots", n, len(c.entries), cap(c.entries), c.keys.count, len(c.keys.slots))
		}
		name = n
	}
	if _, ok := m.Head(name, 1); ok {
		t.Fatal("a presized chain shows a head")
	}
	entries, slots := &m.chains[name].entries, len(m.chains[name].keys.slots)
	array := cap(*entries)
	var fill []commitrec.Operation
	for seq := uint64(1); seq <= presizeEntriesMin; seq++ {
		fill = append(fill, commitrec.Operation{Kind: commitrec.KindAppend, Chain: name, Seq: seq, Key: fmt.Sprintf("k%d", seq), KeyHash: KeyHash(fmt.Sprintf("k%d", seq)), Head: storage.Head{Seq: seq}})
	}
	m.Apply(1, nil, fill)
	if cap(*entries) != array || len(m.chains[name].keys.slots) != slots {
		t.Fatalf("the presized chain grew: %d entries, %d slots (was %d, %d)", cap(*entries), len(m.chains[name].keys.slots), array, slots)
	}
	for seq := uint64(1); seq <= presizeEntriesMin; seq++ {
		if got, ok := m.LookupKey(name, fmt.Sprintf("k%d", seq), 1); !ok || got != seq {
			t.Fatalf("k%d: %d %v", seq, got, ok)
		}
	}

	m.PresizeLike(previous) // holds a commit now: left as it is
	if len(m.chains) != presizeChainsMax || len(m.chains[name].entries) != presizeEntriesMin {
		t.Fatalf("presizeLike changed a table in use: %d chains, %d entries", len(m.chains), len(m.chains[name].entries))
	}
}
