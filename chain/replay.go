package chain

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/ledgerworks/ledger/storage"
)

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

// replay looks the request's key up. found is false when the key is new.
func (tx *Tx) replay(req Request) (res Result, found bool, err error) {
	seq, data, found, err := tx.lookupRecord(req.Chain, req.IdempotencyKey)
	if err != nil || !found {
		return Result{}, false, err
	}
	return replayRecord(req, seq, data, false)
}

// replayRecord answers req from the stored bytes of the entry the index
// maps its key to: its entry (Replayed), or found and an *ConflictError
// when the entry's type or payload differ from req's, or an error wrapping
// ErrCorrupt when the entry does not hold the key. owned tells that data
// is the caller's copy, which the entry's payload may then share instead
// of copying it again; otherwise data is the store's.
func replayRecord(req Request, seq uint64, data []byte, owned bool) (res Result, found bool, err error) {
	// A retry, the common case, stores exactly the request's key, type and
	// payload: compared in the stored bytes, and when equal the entry takes
	// the request's key and type (valid text, as ValidateRequest found) and
	// the payload, instead of decoding, validating and copying all three.
	// decodeFields accepts exactly the records DecodeRecord does.
	if f, ok := decodeFields(data); ok && string(f.key) == req.IdempotencyKey && string(f.typ) == req.Type &&
		bytes.Equal(f.payload, req.Payload) {
		var payload []byte // nil when empty, as a decoded entry's
		if owned && len(f.payload) > 0 {
			payload = f.payload[:len(f.payload):len(f.payload)]
		} else {
			payload = append(payload, f.payload...)
		}
		e := Entry{Chain: req.Chain, Seq: seq, PrevHash: f.prevHash, TimeUnixNano: f.timeUnixNano,
			IdempotencyKey: req.IdempotencyKey, Type: req.Type, Payload: payload, Hash: f.hash}
		return Result{Entry: e, Replayed: true}, true, nil
	}
	existing, err := keyedEntry(req.Chain, req.IdempotencyKey, seq, data)
	if err != nil {
		return Result{}, false, err
	}
	// The fingerprint is a hash of the type and payload: equal bytes are
	// equal fingerprints, so a replay compares bytes and hashes nothing.
	if existing.Type == req.Type && bytes.Equal(existing.Payload, req.Payload) {
		return Result{Entry: existing, Replayed: true}, true, nil
	}
	stored, requested := existing.Fingerprint(), Fingerprint(req.Type, req.Payload)
	if stored != requested {
		return Result{}, true, &ConflictError{Chain: req.Chain, IdempotencyKey: req.IdempotencyKey,
			ExistingSeq: existing.Seq, Expected: stored, Calculated: requested}
	}
	return Result{Entry: existing, Replayed: true}, true, nil
}

// Lookup returns the chain's entry that holds the idempotency key.
func (tx *Tx) Lookup(chain, key string) (Entry, error) {
	e, found, err := tx.lookup(chain, key)
	if err == nil && !found {
		err = &notFoundError{kind: notFoundKey, chain: chain, key: key}
	}
	return e, err
}

// lookup is Lookup without an error for a missing key: an append of a new
// key, the common case, formats no message.
func (tx *Tx) lookup(chain, key string) (Entry, bool, error) {
	seq, data, found, err := tx.lookupRecord(chain, key)
	if err != nil || !found {
		return Entry{}, false, err
	}
	e, err := keyedEntry(chain, key, seq, data)
	return e, err == nil, err
}

// lookupRecord returns the seq and stored bytes of the entry the index
// maps the key to; found is false when it maps it to none. The bytes are
// the store's, valid while tx lasts.
func (tx *Tx) lookupRecord(chain, key string) (seq uint64, data []byte, found bool, err error) {
	seq, err = tx.stx.LookupKey(tx.ctx, chain, key)
	if err == storage.ErrNotFound || errors.Is(err, storage.ErrNotFound) {
		return 0, nil, false, nil
	}
	if err != nil {
		return 0, nil, false, tx.failed(err)
	}
	data, err = tx.stx.Entry(tx.ctx, chain, seq)
	if errors.Is(err, storage.ErrNotFound) {
		return 0, nil, false, fmt.Errorf("chain %q seq %d: %w", chain, seq, ErrNotFound)
	}
	if err != nil {
		return 0, nil, false, tx.failed(err)
	}
	return seq, data, true, nil
}

// keyedEntry decodes the entry the index maps key to and checks that it
// holds the key.
func keyedEntry(chain, key string, seq uint64, data []byte) (Entry, error) {
	e, err := DecodeRecord(chain, seq, data)
	if err != nil {
		return Entry{}, err
	}
	if e.IdempotencyKey != key {
		// An index may stand for keys by digests; it must never answer for
		// another key, whether by a collision or a damaged file.
		return Entry{}, fmt.Errorf("%w: chain %q key %q: the index points at seq %d, which holds key %q",
			ErrCorrupt, chain, key, seq, e.IdempotencyKey)
	}
	return e, nil
}
