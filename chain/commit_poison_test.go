package chain_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/storagetest"
)

// abortingBackend behaves as PostgreSQL does after a failed statement: a
// read of the state key "poison" fails, and from then on every statement of
// that transaction and its commit fail too.
type abortingBackend struct{ storage.Backend }

type abortingTx struct {
	storage.Tx
	aborted bool
}

var errAborted = fmt.Errorf("current transaction is aborted, commands ignored until end of transaction block: %w", storage.ErrIO)

func (b abortingBackend) Begin(ctx context.Context, writable bool) (storage.Tx, error) {
	stx, err := b.Backend.Begin(ctx, writable)
	if err != nil || !writable {
		return stx, err
	}
	return &abortingTx{Tx: stx}, nil
}

func (t *abortingTx) StateGet(ctx context.Context, key []byte) ([]byte, error) {
	if t.aborted {
		return nil, errAborted
	}
	if string(key) == "poison" {
		t.aborted = true
		return nil, fmt.Errorf("statement failed: %w", storage.ErrIO)
	}
	return t.Tx.StateGet(ctx, key)
}

func (t *abortingTx) Head(ctx context.Context, chain string) (storage.Head, error) {
	if t.aborted {
		return storage.Head{}, errAborted
	}
	return t.Tx.Head(ctx, chain)
}

func (t *abortingTx) LookupKey(ctx context.Context, chain, key string) (uint64, error) {
	if t.aborted {
		return 0, errAborted
	}
	return t.Tx.LookupKey(ctx, chain, key)
}

func (t *abortingTx) Append(ctx context.Context, chain string, rec storage.Record, head storage.Head) error {
	if t.aborted {
		return errAborted
	}
	return t.Tx.Append(ctx, chain, rec, head)
}

func (t *abortingTx) StatePut(ctx context.Context, key, value []byte) error {
	if t.aborted {
		return errAborted
	}
	return t.Tx.StatePut(ctx, key, value)
}

func (t *abortingTx) Commit() error {
	if t.aborted {
		t.Tx.Rollback()
		return errAborted
	}
	return t.Tx.Commit()
}

type groupSizes struct{ largest atomic.Int64 }

func (g *groupSizes) GroupCommitted(requests int, _ time.Duration) {
	for {
		old := g.largest.Load()
		if int64(requests) <= old || g.largest.CompareAndSwap(old, int64(requests)) {
			return
		}
	}
}
func (g *groupSizes) Replayed() {}

// TestGroupCommitStoreFailurePoisonsTheGroup: a request whose function met
// an error of the store — and returned it, or went on regardless — shares a
// group with good requests on a store where that error aborts the whole
// transaction. The good requests are committed, the failing ones get the
// store's error and write nothing.
func TestGroupCommitStoreFailurePoisonsTheGroup(t *testing.T) {
	sizes := &groupSizes{}
	db, err := chain.OpenBackend(abortingBackend{storagetest.OpenBolt(t)}, chain.Options{Clock: testClock(), Metrics: sizes})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	const good = 4
	grouped := false
	for round := 0; round < 10 && !grouped; round++ {
		sizes.largest.Store(0)
		release := blockCommitter(t, db)
		var started atomic.Int64
		var wg sync.WaitGroup
		errs := make([]error, good+2)
		for i := range good {
			wg.Add(1)
			go func() {
				defer wg.Done()
				started.Add(1)
				errs[i] = db.Update(ctx, func(tx *chain.Tx) error {
					_, err := tx.Append(chain.Request{Chain: fmt.Sprintf("good-%d", i), IdempotencyKey: fmt.Sprintf("r%d", round), Type: "t"})
					return err
				})
			}()
		}
		for j, swallow := range []bool{false, true} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				started.Add(1)
				errs[good+j] = db.Update(ctx, func(tx *chain.Tx) error {
					if _, err := tx.StateGet([]byte("poison")); err != nil && !swallow {
						return err
					}
					return nil // a function that ignores the failed read
				})
			}()
		}
		waitQueued(&started, good+2)
		release()
		wg.Wait()
		grouped = sizes.largest.Load() >= 2
		for i := range good {
			if errs[i] != nil {
				t.Fatalf("round %d: good update %d: %v; a failed statement of another request reached it", round, i, errs[i])
			}
			if h, err := db.Head(ctx, fmt.Sprintf("good-%d", i)); err != nil || h.Seq != uint64(round+1) {
				t.Fatalf("round %d: good-%d head %+v, %v; want seq %d", round, i, h, err, round+1)
			}
		}
		for j := range 2 {
			if !errors.Is(errs[good+j], storage.ErrIO) {
				t.Errorf("round %d: failing update %d: %v; want the store's error", round, j, errs[good+j])
			}
		}
	}
	if !grouped {
		t.Fatal("the failing and good updates never shared a group commit")
	}
}
