package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/outbox"
	"github.com/ledgerworks/ledger/stockmovement"
)

// A goods receipt and the message that tells the purchasing system about
// it, written in one transaction; the retry of the whole operation
// replays both. A worker delivers the message: the first attempt fails,
// the second succeeds, both with the same key, and the delivery chain
// records every step.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "outbox-example")
	defer os.RemoveAll(dir)
	db, err := chain.Open(filepath.Join(dir, "ledger.db"), chain.Options{})
	if err != nil {
		panic(err)
	}
	defer db.Close()
	stockmovement.DefineItem(ctx, db, "acme", stockmovement.Item{ID: "SKU-1"})
	stockmovement.DefineLocation(ctx, db, "acme", stockmovement.Location{ID: "WH-1"})

	receive := func() (outbox.EnqueueResult, error) {
		var msg outbox.EnqueueResult
		err := db.Update(ctx, func(tx *chain.Tx) error {
			if _, err := stockmovement.ReceiveTx(tx, stockmovement.ReceiveRequest{Tenant: "acme", Item: "SKU-1", Location: "WH-1",
				Quantity: decimal.MustNew(10, 0), IdempotencyKey: "grn-7"}); err != nil {
				return err
			}
			var err error
			msg, err = outbox.EnqueueTx(tx, outbox.EnqueueRequest{Tenant: "acme", Topic: "purchasing", IdempotencyKey: "grn-7",
				Payload: []byte(`{"event":"goods.received","grn":"grn-7","quantity":"10"}`)})
			return err
		})
		return msg, err
	}
	msg, err := receive()
	if err != nil {
		panic(err)
	}
	retry, _ := receive()
	fmt.Println("retry replayed the message:", retry.Replayed, retry.ID == msg.ID)

	delivered := make(chan struct{})
	attempts := 0
	handler := func(ctx context.Context, d *outbox.Delivery) error {
		attempts++
		fmt.Printf("attempt %d with key %v\n", d.Attempt, d.Message.Key == msg.Key)
		if attempts == 1 {
			return errors.New("purchasing system: 503")
		}
		d.Detail = "purchasing system: 202 accepted"
		close(delivered)
		return nil
	}
	w, _ := outbox.NewWorker(db, outbox.WorkerOptions{Tenant: "acme", Concurrency: 1, Topics: map[string]outbox.Topic{
		"purchasing": {Handler: handler, Policy: outbox.Policy{BackoffMin: 10 * time.Millisecond}}}})
	w.Start(ctx)
	<-delivered
	w.Stop(ctx)

	for ev, err := range outbox.History(ctx, db, "acme", msg.ID) {
		if err != nil {
			panic(err)
		}
		switch ev.Type {
		case outbox.TypeLease:
			fmt.Println("lease of attempt", ev.Attempt)
		case outbox.TypeOutcome:
			fmt.Println("outcome:", ev.Outcome, "-", ev.Detail)
		}
	}
	failures, _ := outbox.Check(ctx, db)
	fmt.Println("state check failures:", len(failures))
	// Output:
	// retry replayed the message: true true
	// attempt 1 with key true
	// attempt 2 with key true
	// lease of attempt 1
	// outcome: failed - purchasing system: 503
	// lease of attempt 2
	// outcome: delivered - purchasing system: 202 accepted
	// state check failures: 0
}
