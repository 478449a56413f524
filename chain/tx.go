package chain

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/ledgerworks/ledger/storage"
)

// Tx is a transaction: read-only inside View, writable inside Update.
// It is used by one goroutine, within the callback only.
type Tx struct {
	db    *DB
	ctx   context.Context
	stx   storage.Tx
	dirty bool // something was written; a failure then needs a rollback
	// storageFailure is the first error of the store other than not-found
	// (see Tx.failed); the group commit then rolls back, as for dirty.
	storageFailure error
}

// Context returns the context of the call that started the transaction.
func (tx *Tx) Context() context.Context { return tx.ctx }

// Writable reports whether the transaction may append.
func (tx *Tx) Writable() bool { return tx.stx.Writable() }

// Append appends one entry to a chain in this transaction, or returns the
// entry an earlier request with the same key recorded (Replayed). The new
// entry's time is the clock's, but never earlier than the chain's newest
// entry, so times never decrease within a chain.
func (tx *Tx) Append(req Request) (Result, error) {
	if !tx.stx.Writable() {
		return Result{}, ErrReadOnly
	}
	if err := ValidateRequest(req, tx.db.opts.PayloadSizeMax); err != nil {
		return Result{}, err
	}
	if req.IdempotencyKey != "" {
		res, found, err := tx.replay(req)
		if err != nil || found {
			return res, err
		}
	}
	head, err := tx.head(req.Chain)
	if err != nil {
		return Result{}, err
	}
	now := tx.db.clock().UnixNano()
	if head.Seq > 0 { // an empty chain's head time is 0, which must not floor a clock before 1970
		now = max(now, head.TimeUnixNano)
	}
	e := Entry{
		Chain:          req.Chain,
		Seq:            head.Seq + 1,
		PrevHash:       head.Hash,
		TimeUnixNano:   now,
		IdempotencyKey: req.IdempotencyKey,
		Type:           req.Type,
		Payload:        append([]byte(nil), req.Payload...),
	}
	e.Hash = hashOf(&e)
	rec := storage.Record{Seq: e.Seq, IdempotencyKey: e.IdempotencyKey, Data: EncodeRecord(&e)}
	tx.dirty = true
	if err := tx.stx.Append(tx.ctx, e.Chain, rec, storage.Head{Seq: e.Seq, Hash: e.Hash, TimeUnixNano: e.TimeUnixNano}); err != nil {
		return Result{}, tx.failed(err)
	}
	return Result{Entry: e}, nil
}

// replay looks the request's key up. found is false when the key is new.
func (tx *Tx) replay(req Request) (res Result, found bool, err error) {
	seq, data, found, err := tx.lookupRecord(req.Chain, req.IdempotencyKey)
	if err != nil || !found {
		return Result{}, false, err
	}
	// A retry, the common case, stores exactly the request's key, type and
	// payload: compared in the stored bytes, and when equal the entry takes
	// the request's key and type (valid text, as ValidateRequest found) and
	// a copy of the payload, instead of decoding, validating and copying
	// all three. decodeFields accepts exactly the records DecodeRecord does.
	if f, ok := decodeFields(data); ok && string(f.key) == req.IdempotencyKey && string(f.typ) == req.Type &&
		bytes.Equal(f.payload, req.Payload) {
		e := Entry{Chain: req.Chain, Seq: seq, PrevHash: f.prevHash, TimeUnixNano: f.timeUnixNano,
			IdempotencyKey: req.IdempotencyKey, Type: req.Type, Payload: append([]byte(nil), f.payload...), Hash: f.hash}
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

// Head returns the chain's head. For a chain with no entries it returns
// ErrNotFound together with the head an empty chain has (seq 0, genesis).
// In a write transaction it locks the chain's head until the transaction
// ends.
func (tx *Tx) Head(chain string) (Head, error) {
	h, err := tx.stx.Head(tx.ctx, chain)
	if errors.Is(err, storage.ErrNotFound) {
		return Head{Chain: chain, Hash: Genesis(chain)}, &notFoundError{kind: notFoundChain, chain: chain}
	}
	if err != nil {
		return Head{}, tx.failed(err)
	}
	return Head{Chain: chain, Seq: h.Seq, Hash: h.Hash, TimeUnixNano: h.TimeUnixNano}, nil
}

// head is Head with the empty head and no error for a new chain.
func (tx *Tx) head(chain string) (Head, error) {
	h, err := tx.stx.Head(tx.ctx, chain)
	if err == storage.ErrNotFound || errors.Is(err, storage.ErrNotFound) {
		return Head{Chain: chain, Hash: Genesis(chain)}, nil
	}
	if err != nil {
		return Head{}, tx.failed(err)
	}
	return Head{Chain: chain, Seq: h.Seq, Hash: h.Hash, TimeUnixNano: h.TimeUnixNano}, nil
}

// Get returns the entry at (chain, seq).
func (tx *Tx) Get(chain string, seq uint64) (Entry, error) {
	data, err := tx.stx.Entry(tx.ctx, chain, seq)
	if errors.Is(err, storage.ErrNotFound) {
		return Entry{}, fmt.Errorf("chain %q seq %d: %w", chain, seq, ErrNotFound)
	}
	if err != nil {
		return Entry{}, tx.failed(err)
	}
	return DecodeRecord(chain, seq, data)
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

// Entries yields the chain's entries with seq >= fromSeq in order.
func (tx *Tx) Entries(chain string, fromSeq uint64) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		for rec, err := range tx.stx.Entries(tx.ctx, chain, fromSeq) {
			if err != nil {
				yield(Entry{}, tx.failed(err))
				return
			}
			e, err := DecodeRecord(chain, rec.Seq, rec.Data)
			if !yield(e, err) || err != nil {
				return
			}
		}
	}
}

// Chains yields every chain's head in byte order of the ids, from the first
// id >= from.
func (tx *Tx) Chains(from string) iter.Seq2[Head, error] {
	return func(yield func(Head, error) bool) {
		for ch, err := range tx.stx.Chains(tx.ctx, from) {
			if err != nil {
				yield(Head{}, tx.failed(err))
				return
			}
			h := Head{Chain: ch.Chain, Seq: ch.Head.Seq, Hash: ch.Head.Hash, TimeUnixNano: ch.Head.TimeUnixNano}
			if !yield(h, nil) {
				return
			}
		}
	}
}

// StateGet reads derived state; ErrNotFound when the key is absent. The
// value is valid until the transaction ends.
func (tx *Tx) StateGet(key []byte) ([]byte, error) {
	v, err := tx.stx.StateGet(tx.ctx, key)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, &notFoundError{kind: notFoundState, key: string(key)}
	}
	return v, tx.failed(err)
}

// StatePut writes derived state in this transaction.
func (tx *Tx) StatePut(key, value []byte) error {
	if !tx.stx.Writable() {
		return ErrReadOnly
	}
	tx.dirty = true
	return tx.failed(tx.stx.StatePut(tx.ctx, key, value))
}

// StateDelete removes derived state in this transaction.
func (tx *Tx) StateDelete(key []byte) error {
	if !tx.stx.Writable() {
		return ErrReadOnly
	}
	tx.dirty = true
	return tx.failed(tx.stx.StateDelete(tx.ctx, key))
}

// StateScan yields the state pairs with start <= key < end (no upper bound
// when end is nil), descending when reverse is set. Keys and values are valid
// until the transaction ends.
func (tx *Tx) StateScan(start, end []byte, reverse bool) iter.Seq2[storage.KeyValue, error] {
	return func(yield func(storage.KeyValue, error) bool) {
		for kv, err := range tx.stx.StateScan(tx.ctx, start, end, reverse) {
			if !yield(kv, tx.failed(err)) || err != nil {
				return
			}
		}
	}
}
