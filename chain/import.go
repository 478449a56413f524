package chain

import (
	"errors"
	"fmt"

	"github.com/ledgerworks/ledger/storage"
)

// ErrInvalidEntry: a fully formed entry handed to Tx.AppendEntry does not
// continue its chain (wrong seq, prev_hash, hash or time). It also matches
// ErrInvalid. Nothing was written.
var ErrInvalidEntry = errors.New("entry does not continue its chain")

// AppendEntry appends an entry that was formed elsewhere — a line of an
// export being imported — keeping its time, prev_hash and hash. The entry
// must continue the chain exactly: seq one past the head, prev_hash equal to
// the head's hash (the genesis for seq 1), hash equal to the Format v1 hash
// of its fields, time not before the head's, and an idempotency key the
// chain does not hold yet.
func (tx *Tx) AppendEntry(e Entry) error {
	if !tx.stx.Writable() {
		return ErrReadOnly
	}
	// The entry's hash binds its names: an entry from before the rules for
	// new names is history to restore, so only the limits apply.
	req := Request{Chain: e.Chain, IdempotencyKey: e.IdempotencyKey, Type: e.Type, Payload: e.Payload}
	if err := ValidateStoredRequest(req, tx.db.opts.PayloadSizeMax); err != nil {
		return err
	}
	invalid := func(format string, args ...any) error {
		return &InvalidError{Field: "entry", Err: ErrInvalidEntry,
			Reason: fmt.Sprintf("chain %q seq %d: %s", e.Chain, e.Seq, fmt.Sprintf(format, args...))}
	}
	head, err := tx.Head(e.Chain)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	switch {
	case e.Seq != head.Seq+1:
		return invalid("chain head is seq %d", head.Seq)
	case e.PrevHash != head.Hash:
		return invalid("prev_hash %s differs from the head's hash %s", e.PrevHash, head.Hash)
	case e.ComputeHash() != e.Hash:
		return invalid("hash %s is not the hash of the entry's fields", e.Hash)
	case head.Seq > 0 && e.TimeUnixNano < head.TimeUnixNano:
		return invalid("time %d is before the head's time %d", e.TimeUnixNano, head.TimeUnixNano)
	}
	if e.IdempotencyKey != "" {
		if existing, err := tx.Lookup(e.Chain, e.IdempotencyKey); err == nil {
			return &ConflictError{Chain: e.Chain, IdempotencyKey: e.IdempotencyKey, ExistingSeq: existing.Seq,
				Expected: existing.Fingerprint(), Calculated: e.Fingerprint()}
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	e.Payload = append([]byte(nil), e.Payload...)
	rec := storage.Record{Seq: e.Seq, IdempotencyKey: e.IdempotencyKey, Data: EncodeRecord(&e)}
	tx.dirty = true
	if err := tx.stx.Append(tx.ctx, e.Chain, rec, storage.Head{Seq: e.Seq, Hash: e.Hash, TimeUnixNano: e.TimeUnixNano}); err != nil {
		return tx.failed(err)
	}
	return nil
}
