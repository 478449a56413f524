package bolt_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"pgregory.net/rapid"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// keyedEntry is an acknowledged keyed entry of the model.
type keyedEntry struct {
	seq  uint64
	data []byte
}

// keyedMachine drives a backend, in one of logConfigurations, through
// random commits of keys (small and large transactions, new chains, the
// same key on other chains, duplicates refused), rolled-back transactions,
// checkpoints, reopens and crashes, and keeps a plain model of what was
// acknowledged. The rapid tests of the probe and of ReadKey check the
// backend against it.
type keyedMachine struct {
	opts         bolt.Options
	path         string
	b            *bolt.Backend
	heads        map[string]uint64        // committed seqs
	acknowledged map[[2]string]keyedEntry // chain, key -> entry
	order        [][2]string              // the acknowledged keys in commit order
	next         int                      // the number of the next new key
}

// newKeyedMachine opens a new file; the backend is closed when the test
// ends.
func newKeyedMachine(t *testing.T, rt *rapid.T) *keyedMachine {
	c := rapid.SampledFrom(logConfigurations).Draw(rt, "configuration")
	m := &keyedMachine{opts: c.opts, heads: map[string]uint64{}, acknowledged: map[[2]string]keyedEntry{},
		path: filepath.Join(t.TempDir(), fmt.Sprintf("ledger-%d.db", rapid.IntRange(0, 1<<30).Draw(rt, "file")))}
	var err error
	if m.b, err = bolt.Open(m.path, m.opts); err != nil {
		rt.Fatal(err)
	}
	t.Cleanup(func() { m.b.Close() })
	return m
}

// actions are the machine's own steps, for rapid.T.Repeat beside a test's
// checks.
func (m *keyedMachine) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"commit":     func(rt *rapid.T) { m.commit(rt, true) },
		"rollback":   func(rt *rapid.T) { m.commit(rt, false) },
		"checkpoint": func(rt *rapid.T) { _ = bolt.Checkpoint(m.b) },
		"reopen":     func(rt *rapid.T) { m.reopen(rt, false) },
		"crash":      func(rt *rapid.T) { m.reopen(rt, true) },
		"readChain":  m.readChain,
	}
}

// readChain reads every acknowledged entry of one chain by seq, in a
// drawn order, three times over in one read transaction (enough reads of
// one chain for the transaction to map its segments), and a seq past the
// chain's head.
func (m *keyedMachine) readChain(rt *rapid.T) {
	chain := fmt.Sprintf("rapid/%d", rapid.IntRange(0, 5).Draw(rt, "chain"))
	entries := make([][]byte, m.heads[chain])
	for k, e := range m.acknowledged {
		if k[0] == chain {
			entries[e.seq-1] = e.data
		}
	}
	order := make([]int, len(entries))
	for i := range order {
		order[i] = i
	}
	order = rapid.Permutation(order).Draw(rt, "order")
	tx, err := m.b.Begin(ctx, false)
	if err != nil {
		rt.Fatal(err)
	}
	defer tx.Rollback()
	for range 3 {
		for _, i := range order {
			got, err := tx.Entry(ctx, chain, uint64(i+1))
			if err != nil || string(got) != string(entries[i]) {
				rt.Fatalf("%s seq %d: %q, %v; want %q", chain, i+1, got, err, entries[i])
			}
		}
	}
	if _, err := tx.Entry(ctx, chain, uint64(len(entries)+1)); !errors.Is(err, storage.ErrNotFound) {
		rt.Fatalf("%s seq %d past the head: %v, want storage.ErrNotFound", chain, len(entries)+1, err)
	}
}

func (m *keyedMachine) commit(rt *rapid.T, keep bool) {
	n := rapid.SampledFrom([]int{1, 3, 15, 16, 40}).Draw(rt, "keys")
	chains := rapid.IntRange(1, 6).Draw(rt, "chains")
	tx, err := m.b.Begin(ctx, true)
	if err != nil {
		rt.Fatal(err)
	}
	// A draw may end the case while the writer slot is held (rapid stops a
	// case that runs out of data): the deferred rollback frees it for Close.
	defer tx.Rollback()
	seqs := map[string]uint64{}
	batch := map[[2]string]keyedEntry{}
	var order [][2]string
	var first string
	for i := range n {
		chain := fmt.Sprintf("rapid/%d", (m.next+i)%chains)
		key := fmt.Sprintf("k%d", m.next+i)
		if i == 0 {
			first = key
		} else if rapid.IntRange(0, 9).Draw(rt, "reuse") == 0 {
			key = first // the same key on another chain, or a duplicate refused
		}
		seq := m.heads[chain] + seqs[chain] + 1
		data := []byte(fmt.Sprintf("%s/%s/%d", chain, key, seq))
		err := tx.Append(ctx, chain, storage.Record{Seq: seq, IdempotencyKey: key, Data: data}, testHead(seq))
		if errors.Is(err, storage.ErrDuplicate) {
			continue // a key this chain already holds: refused, nothing written
		}
		if err != nil {
			rt.Fatal(err)
		}
		seqs[chain]++
		batch[[2]string{chain, key}] = keyedEntry{seq, data}
		order = append(order, [2]string{chain, key})
	}
	m.next += n
	if !keep {
		if err := tx.Rollback(); err != nil {
			rt.Fatal(err)
		}
		return
	}
	if err := tx.Commit(); err != nil {
		rt.Fatal(err)
	}
	for ch, s := range seqs {
		m.heads[ch] += s
	}
	for _, k := range order {
		m.acknowledged[k] = batch[k]
	}
	m.order = append(m.order, order...)
}

func (m *keyedMachine) reopen(rt *rapid.T, crash bool) {
	if crash {
		bolt.Abandon(m.b)
	} else if err := m.b.Close(); err != nil {
		rt.Fatal(err)
	}
	var err error
	if m.b, err = bolt.Open(m.path, m.opts); err != nil {
		rt.Fatal(err)
	}
}
