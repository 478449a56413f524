// Package client is the Go client of `ledgerctl serve`: the first of the four
// layers that make a request exactly once (this client's key per intent, the
// server's replay guard, the ledger's UNIQUE(chain, key), the outbox).
//
// # Basics
//
// New builds a Client from Options; only BaseURL is required, and every
// other zero value is documented and usable. Each typed method is one
// operation intent. A state-changing method gets one Idempotency-Key (a
// random UUID v4) and one encoded body, and sends exactly those bytes with
// exactly that key on every attempt, so the server runs the operation once
// however many attempts reach it:
//
//	c, err := client.New(client.Options{BaseURL: "http://127.0.0.1:8080", Token: token})
//	res, err := c.AppendEntry(ctx, "audit/erp-events", api.AppendEntryRequest{Type: "audit.event/v1", Payload: body})
//
// An intent that must survive the caller's own restart (an ERP job that
// records "receipt of PO 4711" and may crash before it hears the answer)
// brings its own key, stored beside the intent, and sends it again after
// the restart with the same request:
//
//	res, err := c.PurchaseReceipt(ctx, req, client.WithIdempotencyKey("po-4711-receipt-1"))
//
// Attempts are retried after a network error (the outcome is unknown, and
// the key makes the retry safe), 409 REQUEST_IN_PROGRESS, 429, 502, 503 and
// 504, with exponential backoff and full jitter, never sooner than the
// response's Retry-After, and at most Options.MaxAttempts times or until the
// context's deadline; a REQUEST_IN_PROGRESS answer with a Retry-After (the
// time left of the holder's lease) is waited for beside MaxAttempts, up to
// Options.InProgressWaitMax in all. A 503 is an outage of a store: the
// server frees the key without counting it toward the key's retries.
// Nothing else is retried: a 409 for a key reused with another request, an
// idempotency conflict, every other 4xx and a 500 are answers.
//
// Every failure of a call is an *Error (errors.As), carrying the problem's
// stable Code, the Status, the Detail, whether a later retry with the same
// key may succeed (Retryable) and the key itself. When the context ends the
// retries, the error also matches the context's error (errors.Is).
//
// # Caveats
//
// A call that returns a Retryable error has an unknown outcome: the server
// may have done the operation. Retry it later with WithIdempotencyKey and
// the key the error carries, and the same request; a new key would do the
// operation a second time.
//
// Options.MaxAttempts counts the client's attempts. Go's transport may
// resend one attempt by itself, unchanged and with its key, when a
// kept-alive connection turns out to be closed before any answer arrives;
// that resend is not counted, and it is as safe as any retry.
//
// The server keeps a key's record for its guard's TTL (a day by default),
// and the ledger's keys never expire: a retry after the guard forgot the key
// is still written once by the ledger, but its response is rebuilt rather
// than replayed byte for byte.
package client
