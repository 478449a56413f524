package bolt_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"pgregory.net/rapid"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// recordEntryKey is the EntryKey of testRecord's entries: the entry
// "<chain>-entry-<n>" holds the key "<chain>-key-<n>".
func recordEntryKey(entry []byte) ([]byte, bool) {
	i := bytes.LastIndex(entry, []byte("-entry-"))
	if i < 0 {
		return nil, false
	}
	return fmt.Appendf(nil, "%s-key-%s", entry[:i], entry[i+len("-entry-"):]), true
}

// entryKeyCounter wraps recordEntryKey and counts its calls: the backend
// calls EntryKey only to confirm a seq map's candidate, so the count is
// the candidates ReadKey read, and last is the key the latest one held.
type entryKeyCounter struct {
	calls atomic.Int64
	mu    sync.Mutex
	last  string
}

func (c *entryKeyCounter) entryKey(entry []byte) ([]byte, bool) {
	c.calls.Add(1)
	key, ok := recordEntryKey(entry)
	c.mu.Lock()
	c.last = string(key)
	c.mu.Unlock()
	return key, ok
}

// openCounted opens a new file with opts and an entryKeyCounter's
// EntryKey; it is closed and checked at cleanup.
func openCounted(t *testing.T, opts bolt.Options) (*bolt.Backend, *entryKeyCounter) {
	t.Helper()
	counter := &entryKeyCounter{}
	opts.EntryKey = counter.entryKey
	path := filepath.Join(t.TempDir(), "ledger.db")
	b, err := bolt.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeAndCheck(t, b, path) })
	return b, counter
}

func (c *entryKeyCounter) lastKey() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// readKeyAnswer is everything ReadKey returns.
type readKeyAnswer struct {
	seq   uint64
	data  string
	found bool
	err   error
}

func readKey(b *bolt.Backend, chain, key string) readKeyAnswer {
	seq, data, found, err := b.ReadKey(ctx, chain, key)
	return readKeyAnswer{seq, string(data), found, err}
}

// seqMapQuery is a ReadKey of the agreement test, with what the model of
// committed entries expects (found at seq, or not found).
type seqMapQuery struct {
	chain, key string
	seq        uint64 // 0: not found
}

// seqMapQueries are the keys of chains a (heads["a"] entries) and b, a's
// keys asked of b and c (another chain, one without entries), keys never
// committed, and a chain the file does not have.
func seqMapQueries(heads map[string]uint64) []seqMapQuery {
	var qs []seqMapQuery
	for _, ch := range []string{"a", "b"} {
		for seq := uint64(1); seq <= heads[ch]+2; seq++ { // two past the head: not yet committed
			want := seq
			if seq > heads[ch] {
				want = 0
			}
			qs = append(qs, seqMapQuery{ch, testRecord(ch, seq).IdempotencyKey, want})
		}
	}
	for seq := uint64(1); seq <= heads["a"]; seq += 7 {
		key := testRecord("a", seq).IdempotencyKey
		qs = append(qs, seqMapQuery{"b", key, 0}, seqMapQuery{"c", key, 0}, seqMapQuery{"unknown", key, 0})
	}
	return append(qs, seqMapQuery{"a", "never", 0}, seqMapQuery{"b", "b-key-0", 0})
}

// checkAgreement asks each query of the handle with the map and of the one
// without: the answers must be equal and what the model expects, one key
// at a time (ReadKey) and all in one batch (ReadKeys); and the probe may
// not rule out a committed key (the map answers for the filter).
func checkAgreement(t *testing.T, stage string, mapped, plain *bolt.Backend, heads map[string]uint64) {
	t.Helper()
	qs := seqMapQueries(heads)
	batch := make([]storage.ChainKey, len(qs))
	for i, q := range qs {
		batch[i] = storage.ChainKey{Chain: q.chain, Key: q.key}
	}
	var batchReads [2][]storage.KeyRead
	for h, b := range []*bolt.Backend{mapped, plain} {
		batchReads[h] = make([]storage.KeyRead, len(batch))
		if err := b.ReadKeys(ctx, batch, batchReads[h]); err != nil {
			t.Fatalf("%s: ReadKeys: %v", stage, err)
		}
	}
	for i, q := range qs {
		got, want := readKey(mapped, q.chain, q.key), readKey(plain, q.chain, q.key)
		if got != want {
			t.Fatalf("%s: ReadKey(%s, %q) with a seq map = %+v, without = %+v", stage, q.chain, q.key, got, want)
		}
		model := readKeyAnswer{}
		if q.seq != 0 {
			model = readKeyAnswer{q.seq, string(testRecord(q.chain, q.seq).Data), true, nil}
		}
		if got != model {
			t.Fatalf("%s: ReadKey(%s, %q) = %+v, committed %+v", stage, q.chain, q.key, got, model)
		}
		for h, name := range []string{"with a seq map", "without"} {
			r := batchReads[h][i]
			if (readKeyAnswer{r.Seq, string(r.Data), r.Found, nil}) != model {
				t.Fatalf("%s: ReadKeys(%s, %q) %s = %d, %q, %v; committed %+v", stage, q.chain, q.key, name, r.Seq, r.Data, r.Found, model)
			}
		}
		if q.seq != 0 && !mapped.MayHoldKey(q.chain, q.key) {
			t.Fatalf("%s: MayHoldKey(%s, %q) with a seq map = false for a committed key", stage, q.chain, q.key)
		}
	}
}

// checkReadsThroughMap reads every committed key of the chains of heads,
// all in the file by now, and checks that each one's answer came from the seq
// map: EntryKey read one candidate, which held the key.
func checkReadsThroughMap(t *testing.T, stage string, b *bolt.Backend, c *entryKeyCounter, heads map[string]uint64) {
	t.Helper()
	if !bolt.HasSeqMap(b) {
		t.Fatalf("%s: no seq map on a writable handle with an EntryKey", stage)
	}
	for ch, head := range heads {
		for seq := uint64(1); seq <= head; seq++ {
			key := testRecord(ch, seq).IdempotencyKey
			before := c.calls.Load()
			if _, _, found, err := b.ReadKey(ctx, ch, key); err != nil || !found {
				t.Fatalf("%s: ReadKey(%s, %q) = %v, %v", stage, ch, key, found, err)
			}
			if n := c.calls.Load() - before; n != 1 || c.lastKey() != key {
				t.Fatalf("%s: ReadKey(%s, %q) read %d candidates, the last holding %q; want its own entry from the seq map",
					stage, ch, key, n, c.lastKey())
			}
		}
	}
}

// TestSeqMapReadKeyAgrees writes the same commits to two files, one
// opened with an EntryKey (a seq map) and one without, and checks at each
// stage that ReadKey answers the same on both, and as committed: keys
// found, missing, of another chain, of a chain the file lacks; after
// commits not yet checkpointed, after checkpoints, after a reopen and a
// crash; then each file opened the other way. Where every key is in the
// file, the handle with the map must answer each one from its candidate.
func TestSeqMapReadKeyAgrees(t *testing.T) {
	for _, c := range logConfigurations {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			mappedPath, plainPath := filepath.Join(dir, "mapped.db"), filepath.Join(dir, "plain.db")
			counter := &entryKeyCounter{}
			withKey := c.opts
			withKey.EntryKey = counter.entryKey
			open := func(path string, opts bolt.Options) *bolt.Backend {
				t.Helper()
				b, err := bolt.Open(path, opts)
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			mapped, plain := open(mappedPath, withKey), open(plainPath, c.opts)
			defer func() { mapped.Close(); plain.Close() }()
			heads := map[string]uint64{}
			commit := func(ch string, to uint64) {
				t.Helper()
				commitN(t, mapped, ch, heads[ch]+1, to)
				commitN(t, plain, ch, heads[ch]+1, to)
				heads[ch] = to
			}
			checkpoint := func() {
				t.Helper()
				for _, b := range []*bolt.Backend{mapped, plain} {
					if err := bolt.Checkpoint(b); err != nil {
						t.Fatal(err)
					}
				}
			}
			reopen := func(crash bool) {
				t.Helper()
				for _, b := range []*bolt.Backend{mapped, plain} {
					if crash {
						bolt.Abandon(b)
					} else if err := b.Close(); err != nil {
						t.Fatal(err)
					}
				}
				mapped, plain = open(mappedPath, withKey), open(plainPath, c.opts)
			}

			commit("a", 40) // a run
			commit("a", 45) // the recent keys
			commit("b", 20)
			checkAgreement(t, "commits", mapped, plain, heads)
			if c.opts.Log == bolt.LogOff { // the commits are in the file
				checkReadsThroughMap(t, "commits", mapped, counter, heads)
			}
			checkpoint()
			checkAgreement(t, "checkpoint", mapped, plain, heads)
			checkReadsThroughMap(t, "checkpoint", mapped, counter, heads)
			commit("b", 60)
			commit("a", 48)
			checkAgreement(t, "commits after a checkpoint", mapped, plain, heads)
			reopen(false)
			checkAgreement(t, "reopen", mapped, plain, heads)
			checkReadsThroughMap(t, "reopen", mapped, counter, heads)
			commit("a", 70)
			reopen(true)
			checkAgreement(t, "crash", mapped, plain, heads)
			checkReadsThroughMap(t, "crash", mapped, counter, heads) // a writable open checkpoints the log
			// Each file opened the other way.
			if err := mapped.Close(); err != nil {
				t.Fatal(err)
			}
			if err := plain.Close(); err != nil {
				t.Fatal(err)
			}
			mapped, plain = open(plainPath, withKey), open(mappedPath, c.opts)
			checkAgreement(t, "swapped", mapped, plain, heads)
			checkReadsThroughMap(t, "swapped", mapped, counter, heads)
		})
	}
}

// TestSeqMapCorrectsPlantedCandidate plants, in a handle's seq map, the
// seq of another key's entry for a key of the file and for a key it lacks:
// ReadKey must read the candidate, find it wanting and answer from the key
// runs.
func TestSeqMapCorrectsPlantedCandidate(t *testing.T) {
	for _, c := range logConfigurations {
		t.Run(c.name, func(t *testing.T) {
			b, counter := openCounted(t, c.opts)
			commitN(t, b, "a", 1, 40)
			if err := bolt.Checkpoint(b); err != nil {
				t.Fatal(err)
			}
			key := testRecord("a", 7).IdempotencyKey
			if err := bolt.PlantSeqMapCandidate(b, "a", key, 30); err != nil {
				t.Fatal(err)
			}
			before := counter.calls.Load()
			if got := readKey(b, "a", key); got != (readKeyAnswer{7, string(testRecord("a", 7).Data), true, nil}) {
				t.Fatalf("ReadKey(a, %q) with seq 30 planted = %+v; want seq 7", key, got)
			}
			if n := counter.calls.Load() - before; n != 1 || counter.lastKey() != testRecord("a", 30).IdempotencyKey {
				t.Fatalf("the planted candidate was read %d times, the last holding %q", n, counter.lastKey())
			}
			if err := bolt.PlantSeqMapCandidate(b, "a", "new", 8); err != nil {
				t.Fatal(err)
			}
			if got := readKey(b, "a", "new"); got != (readKeyAnswer{}) {
				t.Fatalf("ReadKey of a key never committed, seq 8 planted = %+v; want not found", got)
			}
		})
	}
}

// TestUseEntryKey: a handle opened without an EntryKey gets a seq map from
// UseEntryKey and reads through it; a second call keeps the first
// function; read-only handles, and handles whose SeqMapBytesMax is negative
// or below the map's size, have none and read through the key runs alone.
func TestUseEntryKey(t *testing.T) {
	// written is a closed file with chain a, seqs 1..40.
	written := func(t *testing.T, opts bolt.Options) string {
		t.Helper()
		path := filepath.Join(t.TempDir(), "ledger.db")
		b, err := bolt.Open(path, opts)
		if err != nil {
			t.Fatal(err)
		}
		commitN(t, b, "a", 1, 40)
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		return path
	}
	heads := map[string]uint64{"a": 40}
	// readsAll checks ReadKey of every key, and of keys never committed,
	// and how many candidates c saw meanwhile.
	readsAll := func(t *testing.T, b *bolt.Backend, c *entryKeyCounter, wantCalls int64) {
		t.Helper()
		before := c.calls.Load()
		for seq := uint64(1); seq <= heads["a"]; seq++ {
			want := readKeyAnswer{seq, string(testRecord("a", seq).Data), true, nil}
			if got := readKey(b, "a", testRecord("a", seq).IdempotencyKey); got != want {
				t.Fatalf("ReadKey(a, seq %d) = %+v, want %+v", seq, got, want)
			}
		}
		for _, q := range [][2]string{{"a", "never"}, {"b", "a-key-1"}} {
			if got := readKey(b, q[0], q[1]); got != (readKeyAnswer{}) {
				t.Fatalf("ReadKey(%s, %q) = %+v, want not found", q[0], q[1], got)
			}
		}
		if n := c.calls.Load() - before; n != wantCalls {
			t.Fatalf("%d candidates read, want %d", n, wantCalls)
		}
	}
	for _, c := range logConfigurations {
		t.Run(c.name+"/gives a map", func(t *testing.T) {
			path := written(t, c.opts)
			b, err := bolt.Open(path, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer closeAndCheck(t, b, path)
			if bolt.HasSeqMap(b) {
				t.Fatal("a seq map without an EntryKey")
			}
			first, second := &entryKeyCounter{}, &entryKeyCounter{}
			b.UseEntryKey(first.entryKey)
			if !bolt.HasSeqMap(b) {
				t.Fatal("no seq map after UseEntryKey")
			}
			readsAll(t, b, first, 40)
			b.UseEntryKey(second.entryKey)
			readsAll(t, b, first, 40)
			if n := second.calls.Load(); n != 0 {
				t.Fatalf("a second UseEntryKey replaced the first: it confirmed %d candidates", n)
			}
			// Keys committed after it reach the map with the file.
			commitN(t, b, "a", 41, 50)
			if err := bolt.Checkpoint(b); err != nil {
				t.Fatal(err)
			}
			for seq := uint64(41); seq <= 50; seq++ {
				if got, ok := bolt.SeqMapCandidate(b, "a", testRecord("a", seq).IdempotencyKey); !ok || got != seq {
					t.Fatalf("seq map after a commit: seq %d as %d, %v", seq, got, ok)
				}
			}
		})
	}
	t.Run("read-only", func(t *testing.T) {
		path := written(t, bolt.Options{Log: bolt.LogOff})
		for _, viaOption := range []bool{true, false} {
			counter := &entryKeyCounter{}
			opts := bolt.Options{ReadOnly: true}
			if viaOption {
				opts.EntryKey = counter.entryKey
			}
			b, err := bolt.Open(path, opts)
			if err != nil {
				t.Fatal(err)
			}
			b.UseEntryKey(counter.entryKey)
			if bolt.HasSeqMap(b) {
				t.Fatalf("a read-only handle (EntryKey in the options: %v) has a seq map", viaOption)
			}
			readsAll(t, b, counter, 0)
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
	// The file holds 40 keys: a map holds them at 80% in 50 slots of 8
	// bytes. A bound below the filter's map (81,920 slots: its capacity is
	// keyFilterCapacityMin, 65,536) gives a map of the bound's size.
	const keysMapBytes = 50 * 8
	for _, bound := range []struct {
		name    string
		max     int64
		wantMap bool
	}{
		{"SeqMapBytesMax negative", -1, false},
		{"SeqMapBytesMax below the keys", keysMapBytes - 1, false},
		{"SeqMapBytesMax just enough for the keys", keysMapBytes, true},
		{"SeqMapBytesMax below the filter's map", 81_920*8 - 1, true},
	} {
		for _, viaOption := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/EntryKey in the options %v", bound.name, viaOption), func(t *testing.T) {
				opts := bolt.Options{Log: bolt.LogOff, SeqMapBytesMax: bound.max}
				path := written(t, opts)
				counter := &entryKeyCounter{}
				if viaOption {
					opts.EntryKey = counter.entryKey
				}
				b, err := bolt.Open(path, opts)
				if err != nil {
					t.Fatal(err)
				}
				defer closeAndCheck(t, b, path)
				if !viaOption {
					b.UseEntryKey(counter.entryKey)
				}
				if bolt.HasSeqMap(b) != bound.wantMap {
					t.Fatalf("seq map %v, want %v", bolt.HasSeqMap(b), bound.wantMap)
				}
				wantCalls := int64(0)
				if bound.wantMap {
					wantCalls = 40
				}
				readsAll(t, b, counter, wantCalls)
				// The key filter is there without the map: it rules out
				// most keys never committed (about 1% false positives).
				maybe := 0
				for i := range 20 {
					if b.MayHoldKey("a", fmt.Sprint("never-", i)) {
						maybe++
					}
				}
				if maybe > 10 {
					t.Fatalf("the probe may hold %d of 20 keys never committed: no key filter", maybe)
				}
			})
		}
	}
	t.Run("chain.OpenBackend", func(t *testing.T) {
		backend, err := bolt.Open(filepath.Join(t.TempDir(), "ledger.db"), bolt.Options{Log: bolt.LogOff})
		if err != nil {
			t.Fatal(err)
		}
		db, err := chain.OpenBackend(backend, chain.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if !bolt.HasSeqMap(backend) {
			t.Fatal("no seq map after chain.OpenBackend")
		}
		var first []chain.Entry
		for i := range 20 {
			res, err := db.Append(ctx, chain.Request{Chain: "c", IdempotencyKey: fmt.Sprintf("k-%d", i), Type: "t/v1", Payload: []byte{byte(i)}})
			if err != nil {
				t.Fatal(err)
			}
			first = append(first, res.Entry)
		}
		for i, e := range first {
			key := fmt.Sprintf("k-%d", i)
			if got, ok := bolt.SeqMapCandidate(backend, "c", key); !ok || got != e.Seq {
				t.Fatalf("seq map: %q as %d, %v; want %d", key, got, ok, e.Seq)
			}
			seq, data, found, err := backend.ReadKey(ctx, "c", key)
			if k, ok := chain.RecordKey(data); err != nil || !found || seq != e.Seq || !ok || string(k) != key {
				t.Fatalf("ReadKey(c, %q) = %d, %v, %v, holding %q", key, seq, found, err, k)
			}
			res, err := db.Append(ctx, chain.Request{Chain: "c", IdempotencyKey: key, Type: "t/v1", Payload: []byte{byte(i)}})
			if err != nil || !res.Replayed || res.Entry.Seq != e.Seq || res.Entry.Hash != e.Hash {
				t.Fatalf("retry of %q = seq %d, replayed %v, %v; want seq %d replayed", key, res.Entry.Seq, res.Replayed, err, e.Seq)
			}
		}
	})
}

// TestSeqMapConcurrentReadKey runs ReadKey on several goroutines while one
// appends keys and, with the log, another forces checkpoints (which add
// the keys to the seq map while the readers search it). Every key whose
// commit was acknowledged before the read began must be found with its seq
// and bytes; keys never committed must not be.
func TestSeqMapConcurrentReadKey(t *testing.T) {
	chains := []string{"a", "b", "c"}
	const rounds, readers = 60, 4
	for _, c := range logConfigurations {
		t.Run(c.name, func(t *testing.T) {
			b, counter := openCounted(t, c.opts)
			var heads [3]atomic.Uint64 // acknowledged
			var done atomic.Bool
			errs := make(chan error, readers+2)
			var wg, started sync.WaitGroup
			started.Add(readers)

			wg.Add(1)
			go func() { // the writer
				defer wg.Done()
				defer done.Store(true)
				started.Wait() // every reader reads while it appends
				for r := range rounds {
					i := r % len(chains)
					from := heads[i].Load() + 1
					to := from + 2 // the recent keys
					if r%2 == 1 {
						to = from + 39 // a run
					}
					if err := appendRecords(b, chains[i], from, to); err != nil {
						errs <- err
						return
					}
					heads[i].Store(to)
				}
			}()
			if c.opts.Log == bolt.LogOn {
				wg.Add(1)
				go func() { // checkpoints beside the writer
					defer wg.Done()
					for !done.Load() {
						if err := bolt.Checkpoint(b); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			read := func(r *rand.Rand) error {
				i := r.IntN(len(chains))
				ch := chains[i]
				head := heads[i].Load()
				if head > 0 {
					seq := 1 + r.Uint64N(head)
					want := testRecord(ch, seq)
					got, data, found, err := b.ReadKey(ctx, ch, want.IdempotencyKey)
					if err != nil || !found || got != seq || !bytes.Equal(data, want.Data) {
						return fmt.Errorf("ReadKey(%s, %q) = %d, %q, %v, %v; committed %d, %q", ch, want.IdempotencyKey, got, data, found, err, seq, want.Data)
					}
				}
				never := fmt.Sprintf("%s-key-never-%d", ch, r.IntN(1000))
				if _, _, found, err := b.ReadKey(ctx, ch, never); err != nil || found {
					return fmt.Errorf("ReadKey(%s, %q) of a key never committed = %v, %v", ch, never, found, err)
				}
				// Another chain's key under this chain's name.
				other := chains[(i+1)%len(chains)]
				if h := heads[(i+1)%len(chains)].Load(); h > 0 {
					key := testRecord(other, 1+r.Uint64N(h)).IdempotencyKey
					if _, _, found, err := b.ReadKey(ctx, ch, key); err != nil || found {
						return fmt.Errorf("ReadKey(%s, %q) of chain %s's key = %v, %v", ch, key, other, found, err)
					}
				}
				return nil
			}
			for reader := range readers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(reader), 1))
					err := read(r)
					started.Done()
					for err == nil && !done.Load() {
						err = read(r)
					}
					if err != nil {
						errs <- err
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			// Everything in the file now: each key is read from the map.
			if err := bolt.Checkpoint(b); err != nil {
				t.Fatal(err)
			}
			final := map[string]uint64{}
			for i, ch := range chains {
				final[ch] = heads[i].Load()
			}
			checkReadsThroughMap(t, "after the writer", b, counter, final)
		})
	}
}

// appendRecords commits testRecord(chain, from..to) in one transaction,
// for goroutines that may not call t.Fatal.
func appendRecords(b *bolt.Backend, chain string, from, to uint64) error {
	tx, err := b.Begin(ctx, true)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for seq := from; seq <= to; seq++ {
		if err := tx.Append(ctx, chain, testRecord(chain, seq), testHead(seq)); err != nil {
			return fmt.Errorf("append %s seq %d: %w", chain, seq, err)
		}
	}
	return tx.Commit()
}

// machineEntryKey is the EntryKey of keyedMachine's entries,
// "<chain>/<key>/<seq>", whose keys hold no '/'.
func machineEntryKey(entry []byte) ([]byte, bool) {
	i := bytes.LastIndexByte(entry, '/')
	if i < 0 {
		return nil, false
	}
	j := bytes.LastIndexByte(entry[:i], '/')
	if j < 0 || j+1 == i {
		return nil, false
	}
	return entry[j+1 : i], true
}

// TestReadKeyRapidSeqMap is TestReadKeyRapid's machine with an EntryKey, so
// that ReadKey reads the seq map's candidates: every acknowledged key is
// found with its seq and bytes (and the probe does not rule it out), keys
// never committed are not, and a wrong
// candidate planted for a random key (another key's seq of its chain, or a
// seq past its head) is corrected and stays so through the steps after.
func TestReadKeyRapidSeqMap(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := newKeyedMachine(t, rt)
		m.opts.EntryKey = machineEntryKey
		m.reopen(rt, false) // a new file: the same machine, now with a map
		actions := m.actions()
		actions["plant"] = func(rt *rapid.T) {
			if len(m.order) == 0 {
				return
			}
			k := rapid.SampledFrom(m.order).Draw(rt, "key")
			chain := k[0]
			if rapid.Bool().Draw(rt, "new key") {
				k[1] = fmt.Sprintf("planted-%d", m.next)
			}
			seq := rapid.Uint64Range(0, m.heads[chain]+2).Draw(rt, "planted seq")
			if !bolt.HasSeqMap(m.b) {
				rt.Fatal("no seq map on a writable handle with an EntryKey")
			}
			if err := bolt.PlantSeqMapCandidate(m.b, chain, k[1], seq); err != nil {
				rt.Skip(err) // the chain is not in the file yet
			}
			e, ok := m.acknowledged[k]
			got := readKey(m.b, chain, k[1])
			if want := (readKeyAnswer{e.seq, string(e.data), ok, nil}); got != want {
				rt.Fatalf("ReadKey(%s, %q) with seq %d planted = %+v; want %+v", chain, k[1], seq, got, want)
			}
		}
		actions[""] = func(rt *rapid.T) {
			if !bolt.HasSeqMap(m.b) {
				rt.Fatal("no seq map on a writable handle with an EntryKey")
			}
			m.checkReadKey(rt)
			for k := range m.acknowledged {
				if !m.b.MayHoldKey(k[0], k[1]) { // the map answers for the filter
					rt.Fatalf("MayHoldKey(%q, %q) = false for an acknowledged key", k[0], k[1])
				}
			}
		}
		rt.Repeat(actions)
	})
}

// TestSeqMapPartialRulesNothingOut repoints two keys of a closed file, one
// in a run and one in the recent keys, at seqs too large for a slot: the
// map built at the next Open leaves them out, so it must say it is partial
// and leave ruling keys out to the filter. MayHoldKey must still say
// "maybe" for them, and ReadKey must report the damage (an index record
// that names a seq the file lacks) as TestReadKeyIndexPointsNowhere
// expects, not "absent".
func TestSeqMapPartialRulesNothingOut(t *testing.T) {
	for _, c := range logConfigurations {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ledger.db")
			b, err := bolt.Open(path, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			commitN(t, b, "a", 1, 40)  // a run
			commitN(t, b, "a", 41, 43) // the recent keys
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			damaged := map[string]uint64{
				testRecord("a", 7).IdempotencyKey:  1<<40 - 1, // the first seq a slot cannot hold
				testRecord("a", 42).IdempotencyKey: 1<<40 + 5,
			}
			raw, err := bbolt.Open(path, bolt.FileMode, bolt.BboltOptions(bolt.Options{}))
			if err != nil {
				t.Fatal(err)
			}
			err = raw.Update(func(btx *bbolt.Tx) error {
				for key, seq := range damaged {
					if err := bolt.SetKeySeq(btx, "a", key, seq); err != nil {
						return err
					}
				}
				return nil
			})
			raw.Close()
			if err != nil {
				t.Fatal(err)
			}
			opts := c.opts
			opts.EntryKey = recordEntryKey
			if b, err = bolt.Open(path, opts); err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if !bolt.HasSeqMap(b) || !bolt.SeqMapPartial(b) {
				t.Fatalf("seq map %v, partial %v; want a partial map", bolt.HasSeqMap(b), bolt.SeqMapPartial(b))
			}
			for key := range damaged {
				if !b.MayHoldKey("a", key) {
					t.Fatalf("MayHoldKey(a, %q) = false for a key the index holds", key)
				}
				if seq, _, found, err := b.ReadKey(ctx, "a", key); !errors.Is(err, storage.ErrCorrupt) || found {
					t.Fatalf("ReadKey(a, %q), mapped to a seq the file lacks = %d, %v, %v; want ErrCorrupt", key, seq, found, err)
				}
			}
			for _, seq := range []uint64{1, 8, 41, 43} {
				want := testRecord("a", seq)
				if got := readKey(b, "a", want.IdempotencyKey); got != (readKeyAnswer{seq, string(want.Data), true, nil}) {
					t.Fatalf("ReadKey(a, %q) = %+v, want seq %d", want.IdempotencyKey, got, seq)
				}
			}
		})
	}
}
