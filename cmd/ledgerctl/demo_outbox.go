package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/financial"
	"github.com/ledgerworks/ledger/inbox"
	"github.com/ledgerworks/ledger/outbox"
	"github.com/ledgerworks/ledger/outbox/signature"
)

// The outbox and inbox steps: a sale's invoice posted with the webhook
// that tells the customer's system, delivered by a worker to a receiver on
// 127.0.0.1 (which fails once), and the customer's payment webhook,
// delivered twice, recorded once.

func init() {
	registerDemoStep(70, "outbox: an invoice posted and its webhook enqueued in one transaction, delivered at least once with one key", demoOutbox)
	registerDemoStep(71, "inbox: a payment webhook verified, recorded and applied once, though delivered twice", demoInbox)
}

const (
	demoOutboxTopic  = "customer-webhooks"
	demoOutboxSecret = "whsec_ZGVtby13ZWJob29rLXNpZ25pbmcta2V5"
	demoStripeSecret = "whsec_demo_stripe_endpoint"
)

// demoQuiet is the logger of the steps' worker and handler: the steps
// narrate what they show themselves.
var demoQuiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// demoServe serves h on 127.0.0.1 until the returned stop is called.
func demoServe(h http.Handler) (url string, stop func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(l)
	return "http://" + l.Addr().String(), func() { srv.Close() }, nil
}

// demoInvoicePosting is the sale the outbox step posts.
func demoInvoicePosting() financial.Posting {
	return financial.Posting{Key: "inv-2026-0107", Date: financial.MustParseDate("2026-11-02"), Memo: "invoice INV-2026-0107",
		Reference: "INV-2026-0107", Lines: []financial.Line{
			{Account: "1200", Side: financial.Debit, Amount: eur(11900), Currency: "EUR"},
			{Account: "4000", Side: financial.Credit, Amount: eur(10000), Currency: "EUR"},
			{Account: "2300", Side: financial.Credit, Amount: eur(1900), Currency: "EUR"}}}
}

func demoOutbox(ctx context.Context, d *demoEnv) error {
	book, err := demoFinBook(d)
	if err != nil {
		return err
	}
	invoice := func() (financial.PostingResult, outbox.EnqueueResult, error) {
		var p financial.PostingResult
		var m outbox.EnqueueResult
		err := d.DB.Update(ctx, func(tx *chain.Tx) error {
			var err error
			if p, err = book.PostTx(tx, demoInvoicePosting()); err != nil {
				return err
			}
			m, err = outbox.EnqueueTx(tx, outbox.EnqueueRequest{Tenant: d.Tenant, Topic: demoOutboxTopic, IdempotencyKey: "inv-2026-0107:webhook",
				Headers: []outbox.Header{{Name: "X-Event-Type", Value: "invoice.issued"}},
				Payload: []byte(`{"type":"invoice.issued","invoice":"INV-2026-0107","total":"119.00","currency":"EUR"}`)})
			return err
		})
		return p, m, err
	}
	posting, msg, err := invoice()
	if err != nil {
		return err
	}
	d.Printf("invoice INV-2026-0107 posted at %s seq %d and message %s enqueued at %s seq %d, in one transaction\n",
		book.Journal(), posting.Seq, msg.ID, msg.Entry.Chain, msg.Entry.Seq)
	retryPosting, retryMsg, err := invoice()
	if err != nil {
		return err
	}
	d.Printf("the invoice retried: posting replayed=%t, message replayed=%t\n", retryPosting.Replayed, retryMsg.Replayed)
	d.Replayed(2)

	// The customer's system: it checks the signature, and its first answer
	// is lost (a 503), so the message is delivered twice with one key.
	key, err := signature.ParseStandardSecret(demoOutboxSecret)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	var calls []string
	delivered := make(chan struct{})
	receiver := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		err := signature.VerifyStandard([][]byte{key}, r.Header.Get("Webhook-Id"), r.Header.Get("Webhook-Timestamp"),
			r.Header.Get("Webhook-Signature"), body, time.Now(), 0)
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, fmt.Sprintf("Idempotency-Key %s, signature %s", r.Header.Get("Idempotency-Key"), map[bool]string{true: "valid", false: "INVALID"}[err == nil]))
		switch {
		case err != nil:
			http.Error(w, "bad signature", http.StatusUnauthorized)
		case len(calls) == 1:
			http.Error(w, "busy", http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusAccepted)
			io.WriteString(w, "queued")
			if len(calls) == 2 {
				close(delivered)
			}
		}
	})
	url, stop, err := demoServe(receiver)
	if err != nil {
		return err
	}
	defer stop()
	// The demo's receiver listens on loopback, which a deliverer reaches
	// only when it says so.
	deliver, err := outbox.Webhook(outbox.WebhookOptions{URL: url + "/hooks", Secret: demoOutboxSecret, Timeout: 5 * time.Second,
		AllowPrivateAddresses: true})
	if err != nil {
		return err
	}
	w, err := outbox.NewWorker(d.DB, outbox.WorkerOptions{Tenant: d.Tenant, ID: "demo-worker-1", Logger: demoQuiet,
		Topics: map[string]outbox.Topic{demoOutboxTopic: {Handler: deliver,
			// Ages count from the entries' times, which a test's ledger
			// takes from a fixed clock in the past.
			Policy: outbox.Policy{BackoffMin: 20 * time.Millisecond, BackoffMax: 40 * time.Millisecond, MaxAge: 100 * 365 * 24 * time.Hour}}}})
	if err != nil {
		return err
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	select {
	case <-delivered:
	case <-time.After(30 * time.Second):
		w.Stop(ctx)
		return errors.New("the webhook was not delivered in 30 s")
	}
	if err := w.Stop(ctx); err != nil {
		return err
	}
	d.Printf("a worker POSTed it to the customer's system on 127.0.0.1, which answered 503, then 202:\n")
	for i, c := range calls {
		d.Printf("  attempt %d: %s\n", i+1, c)
	}
	d.Printf("its delivery history, hash-chained on %s/outbox/%s/deliveries:\n", d.Tenant, demoOutboxTopic)
	for ev, err := range outbox.History(ctx, d.DB, d.Tenant, msg.ID) {
		if err != nil {
			return err
		}
		switch ev.Type {
		case outbox.TypeLease:
			d.Printf("  seq %d lease: attempt %d to %s (fencing token %d)\n", ev.Seq, ev.Attempt, ev.Worker, ev.Token)
		case outbox.TypeOutcome:
			d.Printf("  seq %d outcome: attempt %d %s: %s\n", ev.Seq, ev.Attempt, ev.Outcome, ev.Detail)
		}
	}
	return nil
}

func demoInbox(ctx context.Context, d *demoEnv) error {
	book, err := demoFinBook(d)
	if err != nil {
		return err
	}
	if _, err := book.AddAccount(ctx, financial.Account{Code: "1100", Name: "Bank", Type: financial.Asset}); err != nil {
		return err
	}
	applied := 0
	h, err := inbox.NewHandler(inbox.HandlerOptions{DB: d.DB, Tenant: d.Tenant, Provider: "stripe", Logger: demoQuiet,
		Verifier: inbox.Stripe{Secrets: []string{demoStripeSecret}},
		Apply: func(tx *chain.Tx, e inbox.Event) error {
			applied++
			_, err := book.PostTx(tx, financial.Posting{Key: "pay-" + e.ID, Date: financial.MustParseDate("2026-11-03"),
				Memo: "payment of INV-2026-0107", Reference: e.ID, Lines: []financial.Line{
					{Account: "1100", Side: financial.Debit, Amount: eur(11900), Currency: "EUR"},
					{Account: "1200", Side: financial.Credit, Amount: eur(11900), Currency: "EUR"}}})
			return err
		}})
	if err != nil {
		return err
	}
	url, stop, err := demoServe(h)
	if err != nil {
		return err
	}
	defer stop()
	body := []byte(`{"id":"evt_3PmQ2026","type":"payment_intent.succeeded","data":{"invoice":"INV-2026-0107","amount":11900}}`)
	send := func(header string) (string, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/webhooks/stripe", bytes.NewReader(body))
		req.Header.Set("Stripe-Signature", header)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		answer, _ := io.ReadAll(resp.Body)
		return fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(answer))), nil
	}
	now := time.Now()
	for _, try := range []struct{ what, header string }{
		{"delivered", signature.SignStripe([]byte(demoStripeSecret), now, body)},
		{"redelivered a minute later", signature.SignStripe([]byte(demoStripeSecret), now.Add(time.Minute), body)},
		{"forged (another secret)", signature.SignStripe([]byte("whsec_attacker"), now, body)},
	} {
		answer, err := send(try.header)
		if err != nil {
			return err
		}
		d.Printf("payment event evt_3PmQ2026 %s: %s\n", try.what, answer)
	}
	balance, err := book.Balance(ctx, "1200", "EUR")
	if err != nil {
		return err
	}
	d.Printf("recorded once on %s/inbox/stripe and posted once (Dr 1100 Bank / Cr 1200 119.00): receivables now %s EUR\n", d.Tenant, balance.Amount)
	if applied != 1 {
		return fmt.Errorf("the payment was applied %d times", applied)
	}
	return nil
}
