// Package apikey holds the API keys of a ledger served over HTTP: each key
// belongs to one tenant and carries scopes (read, write, admin). Keys are
// created and revoked by entries on a hash-chained system chain, so
// `ledgerctl verify` finds an entry that was altered, inserted or removed; an
// Authenticator answers for tokens from memory, and Middleware puts the
// authenticated key in each request's context.
//
// # Basics
//
// Create records a key and returns its token, once:
//
//	key, token, err := apikey.Create(ctx, db, apikey.CreateRequest{
//		Tenant: "acme", Name: "erp-sync", Scopes: []apikey.Scope{apikey.ScopeRead, apikey.ScopeWrite},
//	})
//
// A token is "lwk_<id>_<secret>": the key id (KeyIDLength hex digits) and
// SecretSize random bytes in unpadded base64url, TokenLength characters in
// all. The ledger stores only a digest of the secret (Digest), so a lost
// token cannot be recovered; revoke it and create another. TokenKeyID
// reads the id of a token without any lookup, for the rate limiter.
//
// An Authenticator holds every key in memory and answers a token with a
// map lookup, a BLAKE3 digest and a constant-time comparison:
//
//	auth, err := apikey.NewAuthenticator(db, apikey.AuthOptions{})
//	defer auth.Close()
//	handler = apikey.Middleware(auth)(handler)
//	// in a handler:
//	key, _ := apikey.FromContext(r.Context())
//	if !key.Has(apikey.ScopeWrite) { /* 403 */ }
//
// Middleware refuses a request without a valid "Authorization: Bearer"
// token with 401 UNAUTHENTICATED (problem+json, WWW-Authenticate: Bearer),
// and with 503 STORE_UNAVAILABLE when the keys cannot be read. Scopes are
// explicit: admin implies neither write nor read. Revoke records a
// revocation; List and Get read the keys' records.
//
// Every creation and revocation is an entry of SystemChain
// ("_system/apikey"), types TypeCreate and TypeRevoke, with idempotency
// keys "create:<id>" and "revoke:<id>". Tenants beginning with
// ReservedPrefix are refused, so a server that names every chain of a
// request "<key's tenant>/…" can never reach the system chain. The
// records, a per-tenant index and a count are derived state under
// "apikey/", written in the same transactions; Check compares it with the
// chain, Rebuild rewrites it (`ledgerctl verify`, `ledgerctl
// rebuild-state`).
//
// # Caveats
//
// A revocation or creation made through this DB is seen by its
// Authenticators at their next call (a commit notification). One made by
// another process sharing a PostgreSQL ledger is seen at once when the
// NOTIFY arrives, and within AuthOptions.RevocationDelay (one second by
// default) when it does not: an Authenticator reads the chain again once
// its keys are that old, before answering. On the embedded bbolt file one
// process holds the ledger, so there is no other process to hear from.
//
// The Authenticator answers from the chain's entries, not from the derived
// state, and checks that they link; an entry edited in the store makes it
// refuse every token (ErrSystemChain) instead of trusting the edit. It
// reads each entry once: an entry edited after a running Authenticator
// read it is found by the next one (a restart) and by verify. As for any
// chain, entries cut from the end (a revocation undone) or a chain
// rewritten whole are caught only against a saved head or a signed
// checkpoint (`ledgerctl verify --expect-head`, docs/PROOFS.md); a running
// Authenticator refuses a head that went back.
//
// A call that finds the keys stale waits for the read (at most ten seconds
// on a store that does not answer, then an error); a read that failed is
// answered again, without reading, for RevocationDelay.
//
// The secret is 256 random bits, so its digest is a fast hash, not a
// password hash: there is nothing to guess. The digests are readable by
// whoever reads the ledger; they do not give the tokens.
//
// Keys do not expire; revoke them. The ledger holds at most KeysMax keys.
// See docs/APIKEYS.md.
package apikey
