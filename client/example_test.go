package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/client"
)

// An ERP records a goods receipt once, however often it has to send it:
// the key is stored with the receipt's intent, so that even a restart of
// the ERP sends the same one.
func Example() {
	c, err := client.New(client.Options{BaseURL: "http://127.0.0.1:8080", Token: os.Getenv("LEDGER_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	receiptKey := "po-4711-receipt-1" // stored with the purchase order when the goods arrived
	ev, err := c.PurchaseReceipt(ctx, api.PurchaseReceiptRequest{Item: "FLOUR-405", Location: "WH-1", Quantity: "10",
		UnitCost: "2.50", Date: "2026-11-30", InventoryAccount: "1400", CreditAccount: "2100", Reference: "PO-4711"},
		client.WithIdempotencyKey(receiptKey))
	var e *client.Error
	switch {
	case errors.As(err, &e) && e.Retryable:
		log.Printf("outcome unknown after %d attempts: send key %s again later", e.Attempts, e.Key)
	case errors.As(err, &e) && e.Code == api.CodeKeyReused:
		log.Fatalf("key %s belongs to another request: %s", e.Key, e.Detail)
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Println("received:", ev.Operation, ev.Posting.Seq, ev.Message.ID)
	}
}
