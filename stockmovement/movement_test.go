package stockmovement_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/stockmovement"
	"github.com/ledgerworks/ledger/storage/storagetest"
)

func TestMovementsAndBalances(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		setup(t, db, "acme")
		r, err := stockmovement.Receive(ctx, db, stockmovement.ReceiveRequest{Tenant: "acme", Item: "kg", Location: "A",
			Quantity: q(t, "12.5", 3), Reference: "GRN-1", Note: "first", IdempotencyKey: "r1"})
		if err != nil {
			t.Fatal(err)
		}
		if r.Replayed || len(r.Entries) != 1 || r.Entries[0].Seq != 1 || r.Entries[0].Balance.String() != "12.500" ||
			r.Entries[0].Kind != stockmovement.KindReceipt || r.Entries[0].Chain != "acme/stock/kg/A" {
			t.Fatalf("receipt %+v", r)
		}
		if _, err := stockmovement.Issue(ctx, db, stockmovement.IssueRequest{Tenant: "acme", Item: "kg", Location: "A",
			Quantity: q(t, "2.25", 3), IdempotencyKey: "i1"}); err != nil {
			t.Fatal(err)
		}
		if _, err := stockmovement.Adjust(ctx, db, stockmovement.AdjustRequest{Tenant: "acme", Item: "kg", Location: "A",
			Quantity: q(t, "-0.25", 3), Reason: "count", IdempotencyKey: "a1"}); err != nil {
			t.Fatal(err)
		}
		tr, err := stockmovement.Transfer(ctx, db, stockmovement.TransferRequest{Tenant: "acme", Item: "kg", From: "A", To: "B",
			Quantity: q(t, "4", 3), Reference: "TR-1", IdempotencyKey: "t1"})
		if err != nil {
			t.Fatal(err)
		}
		if len(tr.Entries) != 2 || tr.Entries[0].IdempotencyKey != "t1:out" || tr.Entries[1].IdempotencyKey != "t1:in" ||
			tr.Entries[0].Quantity.String() != "-4.000" || tr.Entries[1].Balance.String() != "4.000" ||
			tr.Entries[0].Counterpart != "B" || tr.Entries[1].Counterpart != "A" {
			t.Fatalf("transfer %+v", tr)
		}
		if got := balance(t, db, "acme", "kg", "A"); got != "6.000" {
			t.Fatalf("A = %s", got)
		}
		if got := balance(t, db, "acme", "kg", "B"); got != "4.000" {
			t.Fatalf("B = %s", got)
		}
		total, err := stockmovement.ItemTotal(ctx, db, "acme", "kg")
		if err != nil || total.String() != "10.000" {
			t.Fatalf("total %s %v", total, err)
		}
		all, err := stockmovement.ItemBalances(ctx, db, "acme", "kg")
		if err != nil || len(all) != 2 || all[0].Location != "A" || all[1].Quantity.String() != "4.000" {
			t.Fatalf("balances %+v %v", all, err)
		}
		// Point in time, by seq and by recording time.
		for seq, want := range map[uint64]string{0: "0.000", 1: "12.500", 2: "10.250", 3: "10.000", 4: "6.000"} {
			b, err := stockmovement.BalanceAtSeq(ctx, db, "acme", "kg", "A", seq)
			if err != nil || b.Quantity.String() != want || b.Seq != seq {
				t.Fatalf("at seq %d: %+v %v, want %s", seq, b, err, want)
			}
		}
		if _, err := stockmovement.BalanceAtSeq(ctx, db, "acme", "kg", "A", 5); !errors.Is(err, stockmovement.ErrSeqBeyondHead) || !errors.Is(err, chain.ErrNotFound) {
			t.Fatalf("beyond head: %v", err)
		}
		var times []int64
		for e, err := range stockmovement.History(ctx, db, "acme", "kg", "A", 1) {
			if err != nil {
				t.Fatal(err)
			}
			times = append(times, e.TimeUnixNano)
		}
		if len(times) != 4 {
			t.Fatalf("history has %d entries", len(times))
		}
		before, err := stockmovement.BalanceAtTime(ctx, db, "acme", "kg", "A", time.Unix(0, times[0]-1))
		if err != nil || before.Quantity.String() != "0.000" || before.Seq != 0 {
			t.Fatalf("before first: %+v %v", before, err)
		}
		for i, at := range times {
			for _, delta := range []int64{0, 1} { // exactly at, and just after, entry i
				b, err := stockmovement.BalanceAtTime(ctx, db, "acme", "kg", "A", time.Unix(0, at+delta))
				if err != nil || b.Seq != uint64(i+1) {
					t.Fatalf("at time of seq %d (+%d): %+v %v", i+1, delta, b, err)
				}
			}
		}
		// Reversing the in half of the transfer reverses both halves.
		rev, err := stockmovement.Reverse(ctx, db, stockmovement.ReverseRequest{Tenant: "acme",
			Original: stockmovement.Ref{Chain: "acme/stock/kg/B", Seq: 1}, Reference: "TR-1-CANCEL", IdempotencyKey: "rv1"})
		if err != nil {
			t.Fatal(err)
		}
		if len(rev.Entries) != 2 || rev.Entries[0].Location != "A" || rev.Entries[0].Quantity.String() != "4.000" ||
			rev.Entries[0].OriginalSeq != 4 || rev.Entries[1].IdempotencyKey != "rv1:in" || rev.Entries[1].OriginalChain != "acme/stock/kg/B" {
			t.Fatalf("reversal %+v", rev)
		}
		if balance(t, db, "acme", "kg", "A") != "10.000" || balance(t, db, "acme", "kg", "B") != "0.000" {
			t.Fatal("reversal did not restore the balances")
		}
		// Reversing the out half now: already reversed.
		_, err = stockmovement.Reverse(ctx, db, stockmovement.ReverseRequest{Tenant: "acme",
			Original: stockmovement.Ref{Chain: "acme/stock/kg/A", Seq: 4}, IdempotencyKey: "rv2"})
		if !errors.Is(err, stockmovement.ErrAlreadyReversed) || !errors.Is(err, chain.ErrInvalid) {
			t.Fatalf("second reversal: %v", err)
		}
		mustCheck(t, db)
	})
}

func TestReplays(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		setup(t, db, "acme")
		receipt := stockmovement.ReceiveRequest{Tenant: "acme", Item: "pcs", Location: "A",
			Quantity: q(t, "10", 0), Reference: "GRN-1", IdempotencyKey: "k"}
		first, err := stockmovement.Receive(ctx, db, receipt)
		if err != nil {
			t.Fatal(err)
		}
		// Stock moves on; a retry still replays (the running quantity on the
		// entry differs from what a new entry would carry).
		if _, err := stockmovement.Issue(ctx, db, stockmovement.IssueRequest{Tenant: "acme", Item: "pcs", Location: "A",
			Quantity: q(t, "3", 0), IdempotencyKey: "other"}); err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, db)
		again, err := stockmovement.Receive(ctx, db, receipt)
		if err != nil || !again.Replayed || again.Entries[0].Seq != first.Entries[0].Seq ||
			again.Entries[0].Balance.String() != "10" || again.Entries[0].TimeUnixNano != first.Entries[0].TimeUnixNano {
			t.Fatalf("replay %+v %v", again, err)
		}
		sameSnapshot(t, before, snapshot(t, db))
		// The same key with another request conflicts.
		changed := receipt
		changed.Quantity = q(t, "11", 0)
		_, err = stockmovement.Receive(ctx, db, changed)
		var conflict *chain.ConflictError
		if !errors.Is(err, chain.ErrIdempotencyConflict) || !errors.As(err, &conflict) || conflict.ExistingSeq != 1 {
			t.Fatalf("conflict: %v", err)
		}
		// The same key for an issue conflicts too.
		_, err = stockmovement.Issue(ctx, db, stockmovement.IssueRequest{Tenant: "acme", Item: "pcs", Location: "A",
			Quantity: q(t, "10", 0), Reference: "GRN-1", IdempotencyKey: "k"})
		if !errors.Is(err, chain.ErrIdempotencyConflict) {
			t.Fatalf("kind conflict: %v", err)
		}
		sameSnapshot(t, before, snapshot(t, db))
		// Inside one caller transaction: the second call replays the first.
		tr := stockmovement.TransferRequest{Tenant: "acme", Item: "pcs", From: "A", To: "B", Quantity: q(t, "2", 0), IdempotencyKey: "t"}
		var results [2]stockmovement.Result
		err = db.Update(ctx, func(tx *chain.Tx) error {
			for i := range results {
				var err error
				if results[i], err = stockmovement.TransferTx(tx, tr); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil || results[0].Replayed || !results[1].Replayed || results[1].Entries[1].Seq != results[0].Entries[1].Seq {
			t.Fatalf("transfer twice in one transaction: %+v %v", results, err)
		}
		if balance(t, db, "acme", "pcs", "A") != "5" || balance(t, db, "acme", "pcs", "B") != "2" {
			t.Fatal("a replay inside a transaction moved stock")
		}
		// A replayed transfer outside.
		again, err = stockmovement.Transfer(ctx, db, tr)
		if err != nil || !again.Replayed || len(again.Entries) != 2 {
			t.Fatalf("transfer replay %+v %v", again, err)
		}
		// A reversal replays under its key, even after the reversed balance moved.
		rv := stockmovement.ReverseRequest{Tenant: "acme", Original: stockmovement.Ref{Chain: "acme/stock/pcs/A", Seq: 3}, IdempotencyKey: "rv"}
		if _, err := stockmovement.Reverse(ctx, db, rv); err != nil {
			t.Fatal(err)
		}
		rv.Original = stockmovement.Ref{Chain: "acme/stock/pcs/B", Seq: 1} // the other half: same reversal
		again, err = stockmovement.Reverse(ctx, db, rv)
		if err != nil || !again.Replayed {
			t.Fatalf("reversal replay %+v %v", again, err)
		}
		mustCheck(t, db)
	})
}

func TestNegativeStock(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		setup(t, db, "acme")
		if _, err := stockmovement.Receive(ctx, db, stockmovement.ReceiveRequest{Tenant: "acme", Item: "kg", Location: "A",
			Quantity: q(t, "1.5", 3), IdempotencyKey: "r"}); err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, db)
		_, err := stockmovement.Issue(ctx, db, stockmovement.IssueRequest{Tenant: "acme", Item: "kg", Location: "A",
			Quantity: q(t, "2", 3), IdempotencyKey: "i"})
		var short *stockmovement.InsufficientStockError
		if !errors.As(err, &short) || !errors.Is(err, stockmovement.ErrNegativeStock) || !errors.Is(err, chain.ErrInvalid) ||
			short.Shortfall.String() != "0.500" || short.Balance.String() != "1.500" {
			t.Fatalf("negative issue: %v", err)
		}
		if want := `stockmovement: issue: negative stock refused: item "kg" at location "A" has 1.500, change -2.000 is short by 0.500`; err.Error() != want {
			t.Fatalf("message %q", err.Error())
		}
		sameSnapshot(t, before, snapshot(t, db))
		// Allowed per item; then the policy changes through a new definition.
		res, err := stockmovement.Issue(ctx, db, stockmovement.IssueRequest{Tenant: "acme", Item: "neg", Location: "A",
			Quantity: q(t, "5", 0), IdempotencyKey: "i"})
		if err != nil || res.Entries[0].Balance.String() != "-5" {
			t.Fatalf("allowed negative: %+v %v", res, err)
		}
		def, err := stockmovement.DefineItem(ctx, db, "acme", stockmovement.Item{ID: "neg", Name: "Backorderable"})
		if err != nil || def.Unchanged || def.Seq != 7 {
			t.Fatalf("redefine: %+v %v", def, err)
		}
		_, err = stockmovement.Issue(ctx, db, stockmovement.IssueRequest{Tenant: "acme", Item: "neg", Location: "A",
			Quantity: q(t, "1", 0), IdempotencyKey: "i2"})
		if !errors.As(err, &short) || short.Shortfall.String() != "6" {
			t.Fatalf("after policy change: %v", err)
		}
		// A receipt into negative stock is fine: it lowers the shortfall.
		if _, err := stockmovement.Receive(ctx, db, stockmovement.ReceiveRequest{Tenant: "acme", Item: "neg", Location: "A",
			Quantity: q(t, "2", 0), IdempotencyKey: "r2"}); err != nil {
			t.Fatal(err)
		}
		mustCheck(t, db)
	})
}

func TestDefinitions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		setup(t, db, "acme")
		again, err := stockmovement.DefineItem(ctx, db, "acme", stockmovement.Item{ID: "kg", Name: "Kilograms", Scale: 3})
		if err != nil || !again.Unchanged || again.Seq != 2 {
			t.Fatalf("same definition: %+v %v", again, err)
		}
		before := snapshot(t, db)
		_, err = stockmovement.DefineItem(ctx, db, "acme", stockmovement.Item{ID: "kg", Scale: 2})
		if !errors.Is(err, stockmovement.ErrScaleChange) || !errors.Is(err, chain.ErrInvalid) {
			t.Fatalf("scale change: %v", err)
		}
		_, err = stockmovement.DefineItem(ctx, db, "acme", stockmovement.Item{ID: "x", Scale: decimal.ScaleMax + 1})
		if !errors.Is(err, stockmovement.ErrInvalidScale) {
			t.Fatalf("scale range: %v", err)
		}
		_, err = stockmovement.DefineLocation(ctx, db, "acme", stockmovement.Location{ID: "a/b"})
		if !errors.Is(err, stockmovement.ErrInvalidName) || !errors.Is(err, chain.ErrInvalid) {
			t.Fatalf("bad location id: %v", err)
		}
		sameSnapshot(t, before, snapshot(t, db))
		renamed, err := stockmovement.DefineLocation(ctx, db, "acme", stockmovement.Location{ID: "A", Name: "Main"})
		if err != nil || renamed.Unchanged || renamed.Seq != 7 {
			t.Fatalf("rename: %+v %v", renamed, err)
		}
		items, err := stockmovement.Items(ctx, db, "acme", "", 0)
		if err != nil || len(items) != 3 || items[0].ID != "kg" || items[2].ID != "pcs" {
			t.Fatalf("items %+v %v", items, err)
		}
		page, err := stockmovement.Items(ctx, db, "acme", "kg", 1)
		if err != nil || len(page) != 1 || page[0].ID != "neg" {
			t.Fatalf("items page %+v %v", page, err)
		}
		locations, err := stockmovement.Locations(ctx, db, "acme", "", 0)
		if err != nil || len(locations) != 3 || locations[0].Name != "Main" {
			t.Fatalf("locations %+v %v", locations, err)
		}
		if _, err := stockmovement.GetItem(ctx, db, "other", "kg"); !errors.Is(err, stockmovement.ErrItemNotFound) || !errors.Is(err, chain.ErrNotFound) {
			t.Fatalf("other tenant's item: %v", err)
		}
		mustCheck(t, db)
	})
}

// commitCounter counts group commits.
type commitCounter struct{ commits atomic.Int64 }

func (c *commitCounter) GroupCommitted(int, time.Duration) { c.commits.Add(1) }
func (c *commitCounter) Replayed()                         {}

// TestReplayTakesNoWriteTransaction: a retried movement is answered from a
// read transaction; only new movements reach the group committer.
func TestReplayTakesNoWriteTransaction(t *testing.T) {
	for _, f := range storagetest.Factories(t) {
		t.Run(f.Name, func(t *testing.T) {
			ctx := context.Background()
			counter := &commitCounter{}
			db, err := chain.OpenBackend(f.Open(t), chain.Options{Clock: steppingClock(), Metrics: counter})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			setup(t, db, "acme")
			transfer := stockmovement.TransferRequest{Tenant: "acme", Item: "pcs", From: "A", To: "B",
				Quantity: decimal.MustNew(1, 0), IdempotencyKey: "t"}
			if _, err := stockmovement.Receive(ctx, db, stockmovement.ReceiveRequest{Tenant: "acme", Item: "pcs",
				Location: "A", Quantity: decimal.MustNew(1, 0), IdempotencyKey: "r"}); err != nil {
				t.Fatal(err)
			}
			if _, err := stockmovement.Transfer(ctx, db, transfer); err != nil {
				t.Fatal(err)
			}
			before := counter.commits.Load()
			res, err := stockmovement.Transfer(ctx, db, transfer)
			if err != nil || !res.Replayed {
				t.Fatalf("replay %+v %v", res, err)
			}
			transfer.Quantity = decimal.MustNew(2, 0)
			if _, err := stockmovement.Transfer(ctx, db, transfer); !errors.Is(err, chain.ErrIdempotencyConflict) {
				t.Fatalf("conflict: %v", err)
			}
			if after := counter.commits.Load(); after != before {
				t.Fatalf("%d group commits for a replay and a conflict", after-before)
			}
			// Inside a read transaction a new movement is refused as a write.
			err = db.View(ctx, func(tx *chain.Tx) error {
				_, err := stockmovement.ReceiveTx(tx, stockmovement.ReceiveRequest{Tenant: "acme", Item: "pcs",
					Location: "A", Quantity: decimal.MustNew(1, 0), IdempotencyKey: "new"})
				return err
			})
			if !errors.Is(err, chain.ErrReadOnly) {
				t.Fatalf("new movement in View: %v", err)
			}
		})
	}
}
