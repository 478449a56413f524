package chain_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// TestTreesOfConcurrentGroups appends from many goroutines at once, so that
// groups of Appends extend the trees through the committer's helper, some
// chains shared and some each goroutine's own, beside Updates whose
// AppendBatch fills the helper and Updates that fail after appending (their
// group runs again without them). Every chain's tree must then be the
// model's, and verify of the trees must pass; the second run lowers the
// helper's limits so that every group starts one and most outgrow it.
func TestTreesOfConcurrentGroups(t *testing.T) {
	for _, limits := range []struct {
		name                 string
		appendsMin, itemsMax int
	}{{"default", 0, 0}, {"lowered", 2, 5}} {
		t.Run(limits.name, func(t *testing.T) {
			if limits.itemsMax > 0 {
				defer chain.LowerTreeHelperLimits(limits.appendsMin, limits.itemsMax)()
			}
			forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
				checkConcurrentTrees(t, db)
			})
		})
	}
}

func checkConcurrentTrees(t *testing.T, db *chain.DB) {
	const appenders, appends, updaters, updates = 40, 30, 4, 8
	ctx := context.Background()
	var mu sync.Mutex
	var entries []chain.Entry
	record := func(res ...chain.Result) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range res {
			entries = append(entries, r.Entry)
		}
	}
	errFail := errors.New("fails after appending")
	var wg sync.WaitGroup
	errs := make(chan error, appenders+updaters)
	for g := range appenders {
		wg.Go(func() {
			for i := range appends {
				c := fmt.Sprintf("tree/g%d", g) // its own
				if i%3 == 0 {
					c = fmt.Sprintf("tree/shared%d", i%4)
				}
				res, err := db.Append(ctx, chain.Request{Chain: c, IdempotencyKey: fmt.Sprintf("%d-%d", g, i), Type: "t/v1", Payload: []byte{byte(i)}})
				if err != nil {
					errs <- err
					return
				}
				record(res)
			}
		})
	}
	for u := range updaters {
		wg.Go(func() {
			for i := range updates {
				var got []chain.Result
				err := db.Update(ctx, func(tx *chain.Tx) error {
					var reqs []chain.Request
					for j := range 12 {
						reqs = append(reqs, chain.Request{Chain: fmt.Sprintf("tree/shared%d", j%4), Type: "t/v1", Payload: []byte{byte(u), byte(i), byte(j)}})
					}
					res, err := tx.AppendBatch(reqs, nil)
					if err != nil {
						return err
					}
					if i%2 == 1 {
						return errFail
					}
					got = res
					return nil
				})
				if i%2 == 1 {
					if !errors.Is(err, errFail) {
						errs <- fmt.Errorf("failing update: %v", err)
						return
					}
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				record(got...)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	m := treeModel{}
	slices.SortFunc(entries, func(a, b chain.Entry) int { return cmp.Compare(a.Seq, b.Seq) })
	for _, e := range entries {
		m[e.Chain] = append(m[e.Chain], chain.LeafHash(e.Hash))
	}
	err := db.View(ctx, func(tx *chain.Tx) error {
		for c, leaves := range m {
			n := uint64(len(leaves))
			head, err := tx.TreeHead(c)
			if err != nil {
				return err
			}
			if head.Size != n || head.Root != m.root(c, n) {
				t.Fatalf("%s: tree head %d %x, model %d %x", c, head.Size, head.Root, n, m.root(c, n))
			}
			p, err := tx.InclusionProof(c, n/2+1, n)
			if err != nil {
				return err
			}
			leaf := leaves[n/2]
			if err := proof.VerifyInclusion(rfc6962.DefaultHasher, n/2, n, leaf[:], toBytes(p), head.Root[:]); err != nil {
				t.Fatalf("%s: inclusion of %d in %d: %v", c, n/2+1, n, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	assertVerifies(t, db)
}
