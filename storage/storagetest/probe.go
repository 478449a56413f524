package storagetest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ledgerworks/ledger/storage"
)

// RunKeyProber checks storage.KeyProber for the backends returned by open:
// the probe never rules out a key of a commit that was acknowledged before
// it began, whether the key is in the commit just made, on a chain created
// by it, or written many commits earlier, and also while commits run on
// another goroutine. A backend that is not a KeyProber skips every test.
// What the probe says of new keys is the backend's own business (a hint
// may always say "maybe"); each backend's tests measure that.
func RunKeyProber(t *testing.T, open func(t testing.TB) storage.Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, b storage.Backend, p storage.KeyProber)
	}{
		{"CommittedKeysMayBeHeld", testProbeCommittedKeys},
		{"ProbeUnderConcurrentCommits", testProbeConcurrentCommits},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			b := open(t)
			p := implementation[storage.KeyProber](t, b)
			test.fn(t, b, p)
		})
	}
}

// probeKey is one acknowledged key of a chain.
type probeKey struct{ chain, key string }

// commitKeys appends one keyed entry to each chain in one transaction and
// commits it; heads holds the chains' seqs.
func commitKeys(t testing.TB, b storage.Backend, heads map[string]uint64, keys []probeKey) {
	t.Helper()
	tx, err := b.Begin(ctx, true)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	for _, k := range keys {
		heads[k.chain]++
		seq := heads[k.chain]
		rec := storage.Record{Seq: seq, IdempotencyKey: k.key, Data: []byte(k.chain + "/" + k.key)}
		if err := tx.Append(ctx, k.chain, rec, head(seq)); err != nil {
			tx.Rollback()
			t.Fatalf("append %q %q: %v", k.chain, k.key, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

func testProbeCommittedKeys(t *testing.T, b storage.Backend, p storage.KeyProber) {
	heads := map[string]uint64{}
	var committed []probeKey
	// Batches of several sizes: one key, a few, and enough for a backend
	// to write its index differently (storage/bolt: a run of its own).
	for round, size := range []int{1, 3, 40, 1, 300, 2} {
		var batch []probeKey
		for i := range size {
			chain := fmt.Sprintf("probe/%d", i%5)
			if i == 0 {
				chain = fmt.Sprintf("probe/new-%d", round) // a chain this commit creates
			}
			batch = append(batch, probeKey{chain, fmt.Sprintf("key-%d-%d", round, i)})
		}
		commitKeys(t, b, heads, batch)
		committed = append(committed, batch...)
		for _, k := range committed {
			if !p.MayHoldKey(k.chain, k.key) {
				t.Fatalf("after round %d: MayHoldKey(%q, %q) = false for a committed key", round, k.chain, k.key)
			}
		}
	}
	// The same key on another chain is another key; it may or may not be
	// ruled out, but asking must not disturb what is held.
	_ = p.MayHoldKey("probe/other", committed[0].key)
	for _, k := range committed {
		if !p.MayHoldKey(k.chain, k.key) {
			t.Fatalf("MayHoldKey(%q, %q) = false for a committed key", k.chain, k.key)
		}
	}
}

// testProbeConcurrentCommits commits keys on one goroutine while others
// probe every key acknowledged before their probe began: none may be ruled
// out. Under -race it also checks that the probe reads what commits write
// safely.
func testProbeConcurrentCommits(t *testing.T, b storage.Backend, p storage.KeyProber) {
	const commits, perCommit, probers = 60, 8, 3
	var mu sync.Mutex
	var acknowledged []probeKey
	var done atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, probers)
	for g := range probers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				finished := done.Load()
				mu.Lock()
				known := acknowledged[:len(acknowledged):len(acknowledged)]
				mu.Unlock()
				for _, k := range known {
					if !p.MayHoldKey(k.chain, k.key) {
						errs <- fmt.Errorf("prober %d pass %d: MayHoldKey(%q, %q) = false for an acknowledged key", g, i, k.chain, k.key)
						return
					}
				}
				// New keys are asked too: the answer is free, but the
				// reads must be safe while commits land.
				p.MayHoldKey(fmt.Sprintf("concurrent/%d", i%7), fmt.Sprintf("never-%d-%d", g, i))
				if finished {
					return
				}
			}
		}()
	}
	heads := map[string]uint64{}
	for c := range commits {
		var batch []probeKey
		for i := range perCommit {
			batch = append(batch, probeKey{fmt.Sprintf("concurrent/%d", (c+i)%7), fmt.Sprintf("key-%d-%d", c, i)})
		}
		if c%10 == 9 { // a large batch now and then
			for i := range 32 {
				batch = append(batch, probeKey{"concurrent/large", fmt.Sprintf("large-%d-%d", c, i)})
			}
		}
		commitKeys(t, b, heads, batch)
		mu.Lock()
		acknowledged = append(acknowledged, batch...)
		mu.Unlock()
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
