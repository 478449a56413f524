package chain_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// TestLockOrderAcrossProcesses runs three ledgers on one PostgreSQL schema,
// each with its own pool as three processes would, whose group commits
// append to overlapping chains in opposite orders: Update functions that
// append to three or four chains each (ascending in one ledger, descending
// in the next, shuffled in the third), beside single keyed appends, some
// Updates planning their appends (WithPlannedAppends) and some not. No
// call may fail, whatever locks the groups take, and every chain must hold
// exactly the entries appended to it, each key once, and verify.
func TestLockOrderAcrossProcesses(t *testing.T) {
	backends := pgtest.OpenShared(t, 3)
	dbs := make([]*chain.DB, len(backends))
	for i, b := range backends {
		db, err := chain.OpenBackend(b, chain.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		dbs[i] = db
	}
	const (
		chains     = 6
		writers    = 8 // per ledger
		updates    = 12
		chainsEach = 4
	)
	names := make([]string, chains)
	for i := range names {
		names[i] = fmt.Sprintf("acme/lock/%d", i)
	}
	ctx := context.Background()
	var (
		mu       sync.Mutex
		expected = map[string]int{}
		wg       sync.WaitGroup
		errs     = make(chan error, len(dbs)*writers*updates*2)
	)
	for p, db := range dbs {
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(p), uint64(w)))
				for u := range updates {
					picked := rng.Perm(chains)[:chainsEach-rng.IntN(2)]
					switch p {
					case 0:
						slices.Sort(picked)
					case 1:
						slices.Sort(picked)
						slices.Reverse(picked)
					}
					reqs := make([]chain.Request, len(picked))
					for i, c := range picked {
						reqs[i] = chain.Request{Chain: names[c], IdempotencyKey: fmt.Sprintf("p%d-w%d-u%d-%d", p, w, u, i), Type: "lock/v1", Payload: []byte(`{}`)}
					}
					uctx := ctx
					if u%3 == 0 {
						uctx = chain.WithPlannedAppends(ctx, reqs...)
					}
					err := db.Update(uctx, func(tx *chain.Tx) error {
						for _, r := range reqs {
							if _, err := tx.Append(r); err != nil {
								return err
							}
						}
						return nil
					})
					if err != nil {
						errs <- fmt.Errorf("ledger %d writer %d update %d: %w", p, w, u, err)
						continue
					}
					mu.Lock()
					for _, r := range reqs {
						expected[r.Chain]++
					}
					mu.Unlock()
					single := chain.Request{Chain: names[rng.IntN(chains)], IdempotencyKey: fmt.Sprintf("p%d-w%d-u%d-single", p, w, u), Type: "lock/v1", Payload: []byte(`{}`)}
					if _, err := db.Append(ctx, single); err != nil {
						errs <- fmt.Errorf("ledger %d writer %d append %d: %w", p, w, u, err)
						continue
					}
					mu.Lock()
					expected[single.Chain]++
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, name := range names {
		h, err := dbs[0].Head(ctx, name)
		if err != nil {
			t.Fatalf("head %s: %v", name, err)
		}
		if int(h.Seq) != expected[name] {
			t.Errorf("chain %s: %d entries, want %d", name, h.Seq, expected[name])
		}
		keys := map[string]bool{}
		for e, err := range dbs[2].Entries(ctx, name, 1) {
			if err != nil {
				t.Fatal(err)
			}
			if keys[e.IdempotencyKey] {
				t.Errorf("chain %s: key %s twice", name, e.IdempotencyKey)
			}
			keys[e.IdempotencyKey] = true
		}
		if len(keys) != expected[name] {
			t.Errorf("chain %s: %d keys, want %d", name, len(keys), expected[name])
		}
	}
	report, err := dbs[1].Verify(ctx, chain.VerifyOptions{Chains: names})
	if err != nil {
		t.Fatal(err)
	}
	if !report.OK() {
		t.Errorf("verify: %+v", report)
	}
}
