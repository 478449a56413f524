package apikey

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ledgerworks/ledger/chain"
)

// refreshTimeout bounds one read of the system chain. The read serves
// every caller waiting for it, so it does not end with any one caller's
// context.
const refreshTimeout = 10 * time.Second

// AuthOptions configure an Authenticator. The zero value is ready to use.
type AuthOptions struct {
	// RevocationDelay bounds how old the keys an answer rests on may be:
	// a call that starts RevocationDelay after a key change committed (in
	// any process sharing the ledger) sees it. RevocationDelayDefault when
	// zero; RevocationDelayMin to RevocationDelayMax.
	RevocationDelay time.Duration
	// Now is the clock the delay is measured with; time.Now when nil.
	Now func() time.Time
}

// Authenticator answers for tokens from the keys of the system chain,
// which it holds in memory: an answer costs a map lookup and a digest.
//
// It reads the system chain again (one head read; the new entries, if any)
// when its keys are RevocationDelay old, and at once after a commit
// notification of NotifyChannel: from this DB's own Create and Revoke, and
// on PostgreSQL from every process's (NOTIFY). A lost notification delays
// a change by RevocationDelay at most, never longer. The entries it reads
// must link (each prev_hash the hash before, each hash its own), so an
// entry edited in the store makes Authenticate fail with ErrSystemChain
// rather than accept a forged digest.
//
// It is safe for concurrent use. Close it when done.
type Authenticator struct {
	db    *chain.DB
	delay time.Duration
	now   func() time.Time
	sub   *chain.Subscription

	mu   sync.RWMutex
	keys *keySet // applied to by refresh under mu; its records are replaced, never changed

	refreshMu sync.Mutex // one reader of the chain at a time
	// loadedNano is the start time of the last read of the chain that
	// succeeded (the keys are at least that new); failedNano and failure
	// the last that failed, answered again for RevocationDelay so that a
	// damaged store is not read on every call.
	loadedNano atomic.Int64
	failedNano atomic.Int64
	failure    atomic.Pointer[error]
	// notified is set when a commit notification arrived since the last read.
	notified atomic.Bool
}

// NewAuthenticator subscribes to key changes and reads the system chain.
func NewAuthenticator(db *chain.DB, opts AuthOptions) (*Authenticator, error) {
	if opts.RevocationDelay == 0 {
		opts.RevocationDelay = RevocationDelayDefault
	}
	if opts.RevocationDelay < RevocationDelayMin || opts.RevocationDelay > RevocationDelayMax {
		return nil, fmt.Errorf("apikey: RevocationDelay %v outside %v..%v", opts.RevocationDelay, RevocationDelayMin, RevocationDelayMax)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	a := &Authenticator{db: db, delay: opts.RevocationDelay, now: opts.Now, keys: newKeySet()}
	// Subscribe first: a change that commits during the first read is
	// then heard of.
	sub, err := db.Subscribe(context.Background(), NotifyChannel)
	if err != nil {
		return nil, err
	}
	a.sub = sub
	if err := a.refresh(context.Background()); err != nil {
		sub.Close()
		return nil, err
	}
	return a, nil
}

// Close ends the subscription. Authenticate keeps answering, with changes
// seen after RevocationDelay only.
func (a *Authenticator) Close() { a.sub.Close() }

// Authenticate returns the key of a valid token. A malformed token, an
// unknown key, a wrong secret and a revoked key are all
// ErrUnauthenticated; any other error says the keys could not be read
// (the store failed, or ErrSystemChain) and the token was not judged.
func (a *Authenticator) Authenticate(ctx context.Context, token string) (Key, error) {
	p, err := parseToken(token)
	if err != nil {
		return Key{}, fmt.Errorf("%w: %w", ErrUnauthenticated, err)
	}
	if err := a.fresh(ctx); err != nil {
		return Key{}, err
	}
	a.mu.RLock()
	r := a.keys.records[p.id]
	a.mu.RUnlock()
	digest := digestOf(p.id, p.secret[:])
	if r == nil || !r.Digest.matches(&digest) || r.Key.Revoked() {
		return Key{}, ErrUnauthenticated
	}
	k := r.Key
	k.Scopes = slices.Clone(k.Scopes) // the record is shared; the caller's copy is its own
	return k, nil
}

// KeyIDOf returns the id of the key whose token authenticates the request
// (Authorization: Bearer), and false for any other request. Given to
// ratelimit.Options.KeyID, it buckets by authenticated keys only, so a
// forged token naming another key's id cannot drain that key's bucket.
func (a *Authenticator) KeyIDOf(r *http.Request) (string, bool) {
	token, ok := BearerToken(r.Header.Get("Authorization"))
	if !ok {
		return "", false
	}
	k, err := a.Authenticate(r.Context(), token)
	if err != nil {
		return "", false
	}
	return k.ID, true
}

// fresh reads the system chain again when the keys are RevocationDelay
// old or a notification arrived; concurrent callers wait for one read.
func (a *Authenticator) fresh(ctx context.Context) error {
	select {
	case <-a.sub.C:
		a.notified.Store(true)
	default:
	}
	start := a.now().UnixNano()
	if !a.notified.Load() && start-a.loadedNano.Load() < int64(a.delay) {
		return nil
	}
	if start-a.failedNano.Load() < int64(a.delay) {
		if err := a.failure.Load(); err != nil {
			return *err
		}
	}
	a.refreshMu.Lock()
	defer a.refreshMu.Unlock()
	// A read that started after this call did is as good as its own.
	if !a.notified.Load() && a.loadedNano.Load() >= start {
		return nil
	}
	return a.refresh(ctx)
}

// refresh reads the system chain's new entries and applies them to a copy
// of the keys. Callers hold refreshMu (or own a).
func (a *Authenticator) refresh(ctx context.Context) error {
	start := a.now().UnixNano()
	a.notified.Store(false) // a commit from now on notifies again
	err := a.read(ctx)
	if err != nil {
		a.failure.Store(&err)
		a.failedNano.Store(start)
		a.notified.Store(true) // read again once the failure is old
		return err
	}
	a.failure.Store(nil)
	a.failedNano.Store(0)
	a.loadedNano.Store(start)
	return nil
}

// read reads the system chain's entries after the last one applied and
// applies them in order, under the write lock. An entry that does not link
// or fit stops the read with an error; the entries before it stay applied.
func (a *Authenticator) read(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refreshTimeout)
	defer cancel()
	a.mu.RLock()
	seq, hash := a.keys.seq, a.keys.hash
	a.mu.RUnlock()
	var entries []chain.Entry
	err := a.db.View(ctx, func(tx *chain.Tx) error {
		entries = entries[:0]
		h, err := tx.Head(SystemChain)
		if err != nil && !isNotFound(err) {
			return err
		}
		switch {
		case h.Seq == seq && h.Hash == hash:
			return nil
		case h.Seq <= seq:
			return &systemChainError{seq: h.Seq, reason: fmt.Sprintf("the head went back from seq %d, or its hash changed", seq)}
		}
		for e, err := range tx.Entries(SystemChain, seq+1) {
			if err != nil {
				return err
			}
			if e.Seq > h.Seq {
				break
			}
			entries = append(entries, e)
		}
		return nil
	})
	if err != nil || len(entries) == 0 {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range entries {
		e := &entries[i]
		if err := a.keys.link(e); err != nil {
			return err
		}
		if err := a.keys.apply(e); err != nil {
			return &systemChainError{seq: e.Seq, reason: err.Error()}
		}
		a.keys.advance(e)
	}
	return nil
}
