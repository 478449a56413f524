package bolt_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
	"unsafe"

	"pgregory.net/rapid"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// openKeyed opens a new file with opts under a keyedMachine's model, for
// the tests that drive it without rapid; the backend is closed when the
// test ends.
func openKeyed(t *testing.T, opts bolt.Options) *keyedMachine {
	t.Helper()
	m := &keyedMachine{opts: opts, path: filepath.Join(t.TempDir(), "ledger.db"), heads: map[string]uint64{}, acknowledged: map[[2]string]keyedEntry{}}
	var err error
	if m.b, err = bolt.Open(m.path, m.opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.b.Close() })
	return m
}

// keyedData is the entry of key at seq of chain: size bytes or so, and
// empty when size is 0.
func keyedData(chain, key string, seq uint64, size int) []byte {
	if size == 0 {
		return []byte{}
	}
	data := fmt.Appendf(nil, "%s/%s/%d/", chain, key, seq)
	for len(data) < size {
		data = append(data, byte('a'+len(data)%26))
	}
	return data
}

// commitChainKeys commits n keyed entries of one chain in one writer, of
// sizes from 0 to about twice size (every sixteenth one empty), and adds
// them to the model: a batch of one chain is a run of its own when it
// reaches the file alone, and entries of a few hundred bytes fill many
// segments.
func commitChainKeys(t fataler, m *keyedMachine, chain string, n, size int) {
	t.Helper()
	tx, err := m.b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var order [][2]string
	batch := map[[2]string]keyedEntry{}
	for i := range n {
		seq := m.heads[chain] + uint64(i) + 1
		key := fmt.Sprintf("k%d", m.next+i)
		data := keyedData(chain, key, seq, size*(i*37%16)/8)
		if err := tx.Append(ctx, chain, storage.Record{Seq: seq, IdempotencyKey: key, Data: data}, testHead(seq)); err != nil {
			t.Fatalf("append %s seq %d: %v", chain, seq, err)
		}
		batch[[2]string{chain, key}] = keyedEntry{seq, data}
		order = append(order, [2]string{chain, key})
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	m.next += n
	m.heads[chain] += uint64(n)
	for _, k := range order {
		m.acknowledged[k] = batch[k]
	}
	m.order = append(m.order, order...)
}

// checkpoint moves what the memory tables hold to the file (nothing
// without the log).
func checkpoint(t fataler, b *bolt.Backend) {
	t.Helper()
	if err := bolt.Checkpoint(b); err != nil {
		t.Fatal(err)
	}
}

// keysOf returns the acknowledged keys of chain in commit order.
func keysOf(m *keyedMachine, chain string) []storage.ChainKey {
	var keys []storage.ChainKey
	for _, k := range m.order {
		if k[0] == chain {
			keys = append(keys, storage.ChainKey{Chain: k[0], Key: k[1]})
		}
	}
	return keys
}

// staleData is the Data of a read set before a ReadKeys call: a read
// that the call answers must not keep it.
var staleData = []byte("stale")

var staleRead = storage.KeyRead{Seq: 1 << 62, Data: staleData, Found: true}

func isStale(r storage.KeyRead) bool {
	return r.Seq == staleRead.Seq && r.Found && len(r.Data) == len(staleData) && unsafe.SliceData(r.Data) == unsafe.SliceData(staleData)
}

// readKeys calls b.ReadKeys with extra reads past the keys, every read
// stale, and checks that the ones past the keys are left as they were.
func readKeys(t fataler, b *bolt.Backend, keys []storage.ChainKey, extra int) []storage.KeyRead {
	t.Helper()
	reads := make([]storage.KeyRead, len(keys)+extra)
	for i := range reads {
		reads[i] = staleRead
	}
	if err := b.ReadKeys(ctx, keys, reads); err != nil {
		t.Fatalf("ReadKeys of %d keys: %v", len(keys), err)
	}
	for i, r := range reads[len(keys):] {
		if !isStale(r) {
			t.Fatalf("ReadKeys of %d keys set reads[%d], past its keys, to %+v", len(keys), len(keys)+i, r)
		}
	}
	return reads[:len(keys)]
}

// checkReads checks each read of a ReadKeys call against ReadKey of its
// key on b (seq, bytes, found, and a nil Data where ReadKey's is nil) and
// against the model (an acknowledged key is found with its seq and entry,
// any other is absent), checks that no two reads' Data share memory, and
// then overwrites every Data through its capacity, as an owner may: a
// later read must not see it.
func checkReads(t fataler, b *bolt.Backend, acknowledged map[[2]string]keyedEntry, keys []storage.ChainKey, reads []storage.KeyRead) {
	t.Helper()
	for i, k := range keys {
		r := reads[i]
		seq, data, found, err := b.ReadKey(ctx, k.Chain, k.Key)
		if err != nil {
			t.Fatalf("ReadKey(%q, %q): %v", k.Chain, k.Key, err)
		}
		if r.Found != found || r.Seq != seq || !bytes.Equal(r.Data, data) || (r.Data == nil) != (data == nil) {
			t.Fatalf("ReadKeys of %d keys: reads[%d] (%q, %q) = %d, %q (nil %v), %v; ReadKey = %d, %q (nil %v), %v",
				len(keys), i, k.Chain, k.Key, r.Seq, r.Data, r.Data == nil, r.Found, seq, data, data == nil, found)
		}
		e, ok := acknowledged[[2]string{k.Chain, k.Key}]
		if found != ok || ok && (seq != e.seq || !bytes.Equal(data, e.data)) {
			t.Fatalf("ReadKeys of %d keys: reads[%d] (%q, %q) = %d, %q, %v; acknowledged %v: %d, %q",
				len(keys), i, k.Chain, k.Key, r.Seq, r.Data, r.Found, ok, e.seq, e.data)
		}
	}
	checkDisjoint(t, reads)
	for _, r := range reads {
		d := r.Data[:cap(r.Data)]
		for j := range d {
			d[j] ^= 0xa5
		}
	}
}

// checkDisjoint fails when the memory of two reads' Data (through their
// capacities) overlaps: one read's owner would write another's bytes.
func checkDisjoint(t fataler, reads []storage.KeyRead) {
	t.Helper()
	type span struct {
		start, end uintptr
		i          int
	}
	var spans []span
	for i, r := range reads {
		if cap(r.Data) > 0 {
			start := uintptr(unsafe.Pointer(unsafe.SliceData(r.Data)))
			spans = append(spans, span{start, start + uintptr(cap(r.Data)), i})
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	for j := 1; j < len(spans); j++ {
		if spans[j].start < spans[j-1].end {
			t.Fatalf("the Data of reads[%d] and reads[%d] share memory", spans[j-1].i, spans[j].i)
		}
	}
}

// drawKeys draws a batch of n keys of every kind, interleaved: acknowledged
// keys (in the file or only in the memory tables), keys of committed chains
// never acknowledged (rolled back or never written), acknowledged keys
// asked of another chain, keys of chains no commit made, and keys already
// in the batch.
func drawKeys(rt *rapid.T, m *keyedMachine, n int) []storage.ChainKey {
	keys := make([]storage.ChainKey, 0, n)
	for range n {
		var k storage.ChainKey
		switch kind := rapid.IntRange(0, 5).Draw(rt, "kind"); {
		case kind <= 1 && len(m.order) > 0:
			o := m.order[rapid.IntRange(0, len(m.order)-1).Draw(rt, "acknowledged")]
			k = storage.ChainKey{Chain: o[0], Key: o[1]}
		case kind == 2 && len(m.order) > 0:
			o := m.order[rapid.IntRange(0, len(m.order)-1).Draw(rt, "moved")]
			k = storage.ChainKey{Chain: fmt.Sprintf("rapid/%d", rapid.IntRange(0, 5).Draw(rt, "chain")), Key: o[1]}
		case kind == 3 && len(keys) > 0:
			k = keys[rapid.IntRange(0, len(keys)-1).Draw(rt, "again")]
		case kind == 4:
			k = storage.ChainKey{Chain: fmt.Sprintf("none/%d", rapid.IntRange(0, 2).Draw(rt, "chain")), Key: fmt.Sprintf("k%d", rapid.IntRange(0, m.next).Draw(rt, "key"))}
		default:
			k = storage.ChainKey{Chain: fmt.Sprintf("rapid/%d", rapid.IntRange(0, 5).Draw(rt, "chain")), Key: fmt.Sprintf("k%d", rapid.IntRange(0, m.next+8).Draw(rt, "key"))}
		}
		keys = append(keys, k)
	}
	return keys
}

// readChainBatches reads a drawn slice of one chain's keys (64 to 400 of
// them, when it has so many), the same keys shuffled, and shuffled again
// with a drawn batch of every kind mixed in, one call after another, then
// checks the three and reads the first again: the calls share a pooled
// read transaction (with the log), so that the first builds the run
// tables and the chain's map of segments that the next ones' prefetches
// read.
func readChainBatches(rt *rapid.T, m *keyedMachine) {
	own := keysOf(m, fmt.Sprintf("rapid/%d", rapid.IntRange(0, 5).Draw(rt, "chain")))
	n := len(own)
	if n > 64 {
		n = rapid.IntRange(64, min(n, 400)).Draw(rt, "n")
	}
	start := rapid.IntRange(0, len(own)-n).Draw(rt, "start")
	first := own[start : start+n]
	rng := rand.New(rand.NewPCG(rapid.Uint64().Draw(rt, "seed"), 0))
	second := slices.Clone(first)
	rng.Shuffle(len(second), func(i, j int) { second[i], second[j] = second[j], second[i] })
	third := slices.Clone(second)
	for _, k := range drawKeys(rt, m, rapid.IntRange(0, 40).Draw(rt, "mixed")) {
		third = slices.Insert(third, rng.IntN(len(third)+1), k)
	}
	batches := [][]storage.ChainKey{first, second, third}
	reads := make([][]storage.KeyRead, len(batches))
	for i, keys := range batches {
		reads[i] = readKeys(rt, m.b, keys, i)
	}
	for i, keys := range batches {
		checkReads(rt, m.b, m.acknowledged, keys, reads[i])
	}
	checkReads(rt, m.b, m.acknowledged, first, readKeys(rt, m.b, first, 1))
}

// readOnlyBatches closes the backend, or drops it as a crash would, and
// reads drawn keys and the last keys committed through a read-only handle
// (which has no key filter: every key is looked up in a read view, and
// after a crash the log's commits are in its memory tables), then opens
// the file for writing again.
func readOnlyBatches(rt *rapid.T, m *keyedMachine) {
	if rapid.Bool().Draw(rt, "crash") {
		bolt.Abandon(m.b)
	} else if err := m.b.Close(); err != nil {
		rt.Fatal(err)
	}
	r, err := bolt.Open(m.path, bolt.Options{ReadOnly: true})
	if err != nil {
		rt.Fatal(err)
	}
	defer r.Close()
	var last []storage.ChainKey
	for _, k := range m.order[max(0, len(m.order)-300):] {
		last = append(last, storage.ChainKey{Chain: k[0], Key: k[1]})
	}
	mixed := drawKeys(rt, m, rapid.IntRange(0, 100).Draw(rt, "batch"))
	lastReads, mixedReads := readKeys(rt, r, last, 0), readKeys(rt, r, mixed, 2)
	checkReads(rt, r, m.acknowledged, last, lastReads)
	checkReads(rt, r, m.acknowledged, mixed, mixedReads)
	checkReads(rt, r, m.acknowledged, last, readKeys(rt, r, last, 0))
	if err := r.Close(); err != nil {
		rt.Fatal(err)
	}
	if m.b, err = bolt.Open(m.path, m.opts); err != nil {
		rt.Fatal(err)
	}
}

// TestReadKeysRapid drives a backend, with the log and without, through
// the keyed machine's random commits, rollbacks, checkpoints, reopens and
// crashes, and commits of 64 to 300 keys of one chain alone (checkpointed
// before and after, at times, to be a run of their own); after every step
// a drawn batch of keys of every kind, and now and then batches of one
// chain's keys read one after another and through a read-only handle,
// must read as ReadKey reads each key and as the model has it, with Data
// the caller's; at the end every acknowledged key is read in batches.
func TestReadKeysRapid(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := newKeyedMachine(t, rt)
		actions := m.actions()
		actions["commitChain"] = func(rt *rapid.T) {
			chain := fmt.Sprintf("rapid/%d", rapid.IntRange(0, 5).Draw(rt, "chain"))
			n := rapid.IntRange(64, 300).Draw(rt, "entries")
			size := rapid.SampledFrom([]int{0, 24, 200, 600}).Draw(rt, "size")
			alone := rapid.Bool().Draw(rt, "alone")
			if alone {
				checkpoint(rt, m.b)
			}
			commitChainKeys(rt, m, chain, n, size)
			if alone {
				checkpoint(rt, m.b)
			}
		}
		actions["readKeys"] = func(rt *rapid.T) { readChainBatches(rt, m) }
		actions["readOnly"] = func(rt *rapid.T) { readOnlyBatches(rt, m) }
		actions[""] = func(rt *rapid.T) {
			keys := drawKeys(rt, m, rapid.IntRange(0, 48).Draw(rt, "batch"))
			checkReads(rt, m.b, m.acknowledged, keys, readKeys(rt, m.b, keys, len(keys)%3))
		}
		rt.Repeat(actions)
		var all []storage.ChainKey
		for _, k := range m.order {
			all = append(all, storage.ChainKey{Chain: k[0], Key: k[1]})
		}
		for len(all) > 0 {
			n := rapid.IntRange(1, min(len(all), storage.ReadKeysMax)).Draw(rt, "final batch")
			checkReads(rt, m.b, m.acknowledged, all[:n], readKeys(rt, m.b, all[:n], 0))
			all = all[n:]
		}
		closeAndCheck(t, m.b, m.path)
	})
}

// TestReadKeysPooledMaps reads, in each configuration, batches of a chain
// of 400 entries written as a run of its own and of a second chain, one
// call after another (which, with the log, share a pooled read
// transaction: the first builds the runs' tables and the chain's map of
// segments, the next ones prefetch through them), then again after a
// reopen, whose runs' radix maps are built from the file.
func TestReadKeysPooledMaps(t *testing.T) {
	for _, c := range logConfigurations {
		t.Run(c.name, func(t *testing.T) {
			m := openKeyed(t, c.opts)
			commitChainKeys(t, m, "a", 400, 300)
			checkpoint(t, m.b)
			commitChainKeys(t, m, "b", 200, 300)
			checkpoint(t, m.b)
			commitChainKeys(t, m, "a", 100, 300)
			for round := range 2 {
				a, b := keysOf(m, "a"), keysOf(m, "b")
				reversed := slices.Clone(a[:400])
				slices.Reverse(reversed)
				var mixed []storage.ChainKey
				for i := range 200 {
					mixed = append(mixed, a[i*2], b[i], storage.ChainKey{Chain: "a", Key: fmt.Sprintf("absent-%d", i)},
						storage.ChainKey{Chain: "c", Key: b[i].Key}, a[(i*7)%len(a)])
				}
				batches := [][]storage.ChainKey{a[:400], reversed, a[:400], mixed, a[300:], b}
				reads := make([][]storage.KeyRead, len(batches))
				for i, keys := range batches {
					reads[i] = readKeys(t, m.b, keys, 1)
				}
				for i, keys := range batches {
					checkReads(t, m.b, m.acknowledged, keys, reads[i])
				}
				for _, keys := range batches {
					checkReads(t, m.b, m.acknowledged, keys, readKeys(t, m.b, keys, 0))
				}
				if round == 0 {
					if err := m.b.Close(); err != nil {
						t.Fatal(err)
					}
					var err error
					if m.b, err = bolt.Open(m.path, m.opts); err != nil {
						t.Fatal(err)
					}
				}
			}
			closeAndCheck(t, m.b, m.path)
		})
	}
}

// TestReadKeysReadOnly reads keys in batches through handles opened
// read-only, which have no key filter: of a file closed cleanly, and of
// a file whose log a crash left behind (its last commits are read from the
// log's memory table, after the file lacks them).
func TestReadKeysReadOnly(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprintf("crash=%v", crash), func(t *testing.T) {
			m := openKeyed(t, bolt.Options{Log: bolt.LogOn})
			commitChainKeys(t, m, "a", 100, 200)
			checkpoint(t, m.b)
			commitChainKeys(t, m, "b", 30, 200)
			commitChainKeys(t, m, "a", 20, 200) // in the memory table only
			if crash {
				bolt.Abandon(m.b)
			} else if err := m.b.Close(); err != nil {
				t.Fatal(err)
			}
			r, err := bolt.Open(m.path, bolt.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			keys := append(keysOf(m, "b"), keysOf(m, "a")...)
			keys = append(keys, storage.ChainKey{Chain: "a", Key: "never"}, storage.ChainKey{Chain: "none", Key: "k1"},
				storage.ChainKey{Chain: "b", Key: keys[len(keys)-1].Key}, keys[len(keys)-1], keys[0])
			for range 2 {
				checkReads(t, r, m.acknowledged, keys, readKeys(t, r, keys, 2))
			}
		})
	}
}

// TestReadKeysOnlyDurable holds the log's sync so that a commit is applied
// to the memory table but not durable: ReadKeys must not find its key,
// beside a durable one and twice in one batch, until the sync is let
// through.
func TestReadKeysOnlyDurable(t *testing.T) {
	b, path, wait2, gate := secondCommitHeld(t, asyncOptions)
	waited := make(chan error, 1)
	go func() { waited <- wait2() }()
	keys := []storage.ChainKey{{Chain: "c", Key: "k2"}, {Chain: "c", Key: "k1"}, {Chain: "c", Key: "k2"}}
	held := map[[2]string]keyedEntry{{"c", "k1"}: {1, []byte("k1")}}
	checkReads(t, b, held, keys, readKeys(t, b, keys, 0))
	close(gate)
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	bolt.SetSyncHook(b, nil)
	held[[2]string{"c", "k2"}] = keyedEntry{2, []byte("k2")}
	checkReads(t, b, held, keys, readKeys(t, b, keys, 0))
	closeAndCheck(t, b, path)
}

// TestReadKeysIndexPointsNowhere damages a run record of the file so that
// it maps a key to a seq the chain does not have: a batch that holds the
// key, first or after a hundred others (enough reads to map the chain's
// segments), must return an error wrapping storage.ErrCorrupt, and a
// batch without it must read.
func TestReadKeysIndexPointsNowhere(t *testing.T) {
	path := keyBatchLedger(t, 200)
	damaged := "key-7"
	digest := bolt.KeyDigest(damaged)
	lastRunChunk(t, path, func(chunk []byte) []byte {
		for o := 0; o+32 <= len(chunk); o += 32 {
			if bytes.Equal(chunk[o+8:o+24], digest[:]) {
				copy(chunk[o+24:o+32], []byte{0, 0, 0, 0, 0, 0, 0x30, 0x39}) // seq 12345
			}
		}
		return chunk
	})
	for _, c := range logConfigurations {
		t.Run(c.name, func(t *testing.T) {
			b, err := bolt.Open(path, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			var others []storage.ChainKey
			acknowledged := map[[2]string]keyedEntry{}
			for seq := uint64(1); seq <= 200; seq++ {
				if key := fmt.Sprintf("key-%d", seq); key != damaged {
					others = append(others, storage.ChainKey{Chain: keyBatchChain, Key: key})
					acknowledged[[2]string{keyBatchChain, key}] = keyedEntry{seq, []byte("x")}
				}
			}
			bad := storage.ChainKey{Chain: keyBatchChain, Key: damaged}
			for _, keys := range [][]storage.ChainKey{{bad}, append([]storage.ChainKey{bad}, others...), append(slices.Clone(others[:100]), bad)} {
				reads := make([]storage.KeyRead, len(keys))
				if err := b.ReadKeys(ctx, keys, reads); !errors.Is(err, storage.ErrCorrupt) {
					t.Fatalf("ReadKeys of %d keys with one mapped to a missing seq: %v; want storage.ErrCorrupt", len(keys), err)
				}
			}
			reads := readKeys(t, b, others, 0)
			for i, k := range others {
				e := acknowledged[[2]string{k.Chain, k.Key}]
				if r := reads[i]; !r.Found || r.Seq != e.seq || !bytes.Equal(r.Data, e.data) {
					t.Fatalf("ReadKeys: reads[%d] (%q) = %d, %q, %v; want %d, %q", i, k.Key, r.Seq, r.Data, r.Found, e.seq, e.data)
				}
			}
		})
	}
}

// TestReadKeysMaxKeys reads storage.ReadKeysMax keys in one call, in each
// configuration: acknowledged keys of three chains, in the file and in the
// memory tables, absent keys and repeated ones.
func TestReadKeysMaxKeys(t *testing.T) {
	for _, c := range logConfigurations {
		t.Run(c.name, func(t *testing.T) {
			m := openKeyed(t, c.opts)
			for i, chain := range []string{"a", "b", "c"} {
				commitChainKeys(t, m, chain, 800, 40)
				if i == 1 {
					checkpoint(t, m.b)
				}
			}
			keys := make([]storage.ChainKey, 0, storage.ReadKeysMax)
			for i := 0; len(keys) < storage.ReadKeysMax; i++ {
				o := m.order[i*5%len(m.order)]
				keys = append(keys, storage.ChainKey{Chain: o[0], Key: o[1]})
				if i%3 == 0 {
					keys = append(keys, storage.ChainKey{Chain: o[0], Key: fmt.Sprintf("absent-%d", i)})
				}
			}
			keys = keys[:storage.ReadKeysMax]
			checkReads(t, m.b, m.acknowledged, keys, readKeys(t, m.b, keys, 1))
			closeAndCheck(t, m.b, m.path)
		})
	}
}

// TestReadKeysNoKeys reads no keys: no error, and the reads untouched.
func TestReadKeysNoKeys(t *testing.T) {
	for _, c := range logConfigurations {
		t.Run(c.name, func(t *testing.T) {
			m := openKeyed(t, c.opts)
			commitChainKeys(t, m, "a", 20, 10)
			if err := m.b.ReadKeys(ctx, nil, nil); err != nil {
				t.Fatalf("ReadKeys of no keys into no reads: %v", err)
			}
			readKeys(t, m.b, nil, 3)
			readKeys(t, m.b, []storage.ChainKey{}, 1)
			closeAndCheck(t, m.b, m.path)
		})
	}
}

// TestReadKeysPanics checks the calls ReadKeys refuses: an empty key
// (alone or after others), more than storage.ReadKeysMax keys, fewer
// reads than keys; the backend reads on after each.
func TestReadKeysPanics(t *testing.T) {
	for _, c := range logConfigurations {
		t.Run(c.name, func(t *testing.T) {
			m := openKeyed(t, c.opts)
			commitChainKeys(t, m, "a", 20, 10)
			valid := keysOf(m, "a")
			tooMany := make([]storage.ChainKey, storage.ReadKeysMax+1)
			for i := range tooMany {
				tooMany[i] = valid[i%len(valid)]
			}
			for _, call := range []struct {
				what  string
				keys  []storage.ChainKey
				reads int
			}{
				{"an empty key", []storage.ChainKey{{Chain: "a", Key: ""}}, 1},
				{"an empty key after others", append(slices.Clone(valid), storage.ChainKey{Chain: "a"}), len(valid) + 1},
				{"an empty key of an unknown chain", []storage.ChainKey{valid[0], {Chain: "none"}}, 2},
				{"more than ReadKeysMax keys", tooMany, len(tooMany)},
				{"fewer reads than keys", valid, len(valid) - 1},
				{"no reads", valid[:1], 0},
			} {
				func() {
					defer func() {
						if recover() == nil {
							t.Errorf("ReadKeys of %s did not panic", call.what)
						}
					}()
					reads := make([]storage.KeyRead, call.reads)
					_ = m.b.ReadKeys(ctx, call.keys, reads)
				}()
				checkReads(t, m.b, m.acknowledged, valid, readKeys(t, m.b, valid, 0))
			}
			closeAndCheck(t, m.b, m.path)
		})
	}
}

// TestReadKeysCanceled checks that a canceled context, or one past its
// deadline, ends ReadKeys with the context's error.
func TestReadKeysCanceled(t *testing.T) {
	for _, c := range logConfigurations {
		t.Run(c.name, func(t *testing.T) {
			m := openKeyed(t, c.opts)
			commitChainKeys(t, m, "a", 20, 10)
			keys := append(keysOf(m, "a"), storage.ChainKey{Chain: "a", Key: "absent"})
			canceled, cancel := context.WithCancel(ctx)
			cancel()
			expired, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
			defer cancel()
			for _, ctx := range []context.Context{canceled, expired} {
				reads := make([]storage.KeyRead, len(keys))
				if err := m.b.ReadKeys(ctx, keys, reads); err == nil || !errors.Is(err, ctx.Err()) {
					t.Errorf("ReadKeys with a context ended by %v: %v", ctx.Err(), err)
				}
			}
			checkReads(t, m.b, m.acknowledged, keys, readKeys(t, m.b, keys, 0))
			closeAndCheck(t, m.b, m.path)
		})
	}
}

// TestReadKeysClosed checks that a closed backend refuses ReadKeys, with
// keys in the file, in the memory tables and absent.
func TestReadKeysClosed(t *testing.T) {
	for _, c := range logConfigurations {
		t.Run(c.name, func(t *testing.T) {
			m := openKeyed(t, c.opts)
			commitChainKeys(t, m, "a", 20, 10)
			checkpoint(t, m.b)
			commitChainKeys(t, m, "a", 20, 10)
			keys := append(keysOf(m, "a"), storage.ChainKey{Chain: "a", Key: "absent"}, storage.ChainKey{Chain: "none", Key: "k1"})
			readKeys(t, m.b, keys, 0) // the pool keeps a read transaction
			if err := m.b.Close(); err != nil {
				t.Fatal(err)
			}
			for _, keys := range [][]storage.ChainKey{keys, keys[:1], keys[len(keys)-1:]} {
				reads := make([]storage.KeyRead, len(keys))
				if err := m.b.ReadKeys(ctx, keys, reads); !errors.Is(err, storage.ErrClosed) {
					t.Errorf("ReadKeys of %d keys after Close: %v; want storage.ErrClosed", len(keys), err)
				}
			}
		})
	}
}

// TestReadKeysConcurrent reads batches from four goroutines while a writer
// appends keys of another chain in commits of one to forty and checkpoints:
// keys committed before the readers began are found with their entries,
// the writer's are absent or found with theirs, and keys never written
// are absent.
func TestReadKeysConcurrent(t *testing.T) {
	for _, c := range logConfigurations {
		t.Run(c.name, func(t *testing.T) {
			m := openKeyed(t, c.opts)
			commitChainKeys(t, m, "a", 300, 200)
			checkpoint(t, m.b)
			commitChainKeys(t, m, "b", 100, 200)
			before := maps.Clone(m.acknowledged)
			order := slices.Clone(m.order)
			const written = 400
			writerKey := func(seq uint64) string { return fmt.Sprintf("w-%d", seq) }
			writerData := func(seq uint64) []byte { return keyedData("w", writerKey(seq), seq, 100) }
			writerSeqs := map[string]uint64{}
			for seq := uint64(1); seq <= written; seq++ {
				writerSeqs[writerKey(seq)] = seq
			}

			var wg sync.WaitGroup
			done := make(chan struct{})
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(g), 1))
					for iteration := 0; ; iteration++ {
						select {
						case <-done:
							if iteration > 0 {
								return
							}
						default:
						}
						var keys []storage.ChainKey
						for range rng.IntN(200) + 1 {
							switch rng.IntN(4) {
							case 0, 1:
								o := order[rng.IntN(len(order))]
								keys = append(keys, storage.ChainKey{Chain: o[0], Key: o[1]})
							case 2:
								keys = append(keys, storage.ChainKey{Chain: "w", Key: writerKey(uint64(rng.IntN(written) + 1))})
							default:
								keys = append(keys, storage.ChainKey{Chain: []string{"a", "w", "none"}[rng.IntN(3)], Key: fmt.Sprintf("absent-%d", rng.IntN(1000))})
							}
						}
						reads := make([]storage.KeyRead, len(keys))
						if err := m.b.ReadKeys(ctx, keys, reads); err != nil {
							t.Errorf("ReadKeys: %v", err)
							return
						}
						for i, k := range keys {
							r := reads[i]
							want, ok := before[[2]string{k.Chain, k.Key}]
							if seq, w := writerSeqs[k.Key]; !ok && k.Chain == "w" && w && r.Found {
								want = keyedEntry{seq, writerData(seq)}
							}
							if r.Found != (want.seq != 0) || r.Seq != want.seq || !bytes.Equal(r.Data, want.data) {
								t.Errorf("ReadKeys: reads[%d] (%q, %q) = %d, %q, %v; want %d, %q", i, k.Chain, k.Key, r.Seq, r.Data, r.Found, want.seq, want.data)
								return
							}
						}
					}
				}()
			}
			for seq := uint64(1); seq <= written; {
				tx, err := m.b.Begin(ctx, true)
				if err != nil {
					t.Fatal(err)
				}
				for end := min(seq+uint64(seq%40), written); seq <= end; seq++ {
					if err := tx.Append(ctx, "w", storage.Record{Seq: seq, IdempotencyKey: writerKey(seq), Data: writerData(seq)}, testHead(seq)); err != nil {
						tx.Rollback()
						t.Fatal(err)
					}
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
				if seq%5 == 0 {
					checkpoint(t, m.b)
				}
			}
			close(done)
			wg.Wait()
			closeAndCheck(t, m.b, m.path)
		})
	}
}

// TestReadKeysBesideClose reads batches from four goroutines while the
// backend closes: each call reads as before or returns an error wrapping
// storage.ErrClosed.
func TestReadKeysBesideClose(t *testing.T) {
	for _, c := range logConfigurations {
		t.Run(c.name, func(t *testing.T) {
			m := openKeyed(t, c.opts)
			commitChainKeys(t, m, "a", 200, 200)
			checkpoint(t, m.b)
			commitChainKeys(t, m, "b", 50, 200)
			keys := append(keysOf(m, "a"), keysOf(m, "b")...)
			keys = append(keys, storage.ChainKey{Chain: "a", Key: "absent"}, storage.ChainKey{Chain: "none", Key: "k1"})
			var started, wg sync.WaitGroup
			for range 4 {
				started.Add(1)
				wg.Add(1)
				go func() {
					defer wg.Done()
					once := sync.OnceFunc(started.Done)
					defer once()
					for calls := 0; ; calls++ {
						if calls == 1 {
							once()
						}
						reads := make([]storage.KeyRead, len(keys))
						if err := m.b.ReadKeys(ctx, keys, reads); err != nil {
							if !errors.Is(err, storage.ErrClosed) {
								t.Errorf("ReadKeys beside Close: %v; want storage.ErrClosed", err)
							}
							return
						}
						for i, k := range keys {
							e, ok := m.acknowledged[[2]string{k.Chain, k.Key}]
							if r := reads[i]; r.Found != ok || r.Seq != e.seq || !bytes.Equal(r.Data, e.data) {
								t.Errorf("ReadKeys beside Close: reads[%d] (%q, %q) = %d, %q, %v; want %v, %d, %q", i, k.Chain, k.Key, r.Seq, r.Data, r.Found, ok, e.seq, e.data)
								return
							}
						}
					}
				}()
			}
			started.Wait()
			if err := m.b.Close(); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			closeAndCheck(t, m.b, m.path)
		})
	}
}
