package stockmovement_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"pgregory.net/rapid"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/chain/chaintest"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/stockmovement"
	"github.com/ledgerworks/ledger/storage/storagetest"
)

// rebuildChecks is how many rapid checks the rebuild test runs unless
// -rapid.checks says otherwise, and rebuildRounds how often each check
// damages and rebuilds the state: every round checks and rebuilds the
// whole ledger twice, so they are fewer than the state machine's.
const (
	rebuildChecks = "5"
	rebuildRounds = 2
)

// corruptState damages the state under prefix in one of the ways Rebuild
// repairs, and says how: a stray key (an existing key with a byte more,
// which names an item, location or marker without chain), a changed value,
// a deleted key, or all of it deleted.
func corruptState(t *rapid.T, db *chain.DB, prefix string) string {
	return chaintest.CorruptState(t, db, prefix, prefix+"ghost/total/x")
}

// fataler is what the helpers below need of a *testing.T or a *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// stateSnapshot lists every state pair, to compare state byte for byte.
func stateSnapshot(t fataler, db *chain.DB) []string {
	t.Helper()
	var lines []string
	err := db.View(context.Background(), func(tx *chain.Tx) error {
		for kv, err := range tx.StateScan(nil, nil, false) {
			if err != nil {
				return err
			}
			lines = append(lines, fmt.Sprintf("%q %x", kv.Key, kv.Value))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v", err)
	}
	return lines
}

func sameState(t fataler, before, after []string) {
	t.Helper()
	if !slices.Equal(before, after) {
		t.Fatalf("state differs:\nbefore %q\nafter  %q", before, after)
	}
}

// rebuildAndCompare damages the state twice, checking each time that
// Check sees it and that Rebuild restores the state byte for byte as the
// operations wrote it; a second Rebuild changes nothing.
func rebuildAndCompare(t *rapid.T, db *chain.DB) {
	before := stateSnapshot(t, db)
	for range rebuildRounds {
		how := corruptState(t, db, stockmovement.Domain+"/")
		if failures, err := stockmovement.Check(context.Background(), db); err == nil && len(failures) == 0 {
			t.Fatalf("%s: check found nothing", how)
		}
		stats, err := stockmovement.Rebuild(context.Background(), db)
		if err != nil || len(stats.Failures) > 0 || stats.Written == 0 {
			t.Fatalf("%s: rebuild %+v %v", how, stats, err)
		}
		if failures, err := stockmovement.Check(context.Background(), db); err != nil || len(failures) > 0 {
			t.Fatalf("%s: check after rebuild: %v %v", how, failures, err)
		}
		sameState(t, before, stateSnapshot(t, db))
		again, err := stockmovement.Rebuild(context.Background(), db)
		if err != nil || again.Written != stats.Written || again.Entries != stats.Entries {
			t.Fatalf("second rebuild %+v %v, first %+v", again, err, stats)
		}
		sameState(t, before, stateSnapshot(t, db))
	}
}

// TestRebuildStateMachine runs the model's operations, then damages the
// state and rebuilds it: the state is the one the operations wrote, so the
// model's balances and totals hold again.
func TestRebuildStateMachine(t *testing.T) {
	for _, f := range storagetest.Factories(t) {
		t.Run(f.Name, func(t *testing.T) {
			if !checksExplicit {
				setFlag(t, "rapid.checks", rebuildChecks)
			}
			rapid.Check(t, func(rt *rapid.T) {
				db, err := chain.OpenBackend(f.Open(t), chain.Options{Clock: steppingClock()})
				if err != nil {
					rt.Fatal(err)
				}
				defer db.Close()
				m := &stockModel{db: db, balances: map[place]int64{}, heads: map[place]uint64{},
					tenants: [2]string{"a", "b"}}
				for _, tenant := range m.tenants {
					setup(t, db, tenant)
				}
				rt.Repeat(map[string]func(*rapid.T){
					"receive":  func(t *rapid.T) { m.single(t, "receive") },
					"issue":    func(t *rapid.T) { m.single(t, "issue") },
					"transfer": m.transfer,
					"reverse":  m.reverse,
					"batch":    m.batch,
				})
				rebuildAndCompare(rt, db)
				m.invariants(rt)
			})
		})
	}
}

// TestRebuildWritesWhatOperationsWrite wipes every state key of a ledger
// with a little of everything (including a chain of another domain, left
// alone) and rebuilds it byte for byte; the balances answer as before.
func TestRebuildWritesWhatOperationsWrite(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *chain.DB) {
		buildCheckLedger(t, db)
		before := snapshot(t, db)
		balances := balance(t, db, "acme", "pcs", "A") + " " + balance(t, db, "beta", "pcs", "B")
		err := db.Update(context.Background(), func(tx *chain.Tx) error {
			var keys [][]byte
			for kv, err := range tx.StateScan(nil, nil, false) {
				if err != nil {
					return err
				}
				keys = append(keys, slices.Clone(kv.Key))
			}
			for _, k := range keys {
				if err := tx.StateDelete(k); err != nil {
					return err
				}
			}
			return tx.StatePut([]byte("stock/acme/unknown"), []byte("x"))
		})
		if err != nil {
			t.Fatal(err)
		}
		stats, err := stockmovement.Rebuild(context.Background(), db)
		if err != nil {
			t.Fatal(err)
		}
		// 2 tenants: 3 items and 3 locations defined, the balances of pcs
		// at A and B, its total and the markers of the reversed transfer's
		// two halves; one stray key.
		if stats.Written != 2*(6+2+1+2) || stats.Deleted != 1 || len(stats.Failures) != 0 {
			t.Fatalf("stats %+v", stats)
		}
		mustCheck(t, db)
		sameSnapshot(t, before, snapshot(t, db))
		if got := balance(t, db, "acme", "pcs", "A") + " " + balance(t, db, "beta", "pcs", "B"); got != balances {
			t.Fatalf("balances %s, before %s", got, balances)
		}
	})
}

// TestRebuildKeepsRuleFailures rebuilds a ledger whose chain holds an entry
// the package would never write: Rebuild reports it, as Check does, and
// writes the rest.
func TestRebuildKeepsRuleFailures(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *chain.DB) {
		buildCheckLedger(t, db)
		if _, err := db.Append(context.Background(), chain.Request{Chain: "acme/stock/pcs/C", Type: "other/v1", Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		stats, err := stockmovement.Rebuild(context.Background(), db)
		if err != nil || len(stats.Failures) != 1 || stats.Failures[0].Chain != "acme/stock/pcs/C" {
			t.Fatalf("stats %+v %v", stats, err)
		}
		failures, err := stockmovement.Check(context.Background(), db)
		if err != nil || !slices.Equal(failures, stats.Failures) {
			t.Fatalf("check %v %v, rebuild %v", failures, err, stats.Failures)
		}
	})
}

// TestRebuildWhileOthersWrite rebuilds over and over while 16 goroutines
// record transfers between two locations of one item and receipts at a
// third: each item's rebuild is one transaction that locks the item, so no
// movement interleaves with it, and at the end the state is what the
// movements wrote (Check is clean, the total is the sum of the balances).
// On bbolt the writers share the file with the rebuild; on PostgreSQL the
// rebuild runs through a second ledger on the same schema, as another
// process would.
func TestRebuildWhileOthersWrite(t *testing.T) {
	t.Run("bolt", func(t *testing.T) {
		db, err := chain.Open(t.TempDir()+"/ledger.db", chain.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		rebuildWhileWriting(t, db, db)
	})
	t.Run("postgres", func(t *testing.T) {
		writer, rebuilder := openShared(t)
		rebuildWhileWriting(t, writer, rebuilder)
	})
}

func rebuildWhileWriting(t *testing.T, writer, rebuilder *chain.DB) {
	setup(t, writer, "acme")
	if _, err := stockmovement.Receive(ctx, writer, stockmovement.ReceiveRequest{Tenant: "acme", Item: "pcs",
		Location: "A", Quantity: decimal.MustNew(1000, 0), IdempotencyKey: "seed"}); err != nil {
		t.Fatal(err)
	}
	const goroutines, rounds = 16, 8
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				key := fmt.Sprintf("g%d-r%d", g, r)
				err := chaintest.RetryRolledBack(func() (err error) {
					if g%2 == 0 {
						_, err = stockmovement.Transfer(ctx, writer, stockmovement.TransferRequest{Tenant: "acme", Item: "pcs",
							From: "A", To: "B", Quantity: decimal.MustNew(1, 0), IdempotencyKey: key})
					} else {
						_, err = stockmovement.Receive(ctx, writer, stockmovement.ReceiveRequest{Tenant: "acme", Item: "pcs",
							Location: "C", Quantity: decimal.MustNew(2, 0), IdempotencyKey: key})
					}
					return err
				})
				if err != nil {
					t.Error(err)
				}
			}
		}()
	}
	done, finished := make(chan struct{}), stop(&wg)
	rebuilds := 0
	go func() {
		defer close(done)
		for {
			if err := chaintest.RetryRolledBack(func() error { _, err := stockmovement.Rebuild(ctx, rebuilder); return err }); err != nil {
				t.Error(err)
				return
			}
			rebuilds++
			select {
			case <-finished:
				return
			default:
			}
		}
	}()
	<-done
	mustCheck(t, writer)
	half := goroutines / 2 * rounds
	want := fmt.Sprintf("%d %d %d", 1000-half, half, 2*half)
	if got := balance(t, rebuilder, "acme", "pcs", "A") + " " + balance(t, rebuilder, "acme", "pcs", "B") + " " +
		balance(t, rebuilder, "acme", "pcs", "C"); got != want {
		t.Fatalf("balances %s after %d rebuilds, want %s", got, rebuilds, want)
	}
	total, err := stockmovement.ItemTotal(ctx, rebuilder, "acme", "pcs")
	if err != nil || total.Units() != 1000+2*int64(half) {
		t.Fatalf("total %s %v", total, err)
	}
}

// stop returns a channel that is closed once wg's goroutines are done.
func stop(wg *sync.WaitGroup) <-chan struct{} {
	c := make(chan struct{})
	go func() { wg.Wait(); close(c) }()
	return c
}
