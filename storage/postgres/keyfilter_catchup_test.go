package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/postgres"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// groupOnChains appends, in one transaction of b, keys keys to each of
// chains after PrepareKeys named them all, as a group commit does, and
// returns the round trips it took. Replayed are keys appended before (by
// another process), prepared with the others: each must be found at its
// seq. It returns the keys it appended, with their seqs.
func groupOnChains(t *testing.T, b *postgres.Backend, chains []string, keys int, round int, replayed map[storage.ChainKey]uint64) (int64, map[storage.ChainKey]uint64) {
	t.Helper()
	ctx := context.Background()
	before := postgres.RoundTrips(b)
	tx, err := b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var ck []storage.ChainKey
	for _, c := range chains {
		for k := range keys {
			ck = append(ck, storage.ChainKey{Chain: c, Key: fmt.Sprintf("r%d-%d", round, k)})
		}
	}
	prepared := slices.Clone(ck)
	for k := range replayed {
		prepared = append(prepared, k)
	}
	tx.(storage.KeyPreparer).PrepareKeys(ctx, prepared)
	for k, seq := range replayed {
		if got, err := tx.LookupKey(ctx, k.Chain, k.Key); err != nil || got != seq {
			t.Fatalf("replayed key %s/%s: seq %d, %v; want %d", k.Chain, k.Key, got, err, seq)
		}
	}
	appended := make(map[storage.ChainKey]uint64)
	for _, k := range ck {
		if _, err := tx.LookupKey(ctx, k.Chain, k.Key); err == nil {
			t.Fatalf("key %s/%s found before it was appended", k.Chain, k.Key)
		}
		h, err := tx.Head(ctx, k.Chain)
		var seq uint64
		if err == nil {
			seq = h.Seq
		}
		if err := tx.Append(ctx, k.Chain, rec(seq+1, k.Key), head(seq+1)); err != nil {
			t.Fatal(err)
		}
		appended[k] = seq + 1
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return postgres.RoundTrips(b) - before, appended
}

// A group whose chains another process appended to since its last group
// (its key filters behind) still takes two round trips: the filters catch
// up in the round trip that locks the heads, not one chain at a time under
// the locks; and a key the other process appended (a retry sent to
// another server) is found, not ruled out by the filter.
func TestGroupRoundTripsBesideAnotherProcess(t *testing.T) {
	bs := pgtest.OpenShared(t, 2)
	defer bs[0].Close()
	defer bs[1].Close()
	chains := []string{"a", "b", "c", "d"}
	var last map[storage.ChainKey]uint64
	for round := range 6 {
		for i, b := range bs {
			var n int64
			n, last = groupOnChains(t, b, chains, postgres.KeyFilterMinLookups+1, 2*round+i, last)
			if round >= 2 && n != 2 {
				t.Errorf("round %d, process %d: %d round trips, want 2", round, i, n)
			}
		}
	}
}

// A filter further behind than KeyFilterCatchUpMax is not caught up in the
// locking round trip: the keys it rules out are looked up as before, so a
// key another process appended far past the filter is still found, and
// the new keys are stored once.
func TestGroupBesideAnotherProcessFarBehind(t *testing.T) {
	bs := pgtest.OpenShared(t, 2)
	defer bs[0].Close()
	defer bs[1].Close()
	chains := []string{"a"}
	groupOnChains(t, bs[0], chains, postgres.KeyFilterMinLookups+1, 0, nil)
	groupOnChains(t, bs[0], chains, postgres.KeyFilterMinLookups+1, 1, nil) // the filter is built
	_, far := groupOnChains(t, bs[1], chains, postgres.KeyFilterCatchUpMax+10, 2, nil)
	// The first and the last key of the other process's.
	first, last := uint64(1<<63), uint64(0)
	for _, seq := range far {
		first, last = min(first, seq), max(last, seq)
	}
	replayed := make(map[storage.ChainKey]uint64)
	for k, seq := range far {
		if seq == first || seq == last {
			replayed[k] = seq
		}
	}
	if len(replayed) != 2 {
		t.Fatalf("%d keys replayed, want 2", len(replayed))
	}
	_, appended := groupOnChains(t, bs[0], chains, postgres.KeyFilterMinLookups+1, 3, replayed)
	_, again := groupOnChains(t, bs[1], chains, 1, 4, appended)
	if len(again) != 1 {
		t.Fatalf("the other process appended %d keys, want 1", len(again))
	}
}
