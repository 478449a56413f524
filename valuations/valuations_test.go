package valuations

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/ledgerworks/ledger/chain"
)

var errRollback = errors.New("rollback on purpose")

// planned returns the entries an operation would append, computed in a
// transaction that is then rolled back.
func planned(t *testing.T, db *chain.DB, op func(tx *chain.Tx) (Result, error)) []chain.Request {
	t.Helper()
	var requests []chain.Request
	err := db.Update(context.Background(), func(tx *chain.Tx) error {
		requests = requests[:0]
		res, err := op(tx)
		if err != nil {
			return err
		}
		for _, leg := range res.Legs {
			for _, e := range []chain.Entry{leg.QuantityEntry, leg.ValueEntry} {
				requests = append(requests, chain.Request{Chain: e.Chain, IdempotencyKey: e.IdempotencyKey, Type: e.Type, Payload: e.Payload})
			}
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("plan: %v", err)
	}
	return requests
}

func stateMismatches(t *testing.T, db *chain.DB) int {
	t.Helper()
	failures, err := Check(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range failures {
		if f.Reason == chain.ReasonStateMismatch {
			n++
		}
	}
	return n
}

func item(method Method) Item {
	return Item{Tenant: "acme", ID: "SKU-1", Method: method, QuantityScale: 0, Currency: "EUR", MinorUnit: 2}
}

func eachMethod(t *testing.T, fn func(t *testing.T, db *chain.DB, it Item)) {
	for _, m := range []Method{MovingAverage, FIFO} {
		t.Run(m.String(), func(t *testing.T) {
			eachBackend(t, func(t *testing.T, db *chain.DB) {
				it := item(m)
				defineItem(t, db, it)
				fn(t, db, it)
			})
		})
	}
}

func receipt(t *testing.T, it Item, loc, id, quantity, cost string) ReceiveRequest {
	return ReceiveRequest{Tenant: it.Tenant, Item: it.ID, Location: loc, OperationID: id,
		Quantity: dec(t, quantity, it.QuantityScale), UnitCost: decPtr(t, cost, it.MinorUnit)}
}

func TestHalfWrittenOperationCompletesOnRetry(t *testing.T) {
	ctx := context.Background()
	for _, half := range []int{0, 1} { // 0: only :qty exists, 1: only :value exists
		t.Run([]string{"quantity-half", "value-half"}[half], func(t *testing.T) {
			eachMethod(t, func(t *testing.T, db *chain.DB, it Item) {
				if _, err := Receive(ctx, db, receipt(t, it, "WH-1", "r1", "10", "10.00")); err != nil {
					t.Fatal(err)
				}
				r2 := receipt(t, it, "WH-1", "r2", "5", "11.01")
				plan := planned(t, db, func(tx *chain.Tx) (Result, error) { return ReceiveTx(tx, r2) })
				if len(plan) != 2 {
					t.Fatalf("plan has %d entries", len(plan))
				}
				orphan, err := db.Append(ctx, plan[half])
				if err != nil || orphan.Replayed {
					t.Fatalf("append half: %+v %v", orphan, err)
				}
				if stateMismatches(t, db) == 0 {
					t.Fatal("Check does not report the half-written operation")
				}
				res, err := Receive(ctx, db, r2)
				if err != nil {
					t.Fatal(err)
				}
				if res.Replayed {
					t.Fatal("completion reported as a replay")
				}
				got := []chain.Entry{res.Legs[0].QuantityEntry, res.Legs[0].ValueEntry}
				if got[half].Hash != orphan.Entry.Hash {
					t.Fatalf("the existing half was not reused: %+v vs %+v", got[half], orphan.Entry)
				}
				for _, req := range plan {
					h, err := db.Head(ctx, req.Chain)
					if err != nil || h.Seq != 2 {
						t.Fatalf("%s head %d (%v), want 2: a half was duplicated or lost", req.Chain, h.Seq, err)
					}
				}
				if res.ValueChange().String() != "55.05" {
					t.Fatalf("value change %s", res.ValueChange())
				}
				mustCheck(t, db)
				again, err := Receive(ctx, db, r2)
				if err != nil || !again.Replayed || again.Legs[0].ValueEntry.Hash != res.Legs[0].ValueEntry.Hash {
					t.Fatalf("replay %+v %v", again, err)
				}
			})
		})
	}
}

func TestHalfWrittenOperationIsCompletedBeforeAnother(t *testing.T) {
	ctx := context.Background()
	eachMethod(t, func(t *testing.T, db *chain.DB, it Item) {
		if _, err := Receive(ctx, db, receipt(t, it, "WH-1", "r1", "10", "10.00")); err != nil {
			t.Fatal(err)
		}
		transfer := TransferRequest{Tenant: it.Tenant, Item: it.ID, From: "WH-1", To: "WH-2", OperationID: "t1", Quantity: dec(t, "4", 0)}
		plan := planned(t, db, func(tx *chain.Tx) (Result, error) { return TransferTx(tx, transfer) })
		if len(plan) != 4 {
			t.Fatalf("transfer plan has %d entries", len(plan))
		}
		if _, err := db.Append(ctx, plan[3]); err != nil { // the destination's :value only
			t.Fatal(err)
		}
		// Another operation at the destination completes the transfer first,
		// from the request its half carries.
		res, err := Receive(ctx, db, receipt(t, it, "WH-2", "r2", "1", "20.00"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := GetBalance(ctx, db, it.Tenant, it.ID, "WH-2")
		if err != nil || b.Quantity.String() != "5" || b.Value.String() != "60.00" {
			t.Fatalf("WH-2 %+v %v (result %+v)", b, err, res)
		}
		mustCheck(t, db)
		again, err := Transfer(ctx, db, transfer)
		if err != nil || !again.Replayed || len(again.Legs) != 2 || again.ValueChange().String() != "-40.00" {
			t.Fatalf("transfer retry %+v %v", again, err)
		}
		for _, req := range plan {
			if e, err := db.Lookup(ctx, req.Chain, req.IdempotencyKey); err != nil || e.Fingerprint() != chain.Fingerprint(req.Type, req.Payload) {
				t.Fatalf("%s %s: %v", req.Chain, req.IdempotencyKey, err)
			}
		}
	})
}

func TestConflictingRetryIsRefused(t *testing.T) {
	ctx := context.Background()
	eachMethod(t, func(t *testing.T, db *chain.DB, it Item) {
		if _, err := Receive(ctx, db, receipt(t, it, "WH-1", "r1", "10", "10.00")); err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, db)
		_, err := Receive(ctx, db, receipt(t, it, "WH-1", "r1", "11", "10.00"))
		var conflict *ConflictError
		if !errors.Is(err, chain.ErrIdempotencyConflict) || !errors.Is(err, ErrOperationConflict) || !errors.As(err, &conflict) || conflict.ExistingSeq != 1 {
			t.Fatalf("conflict: %v", err)
		}
		_, err = Issue(ctx, db, IssueRequest{Tenant: it.Tenant, Item: it.ID, Location: "WH-1", OperationID: "r1", Quantity: dec(t, "1", 0)})
		if !errors.Is(err, chain.ErrIdempotencyConflict) {
			t.Fatalf("issue under a receipt's id: %v", err)
		}
		// Inside a caller's transaction too.
		err = db.Update(ctx, func(tx *chain.Tx) error {
			_, err := ReceiveTx(tx, receipt(t, it, "WH-1", "r1", "10", "10.01"))
			return err
		})
		if !errors.Is(err, chain.ErrIdempotencyConflict) {
			t.Fatalf("conflict in tx: %v", err)
		}
		// A half-written operation retried with a different request.
		r2 := receipt(t, it, "WH-1", "r2", "5", "11.01")
		plan := planned(t, db, func(tx *chain.Tx) (Result, error) { return ReceiveTx(tx, r2) })
		if _, err := db.Append(ctx, plan[0]); err != nil {
			t.Fatal(err)
		}
		_, err = Receive(ctx, db, receipt(t, it, "WH-1", "r2", "6", "11.01"))
		if !errors.Is(err, chain.ErrIdempotencyConflict) {
			t.Fatalf("conflict with a half: %v", err)
		}
		if after := snapshot(t, db); after == before {
			t.Fatal("the half was not written")
		}
		// The same operation id at another location is another operation.
		if _, err := Receive(ctx, db, receipt(t, it, "WH-9", "r1", "3", "1.00")); err != nil {
			t.Fatal(err)
		}
	})
}

func TestConcurrentRetriesWriteOnce(t *testing.T) {
	ctx := context.Background()
	eachMethod(t, func(t *testing.T, db *chain.DB, it Item) {
		var wg sync.WaitGroup
		results := make([]Result, 32)
		errs := make([]error, 32)
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i], errs[i] = Receive(ctx, db, receipt(t, it, "WH-1", "r1", "10", "10.00"))
			}()
		}
		wg.Wait()
		for i := range results {
			if errs[i] != nil || results[i].Legs[0].ValueEntry.Seq != 1 {
				t.Fatalf("caller %d: %+v %v", i, results[i], errs[i])
			}
		}
		b, err := GetBalance(ctx, db, it.Tenant, it.ID, "WH-1")
		if err != nil || b.Quantity.String() != "10" || b.Value.String() != "100.00" {
			t.Fatalf("balance %+v %v", b, err)
		}
	})
}

func TestOperationsComposeInOneTransaction(t *testing.T) {
	ctx := context.Background()
	eachBackend(t, func(t *testing.T, db *chain.DB) {
		a, b := item(MovingAverage), item(FIFO)
		b.ID = "SKU-2"
		defineItem(t, db, a)
		defineItem(t, db, b)
		err := db.Update(ctx, func(tx *chain.Tx) error {
			if _, err := ReceiveTx(tx, receipt(t, a, "WH-1", "po-1", "10", "1.00")); err != nil {
				return err
			}
			_, err := ReceiveTx(tx, receipt(t, b, "WH-1", "po-1", "10", "2.00"))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, db)
		err = db.Update(ctx, func(tx *chain.Tx) error {
			if _, err := ReceiveTx(tx, receipt(t, a, "WH-1", "po-2", "10", "1.00")); err != nil {
				return err
			}
			_, err := IssueTx(tx, IssueRequest{Tenant: b.Tenant, Item: b.ID, Location: "WH-1", OperationID: "so-2", Quantity: dec(t, "11", 0)})
			return err
		})
		if !errors.Is(err, ErrInsufficientStock) || !errors.Is(err, chain.ErrInvalid) {
			t.Fatalf("want insufficient stock, got %v", err)
		}
		if snapshot(t, db) != before {
			t.Fatal("a failed transaction left writes behind")
		}
		mustCheck(t, db)
	})
}

func TestItemDefinitions(t *testing.T) {
	ctx := context.Background()
	eachBackend(t, func(t *testing.T, db *chain.DB) {
		it := item(MovingAverage)
		first, err := DefineItem(ctx, db, it)
		if err != nil || first.Unchanged {
			t.Fatalf("%+v %v", first, err)
		}
		same, err := DefineItem(ctx, db, it)
		if err != nil || !same.Unchanged || same.Entry.Hash != first.Entry.Hash {
			t.Fatalf("redefinition %+v %v", same, err)
		}
		if _, err := Receive(ctx, db, receipt(t, it, "WH-1", "r1", "2", "1.00")); err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, db)
		fifo := it
		fifo.Method = FIFO
		if _, err := DefineItem(ctx, db, fifo); !errors.Is(err, ErrMethodChange) || !errors.Is(err, chain.ErrInvalid) {
			t.Fatalf("method change with stock: %v", err)
		}
		scaled := it
		scaled.QuantityScale = 3
		if _, err := DefineItem(ctx, db, scaled); !errors.Is(err, ErrInvalidItem) {
			t.Fatalf("scale change: %v", err)
		}
		if snapshot(t, db) != before {
			t.Fatal("a refused definition wrote")
		}
		if _, err := Issue(ctx, db, IssueRequest{Tenant: it.Tenant, Item: it.ID, Location: "WH-1", OperationID: "i1", Quantity: dec(t, "2", 0)}); err != nil {
			t.Fatal(err)
		}
		changed, err := DefineItem(ctx, db, fifo)
		if err != nil || changed.Entry.Seq != 2 {
			t.Fatalf("method change at zero: %+v %v", changed, err)
		}
		res, err := Receive(ctx, db, receipt(t, it, "WH-1", "r2", "3", "2.00"))
		if err != nil || res.Legs[0].Value.String() != "6.00" {
			t.Fatalf("receipt after change %+v %v", res, err)
		}
		layers, err := Layers(ctx, db, it.Tenant, it.ID, "WH-1", 0)
		if err != nil || len(layers) != 1 {
			t.Fatalf("layers after the change to FIFO: %+v %v", layers, err)
		}
		other := it
		other.ID = "SKU-0"
		defineItem(t, db, other)
		list, err := Items(ctx, db, "acme", "", 0)
		if err != nil || len(list) != 2 || list[0].ID != "SKU-0" || list[1].Method != FIFO {
			t.Fatalf("items %+v %v", list, err)
		}
		if list, err := Items(ctx, db, "acme", "SKU-0", 0); err != nil || len(list) != 1 || list[0].ID != "SKU-1" {
			t.Fatalf("items after SKU-0 %+v %v", list, err)
		}
		if list, err := Items(ctx, db, "acm", "", 0); err != nil || len(list) != 0 {
			t.Fatalf("another tenant sees %+v %v", list, err)
		}
		mustCheck(t, db)
	})
}

func TestBalanceAtSeq(t *testing.T) {
	ctx := context.Background()
	eachMethod(t, func(t *testing.T, db *chain.DB, it Item) {
		for i, r := range []ReceiveRequest{receipt(t, it, "WH-1", "r1", "10", "10.00"), receipt(t, it, "WH-1", "r2", "5", "11.01")} {
			if _, err := Receive(ctx, db, r); err != nil {
				t.Fatal(i, err)
			}
		}
		if _, err := Issue(ctx, db, IssueRequest{Tenant: it.Tenant, Item: it.ID, Location: "WH-1", OperationID: "i1", Quantity: dec(t, "7", 0)}); err != nil {
			t.Fatal(err)
		}
		want := map[uint64][2]string{0: {"0", "0.00"}, 1: {"10", "100.00"}, 2: {"15", "155.05"}}
		for seq, w := range want {
			b, err := BalanceAt(ctx, db, it.Tenant, it.ID, "WH-1", seq)
			if err != nil || b.Quantity.String() != w[0] || b.Value.String() != w[1] {
				t.Fatalf("seq %d: %+v %v", seq, b, err)
			}
		}
		if _, err := BalanceAt(ctx, db, it.Tenant, it.ID, "WH-1", 9); !errors.Is(err, chain.ErrNotFound) {
			t.Fatalf("seq 9: %v", err)
		}
		now, err := GetBalance(ctx, db, it.Tenant, it.ID, "WH-1")
		if err != nil || now.QuantitySeq != 3 || now.ValueSeq != 3 {
			t.Fatalf("now %+v %v", now, err)
		}
	})
}

func TestCheckReportsTamperedState(t *testing.T) {
	ctx := context.Background()
	eachMethod(t, func(t *testing.T, db *chain.DB, it Item) {
		if _, err := Receive(ctx, db, receipt(t, it, "WH-1", "r1", "10", "10.00")); err != nil {
			t.Fatal(err)
		}
		mustCheck(t, db)
		err := db.Update(ctx, func(tx *chain.Tx) error {
			l, _ := locate(it, "WH-1", "")
			p, err := loadPosition(tx, l)
			if err != nil {
				return err
			}
			p.Value++ // one cent appears from nowhere
			return tx.StatePut(l.positionAt, encodePosition(&p))
		})
		if err != nil {
			t.Fatal(err)
		}
		if stateMismatches(t, db) == 0 {
			t.Fatal("Check misses a changed stock value")
		}
	})
}

func TestInterleavedHalvesAreRefused(t *testing.T) {
	ctx := context.Background()
	eachMethod(t, func(t *testing.T, db *chain.DB, it Item) {
		if _, err := Receive(ctx, db, receipt(t, it, "WH-1", "r1", "10", "10.00")); err != nil {
			t.Fatal(err)
		}
		a := receipt(t, it, "WH-1", "a", "1", "1.00")
		b := receipt(t, it, "WH-1", "b", "2", "2.00")
		planA := planned(t, db, func(tx *chain.Tx) (Result, error) { return ReceiveTx(tx, a) })
		if _, err := db.Append(ctx, planA[0]); err != nil { // a:qty only
			t.Fatal(err)
		}
		// b's plan completes a inside the rolled-back transaction; keep b's value half only.
		planB := planned(t, db, func(tx *chain.Tx) (Result, error) { return ReceiveTx(tx, b) })
		if _, err := db.Append(ctx, planB[1]); err != nil { // b:value lands where a:value belongs
			t.Fatal(err)
		}
		before := snapshot(t, db)
		_, err := Receive(ctx, db, receipt(t, it, "WH-1", "c", "1", "1.00"))
		var incomplete *IncompleteError
		if !errors.Is(err, ErrIncomplete) || !errors.As(err, &incomplete) || incomplete.Seq != 2 {
			t.Fatalf("interleaved halves: %v", err)
		}
		if snapshot(t, db) != before {
			t.Fatal("a refused operation wrote")
		}
		if stateMismatches(t, db) == 0 {
			t.Fatal("Check misses the interleaved halves")
		}
	})
}
