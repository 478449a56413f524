// Package idempotency is the HTTP replay guard: the second of the four
// layers that make a request exactly once (the client's key per intent, this
// guard, the ledger's UNIQUE(chain, key), the outbox). A handler behind it
// runs once per (operation, user, key), and every retry gets the first
// response back, byte for byte.
//
// # Basics
//
// A Guard wraps a route (func(http.Handler) http.Handler). Options.Store
// keeps the records and Options.User names the authenticated user; New
// refuses to build a guard without either, because keys are scoped to
// (operation, user, key) and there is no anonymous key space. The operation
// is the route pattern (r.Pattern) unless Options.Operation names it
// (carry the tenant there, e.g. "acme:payments:create").
//
//	store, _ := idempotency.NewLedgerStore(db) // records in the ledger file
//	guard, err := idempotency.New(idempotency.Options{Store: store, User: userOf, RequireKey: true})
//	mux.Handle("POST /payments", guard.Middleware(payments))
//
// A request carries its key in Idempotency-Key, bare or as an IETF
// structured-field string ("…"). Its request hash covers the operation and
// the request's defining fields (Options.RequestFields; the whole body,
// canonicalised when it is JSON, by default). Then:
//
//   - a new scope: the handler runs; its response is stored when it succeeds;
//   - a retry with the same hash after the handler finished: the stored
//     response, with Idempotent-Replayed: true; the handler does not run;
//   - the same key with another hash: 409 KEY_REUSED_WITH_DIFFERENT_REQUEST,
//     checked before anything else;
//   - a retry while the first attempt runs: 409 REQUEST_IN_PROGRESS with
//     Retry-After, the seconds left of its lease (which a running attempt
//     extends every HeartbeatInterval);
//   - a retry after the first attempt's lease ended (its process died): the
//     dead attempt is released as a transient failure and the retry runs;
//   - after a permanent failure (Options.IsPermanentError): 409
//     REQUEST_FAILED on every retry; after an outage (Options.IsOutage) the
//     key is freed without counting; after a transient failure (a 5xx, 408
//     or 429, or Context.Fail) the key is released and the retry runs again,
//     until MaxRetries transient failures poison it;
//   - the store does not answer: 503 STORE_UNAVAILABLE; the handler does not
//     run.
//
// Refusals are *Error values with a Code, written as application/problem+json
// (RFC 9457) with the status StatusMap gives the code (a route may map
// KEY_REUSED_WITH_DIFFERENT_REQUEST to 422 or REQUEST_IN_PROGRESS to 425).
//
// The handler reaches the request's Context with FromContext. A handler
// that appends ledger entries uses Context.Update (or Context.SucceedTx
// inside its own chain.DB.Update) so that its entries and its SUCCESS
// record commit in one transaction, and keys its entries with
// Context.LedgerKey, so that a retry whose guard record was lost is still
// written once by the ledger.
//
// Stores: LedgerStore (the embedded ledger's file, through its group
// commit), pgstore.Store (PostgreSQL, for instances on several machines),
// MemoryStore (tests only). The conformance suite in idempotencytest runs
// against each. Jobs recovers attempts whose lease ended and purges
// expired records; Jobs.Run does both on a schedule.
//
// # Caveats
//
// A response is stored only when it is buffered whole: a handler that
// flushes, hijacks the connection or writes more than ResponseSizeMax is
// answered as it wrote, and its attempt is released as a transient failure
// (so a retry runs the handler again, at most MaxRetries times).
//
// The request hash must not cover what changes between retries of one
// intent — a timestamp, a trace id, a signature over them — or every retry
// is a conflict; RequestFields selects the fields that define the request.
// JSON numbers are compared as written: 1.0 and 1 are different requests.
//
// LedgerStore keeps PROCESSING leases in the memory of the process that
// holds the ledger file (it is the only writer of the file), and writes
// finished records and retry counts durably. A process that dies loses its
// leases, which frees their keys at once; the death does not count toward
// MaxRetries, and the re-run handler's ledger entries are kept once by the
// ledger's UNIQUE(chain, key). The PostgreSQL store writes PROCESSING rows
// without waiting for their WAL flush, for the same reason. LedgerStore
// rules new keys out with an in-memory filter of the stored scopes, which
// NewLedgerStore builds by reading every record's key once (16 bits a
// scope), which grows by layers as it fills, and which is rebuilt after
// cleanup.
//
// A cached record keeps, beside the response, the raw body of the retry
// that matched it (up to 4 KiB; the hash of a longer one), so that a retry
// sending the same bytes is answered without its body being canonicalised:
// size an LRU for both. The guard sends the response a handler hands to
// WriteResponse after the handler returns: the handler must not change it
// afterwards.
//
// Exactly once holds within one store. Effects outside it (an email, a card
// capture) are exactly once only where their receiver deduplicates on the
// key it is given: send them through the outbox.
package idempotency
