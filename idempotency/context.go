package idempotency

import (
	"context"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/zeebo/blake3"
)

// Outcome says how the guard ended a request; logs and metrics carry it.
type Outcome string

// The outcomes.
const (
	OutcomeExecuted         Outcome = "executed"          // handler ran, response stored
	OutcomeReplayed         Outcome = "replayed"          // stored response written back
	OutcomeConflict         Outcome = "conflict"          // key reused with another request
	OutcomeInProgress       Outcome = "in_progress"       // another attempt holds the key
	OutcomeRejected         Outcome = "rejected"          // key poisoned earlier
	OutcomeFailedPermanent  Outcome = "failed_permanent"  // handler failed, key poisoned now
	OutcomeFailedTransient  Outcome = "failed_transient"  // handler failed, key released
	OutcomePoisoned         Outcome = "poisoned"          // transient failure reached MaxRetries
	OutcomeNotStored        Outcome = "not_stored"        // flushed, hijacked or too large: released
	OutcomeUnavailable      Outcome = "unavailable"       // an outage (Options.IsOutage): released, not counted
	OutcomeStoreUnavailable Outcome = "store_unavailable" // store failed; handler did not run
	OutcomeStoreError       Outcome = "store_error"       // handler ran; its record could not be written
	OutcomeBadRequest       Outcome = "bad_request"       // key missing or malformed, body unreadable
	OutcomeUnauthenticated  Outcome = "unauthenticated"   // no user
	OutcomeUnguarded        Outcome = "unguarded"         // no key on a route that does not require one
)

// Context is the guard's view of one request, reachable from the handler
// (FromContext) and passed to Options.OnResponse once the outcome is known.
type Context struct {
	Scope
	// RequestHash is the hash of the request's defining fields.
	RequestHash [32]byte
	// Attempt is the attempt number of this execution (1 unless earlier
	// attempts failed transiently); 0 when the handler did not run.
	Attempt int
	// Outcome is set when the guard has decided (in OnResponse).
	Outcome Outcome
	// Status is the response's status, set with Outcome.
	Status int
	// Replayed is set when the response came from the store.
	Replayed bool

	guard *Guard
	token string
	// body is the raw body (with a cache and the default request fields),
	// kept with a record the guard caches.
	body    []byte
	bodyBuf *bodyBuffer // the buffer body was read into
	run     *attempt    // when the handler runs

	mu        sync.Mutex
	err       error
	txPending bool // SucceedTx wrote the record into a ledger transaction
	committed bool // Update committed the record
}

// attempt is what a request whose handler runs needs beyond its Context,
// made only then, so that a replay's or a refusal's Context stays small.
type attempt struct {
	req  *http.Request // the request, for the heartbeat's log lines
	ctx  guardContext  // the handler's request context
	body bodyReader    // the request's body, read by the guard
	cw   captureWriter
	// final and resp are Update's: the lease's record, made the SUCCESS
	// record, and the response.
	final Record
	resp  Response
}

type contextKey struct{}

// FromContext returns the guard's Context of a request, or nil when the
// request was not guarded.
func FromContext(ctx context.Context) *Context {
	c, _ := ctx.Value(contextKey{}).(*Context)
	return c
}

// Fail records that the handler failed with err. The guard then stores no
// response: Options.IsPermanentError decides whether the key is poisoned
// (permanent) or released for a retry (transient). A 5xx response counts
// as a failure without a call.
func (c *Context) Fail(err error) {
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
}

// SucceedTx writes the SUCCESS record of this request, with the given
// response, into the ledger transaction tx, so that the entries the
// handler appends in tx and the record commit together: there is no
// moment at which the ledger holds the effect and the guard still says
// PROCESSING. The store must be a TxStore on the same chain.DB as tx
// (LedgerStore); otherwise it returns ErrTxUnsupported.
//
// The handler then writes the same response. If tx rolls back, nothing is
// recorded and the guard ends the request as it would without the call. fn
// of chain.DB.Update may run more than once; every run calls SucceedTx
// again, and the committed run's response is the one stored.
func (c *Context) SucceedTx(tx *chain.Tx, status int, header http.Header, body []byte) error {
	ts, ok := c.guard.store.(TxStore)
	if !ok {
		return ErrTxUnsupported
	}
	if status >= 500 {
		return &Error{Code: CodeRequestFailed, Detail: "a 5xx response is never stored as a success"}
	}
	resp := Response{Status: status, Header: c.guard.replayHeaders(header), Body: body}
	now := c.guard.now()
	if err := ts.SucceedTx(tx, c.Scope, c.token, resp, now.Add(c.guard.opts.TTL), now); err != nil {
		return err
	}
	c.mu.Lock()
	c.txPending = true
	c.mu.Unlock()
	return nil
}

// Update runs fn in a write transaction of the ledger store's chain.DB and
// commits, in the same transaction, this request's SUCCESS record with the
// response fn returns: the entries fn appends and the record are durable
// together, in one commit shared with concurrent requests (group commit).
// It returns the response, which the handler then writes (WriteResponse).
// When fn or the commit fails nothing is recorded, and the request ends as
// it would without the call. fn may run more than once (see chain.DB.Update).
// The store must be a LedgerTxStore with a ledger (LedgerStore, or
// idempotency/pgstore opened with Options.Ledger); otherwise Update returns
// ErrTxUnsupported without running fn.
func (c *Context) Update(ctx context.Context, fn func(tx *chain.Tx) (Response, error)) (Response, error) {
	ls, ok := c.guard.store.(*LedgerStore)
	if !ok {
		return c.updateTx(ctx, fn)
	}
	g := c.guard
	// The lease is checked and marked committing before the transaction,
	// so that the committer, which runs fn for every request of its group
	// one after the other, only encodes and writes the record.
	began := g.now()
	rec, err := ls.begin(c.Scope, c.token, began)
	if err != nil {
		return Response{}, err
	}
	// The record and the response live in the attempt: the function
	// below, called by the committer, is the request's only allocation
	// here. Each run of it makes the same fields of the record anew.
	a := c.run
	a.final = rec
	err = ls.db.Update(ctx, func(tx *chain.Tx) error {
		resp, err := fn(tx)
		if err != nil {
			return err
		}
		if resp.Status >= 500 {
			return &Error{Code: CodeRequestFailed, Detail: "a 5xx response is never stored as a success"}
		}
		resp.Header = g.replayHeaders(resp.Header)
		a.resp = resp
		final := &a.final // finished when the commit began
		final.Status, final.Response, final.ExpiresAt, final.UpdatedAt = StatusSuccess, &a.resp, began.Add(g.opts.TTL), began
		return putFinal(tx, final)
	})
	// Before the lease that hides the record is dropped. A failed commit
	// may have written it all the same (its outcome unknown): the scope
	// is noted then too, so that a retry reads the record and replays it.
	ls.noteDurable(c.Scope)
	ls.end(c.Scope, c.token, err == nil)
	if err != nil {
		return Response{}, err
	}
	resp := a.resp
	c.mu.Lock()
	c.committed = true
	c.mu.Unlock()
	return resp, nil
}

// updateTx is Update on a LedgerTxStore other than LedgerStore
// (idempotency/pgstore with its ledger): fn and the store's SucceedTx run
// in one transaction of the store's ledger.
func (c *Context) updateTx(ctx context.Context, fn func(tx *chain.Tx) (Response, error)) (Response, error) {
	lts, ok := c.guard.store.(LedgerTxStore)
	if !ok || lts.LedgerDB() == nil {
		return Response{}, ErrTxUnsupported
	}
	g := c.guard
	began := g.now()
	a := c.run // the response lives in the attempt: the function is the only allocation here
	err := lts.LedgerDB().Update(ctx, func(tx *chain.Tx) error {
		resp, err := fn(tx)
		if err != nil {
			return err
		}
		if resp.Status >= 500 {
			return &Error{Code: CodeRequestFailed, Detail: "a 5xx response is never stored as a success"}
		}
		resp.Header = g.replayHeaders(resp.Header)
		a.resp = resp
		return lts.SucceedTx(tx, c.Scope, c.token, resp, began.Add(g.opts.TTL), began)
	})
	if err != nil {
		return Response{}, err
	}
	resp := a.resp
	c.mu.Lock()
	c.committed = true
	c.mu.Unlock()
	return resp, nil
}

// WriteResponse writes resp to w: what a handler that used Context.Update
// sends back.
// The guard sends a response written to its writer after the handler
// returns: resp's header and body must not change after the call.
func WriteResponse(w http.ResponseWriter, resp Response) {
	if cw, ok := w.(*captureWriter); ok && cw.take(&resp) {
		return
	}
	writeResponse(w, &resp, false)
}

// TxStore is a Store that can write a SUCCESS record inside a ledger
// transaction (Context.SucceedTx).
type TxStore interface {
	Store
	// SucceedTx writes, in tx, the SUCCESS record of the attempt holding
	// token. ErrLeaseLost when the attempt no longer holds the record.
	SucceedTx(tx *chain.Tx, scope Scope, token string, resp Response, expiresAt, now time.Time) error
	// Committed reports whether a SUCCESS record written by SucceedTx for
	// token has committed, and if so finishes the attempt in the store.
	Committed(ctx context.Context, scope Scope, token string) (bool, error)
}

// LedgerTxStore is a TxStore bound to the chain.DB in whose transactions
// it writes (idempotency/pgstore with Options.Ledger), so that
// Context.Update can open the transaction itself. LedgerStore is one too.
type LedgerTxStore interface {
	TxStore
	// LedgerDB is the ledger; nil when the store has none.
	LedgerDB() *chain.DB
}

// LedgerKey returns a ledger idempotency key for this request: prefix
// followed by 32 hex digits of a hash of the scope (operation, user, key).
// Every retry of the request derives the same key, so the ledger's
// UNIQUE(chain, key) writes the handler's entry once even when the guard's
// record of an earlier attempt was lost.
func (c *Context) LedgerKey(prefix string) string { return ScopeLedgerKey(prefix, c.Scope) }

// ScopeLedgerKey is Context.LedgerKey of a scope.
func ScopeLedgerKey(prefix string, s Scope) string {
	var in [len(ledgerKeyDomain) + OperationSizeMax + UserSizeMax + KeySizeMax + 2]byte
	sum := blake3.Sum256(scopeBytes(append(in[:0], ledgerKeyDomain...), s))
	var digits [32]byte
	hex.Encode(digits[:], sum[:16])
	var b strings.Builder
	b.Grow(len(prefix) + len(digits))
	b.WriteString(prefix)
	b.Write(digits[:])
	return b.String()
}

// ledgerKeyDomain separates ScopeLedgerKey's hash from every other hash.
const ledgerKeyDomain = "idempotency/ledger-key/v1\x00"
