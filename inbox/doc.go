// Package inbox records incoming webhooks once per provider event, in the
// same transaction as their effects: the mirror image of the outbox.
//
// # Basics
//
// ReceiveTx records (provider, event id, body digest) as an entry of the
// chain tenant/inbox/<provider>, type inbox.event/v1, keyed by the event
// id: the engine's UNIQUE(chain, key) makes a redelivery a replay, which
// ReceiveTx reports as Receipt.Duplicate without writing. The caller applies
// the event's effects in the same chain.Tx only when it is new, so effects
// and receipt commit together or not at all, and a provider's retries
// (Stripe retries for days) never apply an event twice:
//
//	err := db.Update(ctx, func(tx *chain.Tx) error {
//		rec, err := inbox.ReceiveTx(tx, inbox.ReceiveRequest{Tenant: "acme", Provider: "stripe", EventID: id, Body: body})
//		if err != nil || rec.Duplicate {
//			return err
//		}
//		return markInvoicePaid(tx, body) // e.g. a financial.Book.PostTx
//	})
//
// NewHandler does this for a net/http endpoint: it reads the raw body,
// verifies its signature first (Stripe, StandardWebhooks or GitHub, see
// package signature; 401 and nothing recorded when refused), then records
// and applies in one transaction and answers 200, also to a duplicate.
//
// # Caveats
//
// Receipts are kept for good: the chain keeps every key anyway, and a
// provider may redeliver an event months later. The body itself is not
// stored, only its BLAKE3 digest and size; keep the body in the effects
// (or elsewhere) when it must be shown later. The same event id with a
// different body is refused (ErrBodyMismatch, 409): providers resend
// events byte for byte. Exactly-once holds for effects written through
// the same chain.DB; an effect outside it (an email) belongs in the outbox,
// enqueued in the same transaction.
package inbox
