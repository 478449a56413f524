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
	"github.com/ledgerworks/ledger/merkle"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// TestTreesOfConcurrentGroups appends from many goroutines at once, so that
// group commits extend many trees by one entry each (their leaves deferred,
// see treeBatch) and some shared chains by several, beside Updates whose
// AppendBatch extends the shared chains and Updates that fail after
// appending (their group runs again without them). Every chain's tree must
// then be the model's, and verify of the trees must pass.
func TestTreesOfConcurrentGroups(t *testing.T) {
	forEachBackend(t, chain.Options{}, checkConcurrentTrees)
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

// TestTreeLeavesDeferredAcrossRollbacks appends one entry at a time to a
// chain (its leaves deferred between commits) up to just below a stored
// node's tile, then rolls back Updates that would complete the tile, one
// with a batch and one entry at a time, and goes on past the tile: the
// tree must be the model's, and its node must be stored (verify).
func TestTreeLeavesDeferredAcrossRollbacks(t *testing.T) {
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		m := treeModel{}
		for i := range 250 {
			m.add(mustAppend(t, db, chain.Request{Chain: "tile/a", Type: "t/v1", Payload: []byte{byte(i)}}))
			m.add(mustAppend(t, db, chain.Request{Chain: fmt.Sprintf("tile/o%d", i%5), Type: "t/v1"}))
		}
		errFail := errors.New("fails after appending")
		for _, n := range []int{10, 1} {
			err := db.Update(ctx, func(tx *chain.Tx) error {
				for range n {
					if _, err := tx.Append(chain.Request{Chain: "tile/a", Type: "t/v1", Payload: []byte("rolled back")}); err != nil {
						return err
					}
				}
				return errFail
			})
			if !errors.Is(err, errFail) {
				t.Fatal(err)
			}
		}
		for i := range 20 {
			m.add(mustAppend(t, db, chain.Request{Chain: "tile/a", Type: "t/v1", Payload: []byte{byte(i), 1}}))
		}
		err := db.View(ctx, func(tx *chain.Tx) error {
			head, err := tx.TreeHead("tile/a")
			if err != nil {
				return err
			}
			if n := uint64(len(m["tile/a"])); head.Size != n || head.Root != m.root("tile/a", n) {
				t.Fatalf("tree head %d %x, model %d %x", head.Size, head.Root, n, m.root("tile/a", n))
			}
			p, err := tx.InclusionProof("tile/a", 3, head.Size)
			if err != nil {
				return err
			}
			return merkle.VerifyInclusion(2, head.Size, m["tile/a"][2], p, head.Root)
		})
		if err != nil {
			t.Fatal(err)
		}
		assertVerifies(t, db)
	})
}

// TestTreeRangesStoredAtClose closes a ledger whose chains were appended to
// one entry at a time (ranges lagging, leaves deferred), the last
// transaction an Update that appended to each and failed, then appends
// treeRangeLagMax-1 entries to each with NoTrees: the trees must still be
// readable, so Close stored every range at its chain's head; one more
// entry puts them behind.
func TestTreeRangesStoredAtClose(t *testing.T) {
	const lagMax = 16 // treeRangeLagMax
	db, path := openFile(t, chain.Options{})
	for i := range 140 {
		mustAppend(t, db, chain.Request{Chain: fmt.Sprintf("close/%d", i%7), Type: "t/v1", Payload: []byte{byte(i)}})
	}
	errFail := errors.New("fails after appending")
	err := db.Update(context.Background(), func(tx *chain.Tx) error {
		for c := range 7 {
			if _, err := tx.Append(chain.Request{Chain: fmt.Sprintf("close/%d", c), Type: "t/v1"}); err != nil {
				return err
			}
		}
		return errFail
	})
	if !errors.Is(err, errFail) {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = chain.Open(path, chain.Options{NoTrees: true, Clock: testClock()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	for c := range 7 {
		for range lagMax - 1 {
			mustAppend(t, db, chain.Request{Chain: fmt.Sprintf("close/%d", c), Type: "t/v1"})
		}
	}
	err = db.View(ctx, func(tx *chain.Tx) error {
		for c := range 7 {
			if _, err := tx.TreeHead(fmt.Sprintf("close/%d", c)); err != nil {
				t.Fatalf("close/%d: %v", c, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, db, chain.Request{Chain: "close/0", Type: "t/v1"})
	err = db.View(ctx, func(tx *chain.Tx) error {
		_, err := tx.TreeHead("close/0")
		return err
	})
	if !errors.Is(err, chain.ErrTreeBehind) {
		t.Fatalf("a tree %d entries behind: %v", lagMax, err)
	}
}
