package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage/postgres"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// Two ledgers on one schema, as two processes of a service, append keyed
// batches to the same chains in turn. Each batch finds its chains' Merkle
// trees behind by the other's entries; the entries the head locks caught
// up bring them to the head, so a batch costs the same round trips as
// beside no other process (no range read, no entries read, no buffered
// appends sent early), and every tree is still the tree of its entries.
// With one key a chain a batch (a group commit of a few requests) no key
// filter is built; with more, the filters catch up too.
func TestTreesCatchUpWithTheHeadLocks(t *testing.T) {
	for _, keys := range []int{1, postgres.KeyFilterMinLookups + 1} {
		t.Run(fmt.Sprintf("%d keys a chain", keys), func(t *testing.T) { treesCatchUp(t, keys) })
	}
}

func treesCatchUp(t *testing.T, keysPerChain int) {
	ctx := context.Background()
	bs := pgtest.OpenShared(t, 2)
	dbs := make([]*chain.DB, len(bs))
	for i, b := range bs {
		db, err := chain.OpenBackend(b, chain.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		dbs[i] = db
	}
	chains := []string{"a", "b", "c", "d"}
	batches := 0
	batch := func(i int) int64 {
		t.Helper()
		var reqs []chain.Request
		for _, c := range chains {
			for k := range keysPerChain {
				reqs = append(reqs, chain.Request{
					Chain: c, Type: "t/v1",
					IdempotencyKey: fmt.Sprintf("b%d-%d", batches, k),
					Payload:        []byte(fmt.Sprintf(`{"n":%d}`, k)),
				})
			}
		}
		batches++
		before := postgres.RoundTrips(bs[i])
		if _, err := dbs[i].AppendBatch(ctx, reqs, nil); err != nil {
			t.Fatal(err)
		}
		return postgres.RoundTrips(bs[i]) - before
	}
	batch(0)
	alone := batch(0) // nothing to catch up: its own batch was the last
	for round := range 6 {
		for i := range dbs {
			if n := batch(i); round > 0 && n != alone {
				t.Errorf("round %d, process %d: %d round trips, %d beside no other process", round, i, n, alone)
			}
		}
	}
	for i, db := range dbs {
		report, err := db.Verify(ctx, chain.VerifyOptions{Trees: true})
		if err != nil || !report.OK() {
			t.Fatalf("process %d: verify: %v %v", i, err, report.Failures)
		}
		heads, err := db.TreeHeads(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range heads {
			if want := uint64(batches * keysPerChain); h.Size != want {
				t.Errorf("process %d: tree of %s has %d leaves, want %d", i, h.Chain, h.Size, want)
			}
		}
	}
}
