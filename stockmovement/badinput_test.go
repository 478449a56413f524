package stockmovement_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/stockmovement"
)

// TestBadInput refuses every case with its typed error and checks that
// nothing was written: chain heads, every state pair, entry counts and the
// balances read through the API are all unchanged.
func TestBadInput(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		setup(t, db, "acme")
		setup(t, db, "other")
		pcs := func(units int64) decimal.Decimal { return decimal.MustNew(units, 0) }
		receive := func(tenant, item, location string, quantity decimal.Decimal, key string) {
			t.Helper()
			if _, err := stockmovement.Receive(ctx, db, stockmovement.ReceiveRequest{Tenant: tenant, Item: item,
				Location: location, Quantity: quantity, IdempotencyKey: key}); err != nil {
				t.Fatal(err)
			}
		}
		receive("acme", "pcs", "A", pcs(10), "r1")              // acme/stock/pcs/A seq 1
		receive("acme", "pcs", "A", pcs(5), "r2")               // seq 2, reversed below
		receive("acme", "kg", "A", q(t, "1", 3), "r1")          // acme/stock/kg/A seq 1
		receive("other", "pcs", "A", pcs(7), "r1")              // other/stock/pcs/A seq 1
		receive("acme", "pcs", "B", pcs(1), "clash:in")         // so that a transfer keyed "clash" conflicts
		receive("acme", "pcs", "C", pcs(math.MaxInt64-16), "r") // the item's total is now MaxInt64
		if _, err := stockmovement.Reverse(ctx, db, stockmovement.ReverseRequest{Tenant: "acme",
			Original: stockmovement.Ref{Chain: "acme/stock/pcs/A", Seq: 2}, IdempotencyKey: "rv"}); err != nil {
			t.Fatal(err) // seq 3; total MaxInt64-5
		}
		if _, err := stockmovement.Issue(ctx, db, stockmovement.IssueRequest{Tenant: "acme", Item: "pcs",
			Location: "C", Quantity: pcs(20), IdempotencyKey: "i"}); err != nil {
			t.Fatal(err) // total MaxInt64-25
		}

		receipt := func(mutate func(*stockmovement.ReceiveRequest)) func() error {
			r := stockmovement.ReceiveRequest{Tenant: "acme", Item: "pcs", Location: "A", Quantity: pcs(1),
				Reference: "GRN", Note: "note", IdempotencyKey: "new"}
			mutate(&r)
			return func() error { _, err := stockmovement.Receive(ctx, db, r); return err }
		}
		transfer := func(mutate func(*stockmovement.TransferRequest)) func() error {
			r := stockmovement.TransferRequest{Tenant: "acme", Item: "pcs", From: "A", To: "B", Quantity: pcs(1), IdempotencyKey: "new"}
			mutate(&r)
			return func() error { _, err := stockmovement.Transfer(ctx, db, r); return err }
		}
		reverse := func(tenant, chainName string, seq uint64) func() error {
			return func() error {
				_, err := stockmovement.Reverse(ctx, db, stockmovement.ReverseRequest{Tenant: tenant,
					Original: stockmovement.Ref{Chain: chainName, Seq: seq}, IdempotencyKey: "new"})
				return err
			}
		}
		cases := []struct {
			name  string
			do    func() error
			want  error
			class error
		}{
			{"unknown item", receipt(func(r *stockmovement.ReceiveRequest) { r.Item = "nope" }), stockmovement.ErrItemNotFound, chain.ErrNotFound},
			{"unknown location", receipt(func(r *stockmovement.ReceiveRequest) { r.Location = "Z" }), stockmovement.ErrLocationNotFound, chain.ErrNotFound},
			{"unknown tenant", receipt(func(r *stockmovement.ReceiveRequest) { r.Tenant = "nobody" }), stockmovement.ErrItemNotFound, chain.ErrNotFound},
			{"wrong scale", receipt(func(r *stockmovement.ReceiveRequest) { r.Item, r.Quantity = "kg", q(t, "1.5", 2) }), stockmovement.ErrScaleMismatch, chain.ErrInvalid},
			{"zero quantity", receipt(func(r *stockmovement.ReceiveRequest) { r.Quantity = pcs(0) }), stockmovement.ErrZeroQuantity, chain.ErrInvalid},
			{"negative receipt", receipt(func(r *stockmovement.ReceiveRequest) { r.Quantity = pcs(-1) }), stockmovement.ErrNegativeQuantity, chain.ErrInvalid},
			{"balance overflow", receipt(func(r *stockmovement.ReceiveRequest) { r.Location = "C"; r.Quantity = pcs(math.MaxInt64 - 5) }), stockmovement.ErrOverflow, chain.ErrInvalid},
			{"total overflow", receipt(func(r *stockmovement.ReceiveRequest) { r.Location = "B"; r.Quantity = pcs(26) }), stockmovement.ErrOverflow, chain.ErrInvalid},
			{"adjustment without opposite", func() error {
				_, err := stockmovement.Adjust(ctx, db, stockmovement.AdjustRequest{Tenant: "acme", Item: "neg", Location: "A",
					Quantity: pcs(math.MinInt64), Reason: "count", IdempotencyKey: "new"})
				return err
			}, stockmovement.ErrOverflow, chain.ErrInvalid},
			{"adjustment without reason", func() error {
				_, err := stockmovement.Adjust(ctx, db, stockmovement.AdjustRequest{Tenant: "acme", Item: "pcs", Location: "A",
					Quantity: pcs(-1), IdempotencyKey: "new"})
				return err
			}, stockmovement.ErrMissingReason, chain.ErrInvalid},
			{"issue beyond stock", func() error {
				_, err := stockmovement.Issue(ctx, db, stockmovement.IssueRequest{Tenant: "acme", Item: "pcs", Location: "A",
					Quantity: pcs(11), IdempotencyKey: "new"})
				return err
			}, stockmovement.ErrNegativeStock, chain.ErrInvalid},
			{"same source and target", transfer(func(r *stockmovement.TransferRequest) { r.To = "A" }), stockmovement.ErrSameLocation, chain.ErrInvalid},
			{"transfer beyond stock", transfer(func(r *stockmovement.TransferRequest) { r.Quantity = pcs(11) }), stockmovement.ErrNegativeStock, chain.ErrInvalid},
			{"transfer to unknown location", transfer(func(r *stockmovement.TransferRequest) { r.To = "Z" }), stockmovement.ErrLocationNotFound, chain.ErrNotFound},
			{"transfer of zero", transfer(func(r *stockmovement.TransferRequest) { r.Quantity = pcs(0) }), stockmovement.ErrZeroQuantity, chain.ErrInvalid},
			{"transfer key taken at target", transfer(func(r *stockmovement.TransferRequest) { r.IdempotencyKey = "clash" }), chain.ErrIdempotencyConflict, chain.ErrIdempotencyConflict},
			{"reversing twice", reverse("acme", "acme/stock/pcs/A", 2), stockmovement.ErrAlreadyReversed, chain.ErrInvalid},
			{"reversing across tenants", reverse("acme", "other/stock/pcs/A", 1), stockmovement.ErrCrossTenant, chain.ErrInvalid},
			{"reversing a reversal", reverse("acme", "acme/stock/pcs/A", 3), stockmovement.ErrNotReversible, chain.ErrInvalid},
			{"reversing a missing seq", reverse("acme", "acme/stock/pcs/A", 99), stockmovement.ErrMovementNotFound, chain.ErrNotFound},
			{"reversing seq 0", reverse("acme", "acme/stock/pcs/A", 0), stockmovement.ErrInvalidReference, chain.ErrInvalid},
			{"reversing the catalog", reverse("acme", "acme/stock/catalog", 1), stockmovement.ErrInvalidReference, chain.ErrInvalid},
			{"reversing into negative stock", reverse("acme", "acme/stock/pcs/C", 1), stockmovement.ErrNegativeStock, chain.ErrInvalid},
			{"missing key", receipt(func(r *stockmovement.ReceiveRequest) { r.IdempotencyKey = "" }), stockmovement.ErrInvalidKey, chain.ErrInvalid},
			{"key too long", receipt(func(r *stockmovement.ReceiveRequest) {
				r.IdempotencyKey = strings.Repeat("k", stockmovement.KeyLengthMax+1)
			}), stockmovement.ErrInvalidKey, chain.ErrInvalid},
			{"key with control character", receipt(func(r *stockmovement.ReceiveRequest) { r.IdempotencyKey = "a\nb" }), stockmovement.ErrInvalidKey, chain.ErrInvalid},
			{"note too long", receipt(func(r *stockmovement.ReceiveRequest) { r.Note = strings.Repeat("n", stockmovement.NoteLengthMax+1) }), stockmovement.ErrInvalidText, chain.ErrInvalid},
			{"reference not UTF-8", receipt(func(r *stockmovement.ReceiveRequest) { r.Reference = "\xff" }), stockmovement.ErrInvalidText, chain.ErrInvalid},
			{"tenant with separator", receipt(func(r *stockmovement.ReceiveRequest) { r.Tenant = "acme/x" }), stockmovement.ErrInvalidName, chain.ErrInvalid},
			{"empty item id", receipt(func(r *stockmovement.ReceiveRequest) { r.Item = "" }), stockmovement.ErrInvalidName, chain.ErrInvalid},
			{"key reused for another request", receipt(func(r *stockmovement.ReceiveRequest) { r.IdempotencyKey = "r1" }), chain.ErrIdempotencyConflict, chain.ErrIdempotencyConflict},
		}
		stats := func() chain.Stats {
			s, err := db.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			s.SizeBytes = 0
			return s
		}
		balances := func() []string {
			var all []string
			for _, item := range []string{"pcs", "kg", "neg"} {
				for _, location := range []string{"A", "B", "C"} {
					all = append(all, balance(t, db, "acme", item, location))
				}
			}
			return all
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				before, beforeStats, beforeBalances := snapshot(t, db), stats(), balances()
				err := c.do()
				if !errors.Is(err, c.want) || !errors.Is(err, c.class) {
					t.Fatalf("got %v, want %v and %v", err, c.want, c.class)
				}
				if !strings.HasPrefix(err.Error(), "stockmovement: ") && !errors.Is(err, chain.ErrIdempotencyConflict) {
					t.Fatalf("message %q does not name the package", err)
				}
				sameSnapshot(t, before, snapshot(t, db))
				if after := stats(); after != beforeStats {
					t.Fatalf("stats %+v, were %+v", after, beforeStats)
				}
				sameSnapshot(t, beforeBalances, balances())
			})
		}
		mustCheck(t, db)
	})
}

// TestFailureInsideCallerTransaction: an operation that fails inside a
// caller's Update fails the whole transaction, including the caller's other
// movements.
func TestFailureInsideCallerTransaction(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		setup(t, db, "acme")
		before := snapshot(t, db)
		err := db.Update(ctx, func(tx *chain.Tx) error {
			if _, err := stockmovement.ReceiveTx(tx, stockmovement.ReceiveRequest{Tenant: "acme", Item: "pcs",
				Location: "A", Quantity: decimal.MustNew(5, 0), IdempotencyKey: "r"}); err != nil {
				return err
			}
			b, err := stockmovement.GetBalanceTx(tx, "acme", "pcs", "A")
			if err != nil || b.Quantity.String() != "5" {
				t.Errorf("balance inside the transaction: %+v %v", b, err)
			}
			_, err = stockmovement.IssueTx(tx, stockmovement.IssueRequest{Tenant: "acme", Item: "pcs",
				Location: "A", Quantity: decimal.MustNew(6, 0), IdempotencyKey: "i"})
			return err
		})
		if !errors.Is(err, stockmovement.ErrNegativeStock) {
			t.Fatalf("got %v", err)
		}
		sameSnapshot(t, before, snapshot(t, db))
	})
}
