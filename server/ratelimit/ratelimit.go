package ratelimit

import (
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/internal/problem"
)

// Code is the problem code of a refusal.
const Code = "RATE_LIMITED"

// Options configure a Limiter. The zero value limits nothing.
type Options struct {
	// PerKey is the tokens a second of each API key id's bucket; 0 is no
	// per-key limit. KeyBurst is the bucket's size (at least 1 with a
	// limit).
	PerKey   rate.Limit
	KeyBurst int
	// PerAddr and AddrBurst are the same per client address (Addr).
	PerAddr   rate.Limit
	AddrBurst int
	// MaxTracked is how many limiters each kind (keys, addresses) keeps,
	// the least recently used dropped first; MaxTrackedDefault when 0, at
	// most MaxTrackedLimit.
	MaxTracked int
	// KeyID names a request's key; a request without one is limited by
	// address only. Default: apikey.TokenKeyID of the Bearer token, which
	// is not checked (the limiter runs before authentication), so a forged
	// token that names a key's id spends that key's tokens;
	// apikey.Authenticator.KeyIDOf counts authenticated keys only.
	KeyID func(*http.Request) (string, bool)
	// Addr names a request's client; default ClientAddr.
	Addr func(*http.Request) string
	// Now is the clock of this process's buckets; time.Now when nil. A
	// Store keeps its own (pgbuckets: the database's).
	Now func() time.Time
	// Store, when set, holds the buckets instead of this process's
	// memory, shared by every instance that uses it (pgbuckets: one
	// PostgreSQL); nil keeps them in memory (the embedded default). A
	// request whose Store call fails is limited by this process's bucket
	// instead (Stats.StoreErrors counts them): never refused for it.
	Store Store
	// StoreTimeout bounds one Store call; StoreTimeoutDefault when zero.
	StoreTimeout time.Duration
	// Logger receives the Store's failures, at most one line a second;
	// slog.Default() when nil.
	Logger *slog.Logger
}

// Limiter is token buckets per API key id and per client address. It is
// safe for concurrent use.
type Limiter struct {
	opts        Options
	keys        *lru
	addrs       *lru
	refused     atomic.Uint64
	storeErrors atomic.Uint64
	lastLog     atomic.Int64 // when a Store failure was last logged, Unix ns
}

// New checks the options and returns a Limiter.
func New(opts Options) (*Limiter, error) {
	if opts.MaxTracked == 0 {
		opts.MaxTracked = MaxTrackedDefault
	}
	if opts.MaxTracked < 1 || opts.MaxTracked > MaxTrackedLimit {
		return nil, fmt.Errorf("%w: MaxTracked %d outside 1..%d", ErrInvalidOptions, opts.MaxTracked, MaxTrackedLimit)
	}
	if err := checkBucket("PerKey", opts.PerKey, opts.KeyBurst); err != nil {
		return nil, err
	}
	if err := checkBucket("PerAddr", opts.PerAddr, opts.AddrBurst); err != nil {
		return nil, err
	}
	if opts.KeyID == nil {
		opts.KeyID = bearerKeyID
	}
	if opts.Addr == nil {
		opts.Addr = ClientAddr
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.StoreTimeout == 0 {
		opts.StoreTimeout = StoreTimeoutDefault
	}
	if opts.StoreTimeout < 0 {
		return nil, fmt.Errorf("%w: StoreTimeout %v is negative", ErrInvalidOptions, opts.StoreTimeout)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Limiter{opts: opts,
		keys:  newLRU(opts.MaxTracked, opts.PerKey, opts.KeyBurst),
		addrs: newLRU(opts.MaxTracked, opts.PerAddr, opts.AddrBurst)}, nil
}

func checkBucket(name string, limit rate.Limit, burst int) error {
	switch {
	case limit < 0 || math.IsNaN(float64(limit)) || limit == rate.Inf:
		return fmt.Errorf("%w: %s %v: want a finite rate >= 0 (0 is no limit)", ErrInvalidOptions, name, limit)
	case limit > 0 && (burst < 1 || burst > BurstMax):
		return fmt.Errorf("%w: %s burst %d outside 1..%d", ErrInvalidOptions, name, burst, BurstMax)
	}
	return nil
}

// bearerKeyID is the default KeyID.
func bearerKeyID(r *http.Request) (string, bool) {
	token, ok := apikey.BearerToken(r.Header.Get("Authorization"))
	if !ok {
		return "", false
	}
	return apikey.TokenKeyID(token)
}

// ClientAddr is the client address of a request: the host of RemoteAddr,
// an IPv6 address reduced to its /64 (one site's addresses share a bucket,
// as a host can draw many addresses of its /64). Behind a proxy every
// request comes from the proxy: set Options.Addr to read the address the
// proxy forwards, and trust it only from the proxy.
func ClientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	if addr.Is4() {
		return host // an IPv4 address parses only in its canonical form
	}
	addr = addr.Unmap()
	if addr.Is6() {
		prefix, _ := addr.WithZone("").Prefix(64)
		return prefix.String()
	}
	return addr.String()
}

// Middleware refuses a request whose address bucket or key bucket is empty
// with 429 RATE_LIMITED and Retry-After (the wait until a token is due, in
// whole seconds rounded up), spending no token of either bucket; other
// requests spend one token of each and go on to next.
func (l *Limiter) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := l.opts.Now()
		ctx := r.Context()
		var buf [2]limit
		limits := buf[:0]
		if l.opts.PerAddr > 0 {
			limits = append(limits, limit{lru: l.addrs, name: l.opts.Addr(r), rate: l.opts.PerAddr, burst: l.opts.AddrBurst, kind: bucketAddr})
		}
		if l.opts.PerKey > 0 {
			if id, ok := l.opts.KeyID(r); ok {
				limits = append(limits, limit{lru: l.keys, name: id, rate: l.opts.PerKey, burst: l.opts.KeyBurst, kind: bucketKey})
			}
		}
		if len(limits) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		l.take(ctx, now, limits)
		wait, what := time.Duration(0), ""
		for _, m := range limits {
			if !m.ok && max(m.wait, time.Nanosecond) > wait {
				wait, what = max(m.wait, time.Nanosecond), "client address"
				if m.kind == bucketKey {
					what = "API key"
				}
			}
		}
		if wait == 0 {
			next.ServeHTTP(w, r)
			return
		}
		l.undo(ctx, now, limits)
		l.refused.Add(1)
		problem.Write(w, problem.Problem{Status: http.StatusTooManyRequests, Code: Code, RetryAfter: wait,
			Detail: "the rate limit of the " + what + " is exceeded"})
	})
}

// Stats is what a Limiter holds and did.
type Stats struct {
	TrackedKeys  int    // key limiters held
	TrackedAddrs int    // address limiters held
	Refused      uint64 // requests refused since New
	StoreErrors  uint64 // Store calls that failed since New
}

// Stats returns the counts of the limiter.
func (l *Limiter) Stats() Stats {
	return Stats{TrackedKeys: l.keys.len(), TrackedAddrs: l.addrs.len(), Refused: l.refused.Load(),
		StoreErrors: l.storeErrors.Load()}
}
