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

// TestProbeRapid drives a backend through random commits of keys (small
// and large transactions, new chains, repeated keys on other chains),
// checkpoints, reopens, crashes and rolled-back transactions, against a
// plain model of the acknowledged keys: the probe must never rule one
// out. It also counts the new keys the probe could not rule out, which
// must stay near the filter's false positive rate.
func TestProbeRapid(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		c := rapid.SampledFrom(logConfigurations).Draw(rt, "configuration")
		path := filepath.Join(t.TempDir(), fmt.Sprintf("ledger-%d.db", rapid.IntRange(0, 1<<30).Draw(rt, "file")))
		b, err := bolt.Open(path, c.opts)
		if err != nil {
			rt.Fatal(err)
		}
		defer func() { b.Close() }()
		heads := map[string]uint64{} // the model: committed seqs
		var acknowledged [][2]string // and keys
		next := 0
		asked, unsure := 0, 0
		commit := func(rt *rapid.T, keep bool) {
			n := rapid.SampledFrom([]int{1, 3, 15, 16, 40}).Draw(rt, "keys")
			chains := rapid.IntRange(1, 6).Draw(rt, "chains")
			tx, err := b.Begin(ctx, true)
			if err != nil {
				rt.Fatal(err)
			}
			// A draw may end the case while the writer slot is held (rapid
			// stops a case that runs out of data): the deferred rollback
			// frees it for Close.
			defer tx.Rollback()
			seqs := map[string]uint64{}
			var batch [][2]string
			for i := range n {
				chain := fmt.Sprintf("rapid/%d", (next+i)%chains)
				key := fmt.Sprintf("k%d", next+i)
				if i > 0 && rapid.IntRange(0, 9).Draw(rt, "reuse") == 0 {
					key = batch[0][1] // the same key on another chain, or a duplicate refused
				}
				seq := heads[chain] + seqs[chain] + 1
				err := tx.Append(ctx, chain, storage.Record{Seq: seq, IdempotencyKey: key, Data: []byte(key)}, testHead(seq))
				if errors.Is(err, storage.ErrDuplicate) {
					continue // a key this chain already holds: refused, nothing written
				}
				if err != nil {
					rt.Fatal(err)
				}
				seqs[chain]++
				batch = append(batch, [2]string{chain, key})
			}
			next += n
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
				heads[ch] += s
			}
			acknowledged = append(acknowledged, batch...)
		}
		reopen := func(rt *rapid.T, crash bool) {
			if crash {
				bolt.Abandon(b)
			} else if err := b.Close(); err != nil {
				rt.Fatal(err)
			}
			if b, err = bolt.Open(path, c.opts); err != nil {
				rt.Fatal(err)
			}
		}
		rt.Repeat(map[string]func(*rapid.T){
			"commit":     func(rt *rapid.T) { commit(rt, true) },
			"rollback":   func(rt *rapid.T) { commit(rt, false) },
			"checkpoint": func(rt *rapid.T) { _ = bolt.Checkpoint(b) },
			"reopen":     func(rt *rapid.T) { reopen(rt, false) },
			"crash":      func(rt *rapid.T) { reopen(rt, true) },
			"": func(rt *rapid.T) {
				for _, k := range acknowledged {
					if !b.MayHoldKey(k[0], k[1]) {
						rt.Fatalf("MayHoldKey(%q, %q) = false for an acknowledged key", k[0], k[1])
					}
				}
				for i := range 20 {
					asked++
					if b.MayHoldKey(fmt.Sprintf("rapid/%d", i%8), fmt.Sprintf("new-%d-%d", next, i)) {
						unsure++
					}
				}
			},
		})
		if asked >= 1000 && unsure > asked/10 {
			rt.Fatalf("the probe was unsure of %d of %d new keys", unsure, asked)
		}
	})
}
