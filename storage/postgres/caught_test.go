package postgres_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage"
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

// Entries another process appended that are larger together than the
// catch-up's bytes come back as keys only: the transaction keeps none of
// them, and reads them from the server, whole, in order.
func TestCaughtEntriesPastTheBytes(t *testing.T) {
	ctx := context.Background()
	bs := pgtest.OpenShared(t, 2)
	for _, b := range bs {
		t.Cleanup(func() { b.Close() })
	}
	write := func(b *postgres.Backend, seq uint64, data []byte) {
		t.Helper()
		tx, err := b.Begin(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		r := storage.Record{Seq: seq, IdempotencyKey: fmt.Sprintf("k%d", seq), Data: data}
		if err := tx.Append(ctx, "big", r, head(seq)); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	write(bs[0], 1, []byte("small")) // process 0 saw the head at 1
	const bigEntries = 9             // 9 MiB, past PreparedDataBytesMax
	want := map[uint64][]byte{}
	for seq := uint64(2); seq < 2+bigEntries; seq++ {
		data := bytes.Repeat([]byte{byte(seq)}, 1<<20)
		write(bs[1], seq, data)
		want[seq] = data
	}
	// 8 MiB for one chain: 8 of the entries with their data, the 9th as
	// its key only; 64 KiB a chain for 128 chains: none with data.
	for _, c := range []struct{ chains, withData int }{{1, 8}, {128, 0}} {
		withData, keysOnly, err := postgres.CatchUpRows(ctx, bs[0], "big", 1, c.chains)
		if err != nil || withData != c.withData || keysOnly != bigEntries-c.withData {
			t.Fatalf("catch-up beside %d chains: %d entries with data, %d keys only, %v; want %d with data",
				c.chains, withData, keysOnly, err, c.withData)
		}
	}
	tx, err := bs[0].Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	tx.(storage.KeyPreparer).PrepareKeys(ctx, []storage.ChainKey{{Chain: "big", Key: "new"}, {Chain: "big", Key: "k5"}})
	if seq, err := tx.LookupKey(ctx, "big", "k5"); err != nil || seq != 5 {
		t.Fatalf("key k5 appended by the other process: seq %d, %v", seq, err)
	}
	next := uint64(2)
	for r, err := range tx.Entries(ctx, "big", 2) {
		if err != nil {
			t.Fatal(err)
		}
		if r.Seq != next || !bytes.Equal(r.Data, want[r.Seq]) {
			t.Fatalf("entry %d (want %d): %d bytes, not the ones written", r.Seq, next, len(r.Data))
		}
		next++
	}
	if next != 2+bigEntries {
		t.Fatalf("read up to seq %d, want %d", next-1, 1+bigEntries)
	}
}
