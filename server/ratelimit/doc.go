// Package ratelimit limits requests with token buckets per API key id and
// per client address (golang.org/x/time/rate), as the first guard of the
// server: rate limit, API key, idempotency, handler.
//
// # Basics
//
//	l, err := ratelimit.New(ratelimit.Options{
//		PerKey: 200, KeyBurst: 400, // each key: 200 requests a second, bursts of 400
//		PerAddr: 50, AddrBurst: 100, // each client address
//	})
//	handler = l.Middleware(apikey.Middleware(auth)(handler))
//
// A request spends one token of its address's bucket and, when it names a
// key (Options.KeyID), one of its key's bucket. When either bucket is
// empty it is refused with 429 RATE_LIMITED (problem+json) and Retry-After,
// the seconds (rounded up) until a token is due, and spends nothing. The
// two limits are independent: a key used from many addresses is held to
// its own rate, and many keys from one address to the address's.
//
// # Caveats
//
// Buckets are in memory, per process, unless Options.Store holds them:
// without one, N servers behind a balancer allow N times the rate; with
// pgbuckets, the instances on one PostgreSQL share each bucket (one
// statement a request and limit). A Store that fails leaves the request
// to this process's bucket: a limit never answers 500 or 503. A Limiter keeps at most MaxTracked limiters of each kind
// and drops the least recently used first; a dropped one comes back with a
// full bucket, so a client with more than MaxTracked addresses in use at
// once is not held to the address rate. IPv6 clients are bucketed by /64.
//
// The default KeyID reads the key id of the Bearer token without checking
// the token (authentication runs after the limiter), so a client that
// knows a key's id can spend that key's tokens with forged tokens; give
// apikey.Authenticator.KeyIDOf as KeyID to count authenticated keys only
// (an answer from memory). Behind a proxy, set Options.Addr.
package ratelimit
