package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/chain/chaintest"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/outbox"
	"github.com/ledgerworks/ledger/stockmovement"
)

// The purchase receipt (stock, valuation, journal) and its message in one
// transaction: a retry replays all of it, and a business event that fails
// leaves no message behind.
func TestEnqueueInComposedBusinessEvent(t *testing.T) {
	forEachBackend(t, nil, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		book := purchaseSetup(t, db, 1)
		for range 2 {
			if err := db.Update(ctx, func(tx *chain.Tx) error { return purchaseReceipt(tx, book, "SKU-00", "po-1", true) }); err != nil {
				t.Fatal(err)
			}
		}
		refused := db.Update(ctx, func(tx *chain.Tx) error {
			if err := purchaseReceipt(tx, book, "SKU-00", "po-2", true); err != nil {
				return err
			}
			_, err := stockmovement.IssueTx(tx, stockmovement.IssueRequest{Tenant: "acme", Item: "SKU-00", Location: "WH-1",
				Quantity: decimal.MustNew(1000, 0), IdempotencyKey: "so-2"})
			return err
		})
		if !errors.Is(refused, stockmovement.ErrNegativeStock) {
			t.Fatalf("an issue beyond the stock: %v", refused)
		}
		s, err := outbox.Stats(ctx, db, "acme", "erp-events")
		if err != nil || len(s) != 1 || s[0].Enqueued != 1 || s[0].Pending != 1 {
			t.Fatalf("stats %+v %v: want the one message of po-1", s, err)
		}
		if _, err := outbox.Get(ctx, db, "acme", outbox.MessageID("acme", "erp-events", "po-2")); !outbox.IsUnknown(err) {
			t.Fatalf("the failed event's message: %v", err)
		}
		mustCheck(t, db)
	})
}

// A worker on one PostgreSQL connection pool is woken by an enqueue
// committed through another (NOTIFY/LISTEN), not by its poll.
func TestPostgresNotifyWakesAnotherProcess(t *testing.T) {
	worker, writer := chaintest.OpenShared(t)
	got := make(chan time.Time, 1)
	w, err := outbox.NewWorker(worker, outbox.WorkerOptions{Tenant: "acme", PollInterval: time.Hour,
		Topics: map[string]outbox.Topic{"hooks": {Handler: func(ctx context.Context, d *outbox.Delivery) error {
			got <- time.Now()
			return nil
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(ctx)
	time.Sleep(100 * time.Millisecond) // the worker's first claim has found nothing
	start := time.Now()
	enqueue(t, writer, outbox.EnqueueRequest{Tenant: "acme", Topic: "hooks", IdempotencyKey: "k"})
	select {
	case at := <-got:
		t.Logf("picked up %v after the enqueue began", at.Sub(start))
	case <-time.After(20 * time.Second):
		t.Fatal("the worker was not woken (its poll is an hour)")
	}
}
