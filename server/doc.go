// Package server is the ledger's HTTP API (ledgerctl serve): raw entries,
// the stock, financial and valuation domains, the composed business events,
// the outbox and the inbox, behind every layer of the exactly-once story.
//
// # Basics
//
// New builds a Server over an open ledger; Handler serves it; Start and
// Stop run its background work (outbox webhook deliverers, the replay
// guard's jobs); Serve does all of it on a listener with a graceful
// shutdown:
//
//	srv, err := server.New(server.Options{DB: db})
//	err = srv.Serve(ctx, srv.HTTPServer(server.Timeouts{}), ln, 30*time.Second, nil)
//
// Every route is one entry of the route table (Routes), from which the mux,
// each route's guard stack and the OpenAPI 3.1 document (/openapi.json) are
// built. A route's stack, outermost first: the rate limit (per API key id
// and per client address), the API key (Authorization: Bearer), the
// route's scope (read, write, admin), the replay guard on state-changing
// routes (Idempotency-Key required; the guard's user is the key's tenant
// and id, its operation the method and path), the handler. Outside the
// routes: the request id (X-Request-Id, echoed or made), the access log
// (slog), the HTTP metrics and the body limit (413 PAYLOAD_TOO_LARGE).
// The metrics are served by MetricsHandler, on a listener of its own, not
// by Handler: they name every tenant's outbox topics.
//
// The tenant comes from the API key: every chain name of the API is
// relative to it, so one tenant can never name, read, write or replay
// another's data. A write derives the ledger keys of all it writes from
// the request's guard scope (Context.LedgerKey), so a retry whose guard
// record was lost is still written once by the ledger's UNIQUE(chain,
// key); the guard's SUCCESS record commits in the write's own transaction
// (idempotency.Context.Update) with the embedded store and with a pgstore
// bound to the ledger (pgstore.Options.Ledger).
//
// Refusals are application/problem+json (internal/problem) with the codes
// of the api package; the engine's and the domain packages' errors are
// classified by internal/errcode, as the command line classifies them.
//
// # Caveats
//
// ReleaseOrphans (outbox leases released at Start) is right only when the
// server is the ledger's only writer, as on the embedded default; the
// guard's PROCESSING leases of the embedded store live in memory and never
// outlive a process. Instances sharing PostgreSQL keep both: their leases
// (IdempotencyLease, 10 s, extended by a heartbeat while a request runs)
// end, a retry takes the key over at once, and the jobs recover the rest
// every JobsInterval (2 s).
//
// A failure of a store (storage.ErrRetry, storage.ErrIO: a lock timeout, a
// terminated session, a lost connection, a commit whose outcome is unknown,
// a full disk) is answered 503 with Retry-After, and the guard frees the
// key without counting it toward its retries (idempotency.Options.IsOutage).
// Any other failure is a 500, which counts.
//
// POST /v1/apikeys is replayed, token included, for KeyReplayTTL only: the
// guard's record of it holds the token until then.
package server
