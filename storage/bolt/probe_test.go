package bolt_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt"
	"github.com/ledgerworks/ledger/storage/storagetest"
)

func TestKeyProberConformance(t *testing.T) {
	for _, c := range logConfigurations {
		t.Run(c.name, func(t *testing.T) { storagetest.RunKeyProber(t, opener(c.opts)) })
	}
}

// probeLedger appends keyed entries to a backend, in transactions of
// several sizes, and remembers them.
type probeLedger struct {
	t     *testing.T
	b     storage.Backend
	heads map[string]uint64
	keys  [][2]string
}

func (l *probeLedger) commit(chains, keys int, prefix string) {
	l.t.Helper()
	tx, err := l.b.Begin(ctx, true)
	if err != nil {
		l.t.Fatal(err)
	}
	for i := range keys {
		chain := fmt.Sprintf("probe/%d", i%chains)
		key := fmt.Sprintf("%s-%d", prefix, i)
		l.heads[chain]++
		seq := l.heads[chain]
		if err := tx.Append(ctx, chain, storage.Record{Seq: seq, IdempotencyKey: key, Data: []byte(key)}, testHead(seq)); err != nil {
			l.t.Fatal(err)
		}
		l.keys = append(l.keys, [2]string{chain, key})
	}
	if err := tx.Commit(); err != nil {
		l.t.Fatal(err)
	}
}

// maybes counts the new keys the probe cannot rule out, on known chains
// and on chains the file does not have, and fails on a committed key it
// rules out.
func (l *probeLedger) maybes(p storage.KeyProber, n int) int {
	l.t.Helper()
	for _, k := range l.keys {
		if !p.MayHoldKey(k[0], k[1]) {
			l.t.Fatalf("MayHoldKey(%q, %q) = false for a committed key", k[0], k[1])
		}
	}
	maybe := 0
	for i := range n {
		chain := fmt.Sprintf("probe/%d", i%4)
		if i%5 == 0 {
			chain = fmt.Sprintf("probe/absent-%d", i)
		}
		if p.MayHoldKey(chain, fmt.Sprintf("new-%d", i)) {
			maybe++
		}
	}
	return maybe
}

// TestProbeRulesOutNewKeys checks that the probe is useful: it rules out
// nearly every new key (the filter's false positives are about 1%), from a
// new file on, in every commit mode, and from the moment a ledger is
// reopened; a read-only handle has no filter and is always unsure.
func TestProbeRulesOutNewKeys(t *testing.T) {
	for _, c := range logConfigurations {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ledger.db")
			b, err := bolt.Open(path, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			l := &probeLedger{t: t, b: b, heads: map[string]uint64{}}
			const asked = 2000
			if got := l.maybes(b, asked); got != 0 {
				t.Fatalf("empty ledger: %d of %d new keys not ruled out, want 0", got, asked)
			}
			for round := range 20 {
				l.commit(4, []int{1, 5, 300}[round%3], fmt.Sprintf("r%d", round))
			}
			if got := l.maybes(b, asked); got > asked/20 {
				t.Fatalf("%d of %d new keys not ruled out, want at most 5%%", got, asked)
			}
			if err := bolt.Checkpoint(b); err != nil {
				t.Fatal(err)
			}
			if got := l.maybes(b, asked); got > asked/20 {
				t.Fatalf("after a checkpoint: %d of %d new keys not ruled out, want at most 5%%", got, asked)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}

			ro, err := bolt.Open(path, bolt.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			l.b = ro
			if got := l.maybes(ro, asked); got != asked {
				t.Fatalf("read-only: %d of %d new keys not ruled out, want all unsure", got, asked)
			}
			ro.Close()

			b, err = bolt.Open(path, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { closeAndCheck(t, b, path) }()
			l.b = b
			if got := l.maybes(b, asked); got > asked/20 {
				t.Fatalf("reopened: %d of %d new keys not ruled out, want at most 5%%", got, asked)
			}
			l.commit(4, 2, "after-reopen")
			if err := bolt.Checkpoint(b); err != nil {
				t.Fatal(err)
			}
			if got := l.maybes(b, asked); got > asked/20 {
				t.Fatalf("reopened, after a write: %d of %d new keys not ruled out, want at most 5%%", got, asked)
			}
		})
	}
}

// TestProbeAfterACrashAndAFailedCheckpoint checks the probe on the failure
// paths of the log: after a crash, the reopened handle recovers the log's
// commits into the file and its probe holds every acknowledged key; when a
// checkpoint fails, the handle stops with its keys still in the memory
// tables, and the probe still holds every one.
func TestProbeAfterACrashAndAFailedCheckpoint(t *testing.T) {
	opts := bolt.Options{Log: bolt.LogOn, InitialMmapSize: 64 << 20, MemtableBytesMax: 1 << 40, LogSegmentSizeBytes: 64 << 10}
	path := filepath.Join(t.TempDir(), "ledger.db")
	b, err := bolt.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	l := &probeLedger{t: t, b: b, heads: map[string]uint64{}}
	for round := range 6 {
		l.commit(4, []int{2, 40}[round%2], fmt.Sprintf("before-crash%d", round))
	}
	bolt.Abandon(b)

	if b, err = bolt.Open(path, opts); err != nil {
		t.Fatal(err)
	}
	l.b = b
	const asked = 2000
	if got := l.maybes(b, asked); got > asked/20 {
		t.Fatalf("recovered: %d of %d new keys not ruled out, want at most 5%%", got, asked)
	}

	l.commit(4, 30, "in-memory")
	bolt.FailCheckpoints(b, fmt.Errorf("%w: injected", storage.ErrIO))
	if err := bolt.Checkpoint(b); err == nil {
		t.Fatal("a checkpoint succeeded with checkpoints failing")
	}
	l.maybes(b, asked) // every acknowledged key still held
	bolt.FailCheckpoints(b, nil)
	if err := b.Close(); err == nil {
		t.Fatal("Close of a stopped handle succeeded")
	}
	if b, err = bolt.Open(path, opts); err != nil {
		t.Fatal(err)
	}
	defer func() { closeAndCheck(t, b, path) }()
	l.b = b
	if got := l.maybes(b, asked); got > asked/20 {
		t.Fatalf("reopened after the failure: %d of %d new keys not ruled out, want at most 5%%", got, asked)
	}
}
