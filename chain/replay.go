package chain

import "fmt"

// Replay answers a retry before anything else is decided: when the chain
// already holds an entry with req's idempotency key, it returns that entry
// (Replayed) and true, or true and an *ConflictError (ErrIdempotencyConflict)
// when the entry's type or payload differ from req's. It returns false when
// the key is new or req has none. A domain package calls it before its own
// rules, so that a retry of an operation that was accepted is answered from
// its entry even when the rules would refuse it now (the stock it moved has
// gone since). It writes nothing and works in View too.
func (tx *Tx) Replay(req Request) (Result, bool, error) {
	if err := ValidateRequest(req, tx.db.opts.PayloadSizeMax); err != nil {
		return Result{}, false, err
	}
	if req.IdempotencyKey == "" {
		return Result{}, false, nil
	}
	return tx.replay(req)
}

// notFoundError is ErrNotFound for one chain, key or state key, formatted
// only when its message is read: a miss is the common answer of StateGet,
// Lookup and Head in domain code, which tests it with errors.Is and rarely
// prints it.
type notFoundError struct {
	kind  notFoundKind
	chain string
	key   string
}

type notFoundKind uint8

const (
	notFoundChain notFoundKind = iota + 1
	notFoundKey
	notFoundState
)

func (e *notFoundError) Error() string {
	switch e.kind {
	case notFoundChain:
		return fmt.Sprintf("chain %q: %v", e.chain, ErrNotFound)
	case notFoundKey:
		return fmt.Sprintf("chain %q key %q: %v", e.chain, e.key, ErrNotFound)
	default:
		return fmt.Sprintf("state %q: %v", e.key, ErrNotFound)
	}
}

// Unwrap makes errors.Is(err, ErrNotFound) true.
func (e *notFoundError) Unwrap() error { return ErrNotFound }
