package chain_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/ledgerworks/ledger/chain"
)

// TestConcurrentAppendsHashedInLanes runs 32 appenders, each on a chain of
// its own, so that the group commits hold many first Appends on distinct
// chains (hashed in the lanes), mixed with retries of earlier requests and
// Updates that append to the appenders' chains first. Every result must
// carry the hash of its entry's fields and be stored as returned, and the
// ledger must verify.
func TestConcurrentAppendsHashedInLanes(t *testing.T) {
	atLeastTwoProcs(t)
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		const appenders, appends = 32, 40
		var mu sync.Mutex
		var fresh []chain.Result
		var wg sync.WaitGroup
		errs := make(chan error, appenders)
		for g := range appenders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				chainID := fmt.Sprint("chain-", g)
				for i := range appends {
					req := chain.Request{Chain: chainID, IdempotencyKey: fmt.Sprint("k", i), Type: "t/v1", Payload: fmt.Appendf(nil, "%d/%d", g, i)}
					if i%7 == 3 { // a retry of the request before
						req = chain.Request{Chain: chainID, IdempotencyKey: fmt.Sprint("k", i-1), Type: "t/v1", Payload: fmt.Appendf(nil, "%d/%d", g, i-1)}
					}
					res, err := db.Append(ctx, req)
					if err == nil && i%11 == 5 { // another writer appends to the next appender's chain
						err = db.Update(ctx, func(tx *chain.Tx) error {
							_, err := tx.Append(chain.Request{Chain: fmt.Sprint("chain-", (g+1)%appenders), Type: "t/v1"})
							return err
						})
					}
					if err != nil {
						errs <- err
						return
					}
					if e := res.Entry; e.Hash != e.ComputeHash() {
						errs <- fmt.Errorf("%s/%d: hash %v, its fields hash to %v", e.Chain, e.Seq, e.Hash, e.ComputeHash())
						return
					}
					if !res.Replayed {
						mu.Lock()
						fresh = append(fresh, res)
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		assertStoredAsReturned(t, db, fresh)
		assertVerifies(t, db)
	})
}
