package outbox_test

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/outbox"
	"github.com/ledgerworks/ledger/outbox/outboxprom"
)

// sendInvoice is a Handler: nil when the message was delivered,
// outbox.Permanent(err) when it never can be (it is dead-lettered at once),
// any other error to have it retried after a backoff. The receiver dedupes
// on d.Message.Key, the same on every attempt.
func sendInvoice(ctx context.Context, d *outbox.Delivery) error {
	if len(d.Message.Payload) == 0 {
		return outbox.Permanent(fmt.Errorf("message %s has no invoice", d.Message.ID))
	}
	d.Detail = "mail server: 250 queued" // recorded with the outcome
	return nil
}

// The worker of docs/OUTBOX.md, "Running workers", as the page shows it:
// this example is compiled by go vet and go test, so the page's code keeps
// compiling.
func ExampleNewWorker() {
	ctx := context.Background()
	db, err := chain.Open("ledger.db", chain.Options{})
	if err != nil {
		panic(err)
	}
	defer db.Close()

	webhook, err := outbox.Webhook(outbox.WebhookOptions{URL: "https://partner.example/hooks", Secret: "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="})
	if err != nil {
		panic(err) // a URL or secret it refuses
	}
	w, err := outbox.NewWorker(db, outbox.WorkerOptions{
		Tenant: "acme",
		Topics: map[string]outbox.Topic{
			"invoice-email": {Handler: sendInvoice, Policy: outbox.Policy{MaxAttempts: 10, MaxAge: 24 * time.Hour}},
			"partner-hooks": {Handler: webhook},
		},
		Metrics: outboxprom.New(prometheus.DefaultRegisterer).Tenant("acme"),
	})
	if err != nil {
		panic(err)
	}
	if err := w.Start(ctx); err != nil {
		panic(err)
	}
	// … the application runs; at shutdown:
	if err := w.Stop(ctx); err != nil { // finishes the running handlers and records their outcomes
		panic(err)
	}
}
