package valuations

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	"pgregory.net/rapid"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/chain/chaintest"
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
// which names an item, location, layer or marker without chains), a changed
// value, a longer value, a deleted key, or all of it deleted.
func corruptState(t *rapid.T, db *chain.DB, prefix string) string {
	return chaintest.CorruptState(t, db, prefix, prefix+"ghost/x")
}

// TestRebuildRestoresModelState runs the valuation model (half-written
// operations and their completion included), then damages the tenant's
// state twice (rebuildRounds): each time Check sees the damage, and Rebuild restores
// the state byte for byte as the operations wrote it, so positions, rates
// and FIFO layers match the model again. A second Rebuild changes nothing.
func TestRebuildRestoresModelState(t *testing.T) {
	for _, f := range storagetest.Factories(t) {
		t.Run(f.Name, func(t *testing.T) {
			setChecks(t, rebuildChecks)
			db, err := chain.OpenBackend(f.Open(t), chain.Options{Clock: testClock()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			runs := 0
			rapid.Check(t, func(rt *rapid.T) {
				runs++
				ctx := context.Background()
				it := Item{Tenant: fmt.Sprintf("rebuild-%d", runs), ID: "SKU-R",
					Method:        rapid.SampledFrom([]Method{MovingAverage, FIFO}).Draw(rt, "method"),
					QuantityScale: rapid.Uint8Range(0, 3).Draw(rt, "quantity scale"),
					Currency:      "EUR", MinorUnit: rapid.Uint8Range(0, 3).Draw(rt, "minor unit"),
					AllowNegative: rapid.Bool().Draw(rt, "allow negative")}
				if _, err := DefineItem(ctx, db, it); err != nil {
					rt.Fatal(err)
				}
				m := &machine{ctx: ctx, db: db, it: it,
					model: &model{method: it.Method, s: it.scales(), allowNegative: it.AllowNegative, locations: map[string]*modelLocation{}}}
				rt.Repeat(map[string]func(*rapid.T){
					"receive":  m.receive,
					"issue":    m.issue,
					"transfer": m.transfer,
					"adjust":   m.adjust,
					"half":     m.halfWritten,
				})
				before := snapshot(rt, db)
				for range rebuildRounds {
					how := corruptState(rt, db, statePrefix+it.Tenant+"/")
					if failures, err := Check(ctx, db); err == nil && len(failures) == 0 {
						rt.Fatalf("%s: check found nothing", how)
					}
					stats, err := Rebuild(ctx, db)
					if err != nil || len(stats.Failures) > 0 {
						rt.Fatalf("%s: rebuild %+v %v", how, stats, err)
					}
					if failures, err := Check(ctx, db); err != nil || len(failures) > 0 {
						rt.Fatalf("%s: check after rebuild: %v %v", how, failures, err)
					}
					if after := snapshot(rt, db); after != before {
						rt.Fatalf("%s: after rebuild\n%s\nwant\n%s", how, after, before)
					}
					again, err := Rebuild(ctx, db)
					if err != nil || again.Written != stats.Written || again.Entries != stats.Entries {
						rt.Fatalf("second rebuild %+v %v, first %+v", again, err, stats)
					}
					if after := snapshot(rt, db); after != before {
						rt.Fatalf("%s: a second rebuild changed the state", how)
					}
				}
				m.invariants(rt)
			})
		})
	}
}

// TestRebuildWritesReversalMarkers rebuilds a wiped ledger whose operations
// include reversals of a receipt and of a transfer: the markers are back,
// so reversing either again is refused as before.
func TestRebuildWritesReversalMarkers(t *testing.T) {
	ctx := context.Background()
	eachMethod(t, func(t *testing.T, db *chain.DB, it Item) {
		for _, op := range []struct{ loc, id, quantity, cost string }{{"WH-1", "r1", "10", "10.00"}, {"WH-1", "r2", "4", "12.00"}} {
			if _, err := Receive(ctx, db, receipt(t, it, op.loc, op.id, op.quantity, op.cost)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := Transfer(ctx, db, TransferRequest{Tenant: it.Tenant, Item: it.ID, From: "WH-1", To: "WH-2",
			OperationID: "t1", Quantity: dec(t, "3", it.QuantityScale)}); err != nil {
			t.Fatal(err)
		}
		reversals := []ReverseRequest{
			{Tenant: it.Tenant, Item: it.ID, Location: "WH-1", OperationID: "x1", Reverses: "t1"},
			{Tenant: it.Tenant, Item: it.ID, Location: "WH-1", OperationID: "x2", Reverses: "r2"},
		}
		for _, r := range reversals {
			if _, err := Reverse(ctx, db, r); err != nil {
				t.Fatal(err)
			}
		}
		before := snapshot(t, db)
		err := db.Update(ctx, func(tx *chain.Tx) error {
			var keys [][]byte
			for kv, err := range tx.StateScan(nil, nil, false) {
				if err != nil {
					return err
				}
				keys = append(keys, bytes.Clone(kv.Key))
			}
			for _, k := range keys {
				if err := tx.StateDelete(k); err != nil {
					return err
				}
			}
			// A marker of a location without chains.
			return tx.StatePut(reversalKey(it.Tenant, it.ID, "WH-9", "r1"), []byte("x9"))
		})
		if err != nil {
			t.Fatal(err)
		}
		if stateMismatches(t, db) == 0 {
			t.Fatal("Check misses a wiped ledger")
		}
		stats, err := Rebuild(ctx, db)
		if err != nil || len(stats.Failures) > 0 || stats.Deleted != 1 {
			t.Fatalf("stats %+v %v", stats, err)
		}
		mustCheck(t, db)
		if after := snapshot(t, db); after != before {
			t.Fatalf("after rebuild\n%s\nwant\n%s", after, before)
		}
		for _, r := range reversals {
			r.OperationID += "-again"
			if _, err := Reverse(ctx, db, r); Code(err) != "already_reversed" {
				t.Fatalf("reversing %s again: %v", r.Reverses, err)
			}
		}
	})
}

// TestCheckReportsMarkers changes, removes and invents reversal markers.
func TestCheckReportsMarkers(t *testing.T) {
	ctx := context.Background()
	eachMethod(t, func(t *testing.T, db *chain.DB, it Item) {
		if _, err := Receive(ctx, db, receipt(t, it, "WH-1", "r1", "10", "10.00")); err != nil {
			t.Fatal(err)
		}
		if _, err := Reverse(ctx, db, ReverseRequest{Tenant: it.Tenant, Item: it.ID, Location: "WH-1", OperationID: "x1", Reverses: "r1"}); err != nil {
			t.Fatal(err)
		}
		mustCheck(t, db)
		for _, edit := range []func(tx *chain.Tx) error{
			func(tx *chain.Tx) error {
				return tx.StatePut(reversalKey(it.Tenant, it.ID, "WH-1", "r1"), []byte("x2"))
			},
			func(tx *chain.Tx) error { return tx.StateDelete(reversalKey(it.Tenant, it.ID, "WH-1", "r1")) },
			func(tx *chain.Tx) error {
				return tx.StatePut(reversalKey(it.Tenant, it.ID, "WH-1", "r0"), []byte("x1"))
			},
		} {
			if err := db.Update(ctx, edit); err != nil {
				t.Fatal(err)
			}
			if stateMismatches(t, db) == 0 {
				t.Fatal("Check misses a marker")
			}
			if _, err := Rebuild(ctx, db); err != nil {
				t.Fatal(err)
			}
			mustCheck(t, db)
		}
	})
}

// TestRebuildWhileOthersOperate rebuilds over and over while 16 goroutines
// receive and transfer a FIFO item between two locations: each location's
// rebuild is one transaction that locks as an operation does, so no
// operation interleaves with it and the positions and layers end as the
// operations wrote them. On PostgreSQL the rebuild runs through a second
// ledger on the same schema, as another process would.
func TestRebuildWhileOthersOperate(t *testing.T) {
	t.Run("bolt", func(t *testing.T) {
		db, err := chain.Open(t.TempDir()+"/ledger.db", chain.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		rebuildWhileOperating(t, db, db)
	})
	t.Run("postgres", func(t *testing.T) {
		writer, rebuilder := openShared(t)
		rebuildWhileOperating(t, writer, rebuilder)
	})
}

func rebuildWhileOperating(t *testing.T, writer, rebuilder *chain.DB) {
	ctx := context.Background()
	it := item(FIFO)
	defineItem(t, writer, it)
	const goroutines, each = 16, 4
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				op := fmt.Sprintf("g%d-%d", g, i)
				err := chaintest.RetryRolledBack(func() (err error) {
					if g%2 == 0 {
						_, err = Receive(ctx, writer, receipt(t, it, "WH-1", op, "2", fmt.Sprintf("1.%02d", g)))
						return err
					}
					_, err = Transfer(ctx, writer, TransferRequest{Tenant: it.Tenant, Item: it.ID, From: "WH-1", To: "WH-2",
						OperationID: op, Quantity: dec(t, "1", 0)})
					if Code(err) == "insufficient_stock" {
						err = nil
					}
					return err
				})
				if err != nil {
					t.Error(err)
				}
			}
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	for done := false; !done; {
		select {
		case <-finished:
			done = true
		default:
		}
		if err := chaintest.RetryRolledBack(func() error { _, err := Rebuild(ctx, rebuilder); return err }); err != nil {
			t.Fatal(err)
		}
	}
	mustCheck(t, writer)
	var quantity int64
	for _, loc := range []string{"WH-1", "WH-2"} {
		b, err := GetBalance(ctx, rebuilder, it.Tenant, it.ID, loc)
		if err != nil {
			t.Fatal(err)
		}
		quantity += b.Quantity.Units()
	}
	if quantity != goroutines/2*each*2 {
		t.Fatalf("quantity %d over both locations, received %d", quantity, goroutines/2*each*2)
	}
}
