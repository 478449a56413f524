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
	base  time.Time // times below are nanoseconds since base, on the monotonic clock
	sub   *chain.Subscription

	// index is what Authenticate reads: id -> *record, each record
	// replaced, never changed. keys, read and written under refreshMu
	// only, is the chain's replay that fills it.
	index     sync.Map
	refreshMu sync.Mutex // one reader of the chain at a time
	keys      *keySet
	// loadedNano is the start time of the last read of the chain that
	// succeeded (the keys are at least that new), applied the count of
	// notifications drained before it began; failedNano and failure are
	// the last read that failed, answered again for RevocationDelay so
	// that a damaged store is not read on every call.
	loadedNano atomic.Int64
	applied    atomic.Uint64
	failedNano atomic.Int64
	failure    atomic.Pointer[error]

	noteMu sync.Mutex
	notes  uint64 // notifications drained from sub.C
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
	a := &Authenticator{db: db, delay: opts.RevocationDelay, now: opts.Now, base: opts.Now(), keys: newKeySet()}
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
	var r *record
	if v, ok := a.index.Load(p.id); ok {
		r = v.(*record)
	}
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

// generation drains the subscription and returns how many notifications
// have arrived. Draining and counting are one step under noteMu, so a
// caller that returns from Create or Revoke (whose notification was sent
// before it returned) and then calls generation sees it counted, whichever
// goroutine drained it.
func (a *Authenticator) generation() uint64 {
	a.noteMu.Lock()
	defer a.noteMu.Unlock()
	select {
	case <-a.sub.C:
		a.notes++
	default:
	}
	return a.notes
}

// elapsed is the time since the Authenticator was made, in nanoseconds:
// monotonic with time.Now, so a step of the wall clock does not stretch
// the delay.
func (a *Authenticator) elapsed() int64 { return int64(a.now().Sub(a.base)) }

// fresh reads the system chain again when the keys are RevocationDelay
// old or a notification arrived since the last read began; concurrent
// callers wait for one read.
func (a *Authenticator) fresh(ctx context.Context) error {
	notes := a.generation()
	start := a.elapsed()
	current := func() bool {
		return a.applied.Load() >= notes && start-a.loadedNano.Load() < int64(a.delay)
	}
	if current() {
		return nil
	}
	if start-a.failedNano.Load() < int64(a.delay) {
		if err := a.failure.Load(); err != nil {
			return *err
		}
	}
	a.refreshMu.Lock()
	defer a.refreshMu.Unlock()
	if current() { // another caller's read, begun after this call's notifications, is as good
		return nil
	}
	return a.refresh(ctx)
}

// refresh reads the system chain's new entries and applies them. Callers
// hold refreshMu (or own a).
func (a *Authenticator) refresh(ctx context.Context) error {
	notes := a.generation() // the read below sees every commit these announced
	start := a.elapsed()
	if err := a.read(ctx); err != nil {
		a.failure.Store(&err)
		a.failedNano.Store(start)
		return err
	}
	a.failure.Store(nil)
	a.applied.Store(notes)
	a.loadedNano.Store(start)
	return nil
}

// readBatchMax bounds the entries one read holds in memory before they
// are applied: a first read of a long system chain goes in batches. A
// variable only so that a test can make batches small.
var readBatchMax = 4096

// read reads the system chain's entries after the last one applied, in
// batches, and applies them in order. An entry that
// does not link or fit stops the read with an error; the entries before it
// stay applied. The read ends at the head its first batch saw.
func (a *Authenticator) read(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refreshTimeout)
	defer cancel()
	var target uint64 // the head's seq when the read began
	for {
		entries, head, err := a.readBatch(ctx, a.keys.seq, a.keys.hash, target)
		if err != nil || len(entries) == 0 {
			return err
		}
		if target == 0 {
			target = head
		}
		if err := a.apply(entries); err != nil {
			return err
		}
		if entries[len(entries)-1].Seq >= target {
			return nil
		}
	}
}

// readBatch reads up to readBatchMax entries after seq (whose hash is
// hash), up to the head's seq or to target when it is set, and returns
// them with the head's seq.
func (a *Authenticator) readBatch(ctx context.Context, seq uint64, hash chain.Hash, target uint64) ([]chain.Entry, uint64, error) {
	var entries []chain.Entry
	var headSeq uint64
	err := a.db.View(ctx, func(tx *chain.Tx) error {
		entries = entries[:0]
		h, err := tx.Head(SystemChain)
		if err != nil && !isNotFound(err) {
			return err
		}
		headSeq = h.Seq
		switch {
		case h.Seq == seq && h.Hash == hash:
			return nil
		case h.Seq <= seq:
			return &systemChainError{seq: h.Seq, reason: fmt.Sprintf("the head went back from seq %d, or its hash changed", seq)}
		}
		last := h.Seq
		if target != 0 {
			last = min(last, target)
		}
		for e, err := range tx.Entries(SystemChain, seq+1) {
			if err != nil {
				return err
			}
			if e.Seq > last || len(entries) == readBatchMax {
				break
			}
			entries = append(entries, e)
		}
		return nil
	})
	return entries, headSeq, err
}

// apply applies entries read after the last one applied and publishes
// the records they make.
func (a *Authenticator) apply(entries []chain.Entry) error {
	for i := range entries {
		e := &entries[i]
		if err := a.keys.link(e); err != nil {
			return err
		}
		r, err := a.keys.apply(e)
		if err != nil {
			return &systemChainError{seq: e.Seq, reason: err.Error()}
		}
		a.keys.advance(e)
		a.index.Store(r.Key.ID, r)
	}
	return nil
}
