package stockmovement_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/chain/chaintest"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/stockmovement"
)

// steppingClock returns a clock that advances one second per reading from a
// fixed start, so entry times are distinct and predictable.
func steppingClock() func() time.Time {
	return chaintest.SteppingClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Second)
}

// forEachBackend runs fn on a fresh ledger of every registered backend.
func forEachBackend(t *testing.T, fn func(t *testing.T, db *chain.DB)) {
	t.Helper()
	chaintest.ForEachBackend(t, func() chain.Options { return chain.Options{Clock: steppingClock()} }, fn)
}

// setup defines, for a tenant, items "pcs" (scale 0), "kg" (scale 3) and
// "neg" (scale 0, negative allowed), and locations "A", "B", "C".
func setup(t testing.TB, db *chain.DB, tenant string) {
	t.Helper()
	ctx := context.Background()
	for _, it := range []stockmovement.Item{
		{ID: "pcs", Name: "Pieces"}, {ID: "kg", Name: "Kilograms", Scale: 3},
		{ID: "neg", Name: "Backorderable", AllowNegative: true},
	} {
		if _, err := stockmovement.DefineItem(ctx, db, tenant, it); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"A", "B", "C"} {
		if _, err := stockmovement.DefineLocation(ctx, db, tenant, stockmovement.Location{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
}

// q parses a quantity at a scale, for tests.
func q(t testing.TB, text string, scale uint8) decimal.Decimal {
	t.Helper()
	d, err := decimal.Parse(text, scale)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// snapshot describes everything stored: every chain head and every state
// pair. Two equal snapshots mean nothing was written in between.
func snapshot(t testing.TB, db *chain.DB) []string {
	t.Helper()
	var lines []string
	ctx := context.Background()
	for h, err := range db.Chains(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf("chain %s %d %s", h.Chain, h.Seq, h.Hash))
	}
	err := db.View(ctx, func(tx *chain.Tx) error {
		for kv, err := range tx.StateScan(nil, nil, false) {
			if err != nil {
				return err
			}
			lines = append(lines, fmt.Sprintf("state %q %x", kv.Key, kv.Value))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

func sameSnapshot(t testing.TB, before, after []string) {
	t.Helper()
	if !slices.Equal(before, after) {
		t.Fatalf("ledger changed:\nbefore %q\nafter  %q", before, after)
	}
}

// mustCheck runs Check and fails on any failure.
func mustCheck(t testing.TB, db *chain.DB) {
	t.Helper()
	failures, err := stockmovement.Check(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	if len(failures) > 0 {
		t.Fatalf("check: %v", failures)
	}
}

// balance returns the current balance text of an item at a location.
func balance(t testing.TB, db *chain.DB, tenant, item, location string) string {
	t.Helper()
	b, err := stockmovement.GetBalance(context.Background(), db, tenant, item, location)
	if err != nil {
		t.Fatal(err)
	}
	return b.Quantity.String()
}
