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
	// keys is the committer's scratch for the keys AppendBatch prepares
	// (nil outside the committer: AppendBatch then makes its own).
	keys *[]storage.ChainKey
	// notes collects the channels Notify named, fired once the
	// transaction's commit is durable (nil outside the committer).
	notes *[]string
	// trees is the committer's treeBatch, which every append extends (nil
	// outside the committer and with Options.NoTrees).
	trees *treeBatch
	// atCommit maps the group's statements held for the commit
	// (ExecAtCommit), by their index, to the request that queued them:
	// member, its index in the group.
	atCommit *[]int
	member   int
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
	return tx.appendAhead(req, nil, 0)
}

// appendAhead is Append of request i of a part or group whose hashes ahead
// holds (see hashAhead and hashGroupInLanes), or of a lone request when
// ahead is nil. With ahead, the entry's time is ahead's and its hash is
// taken from ahead's slot when the slot assumed the same entry; when it did
// not, the entry is hashed here and ahead is marked diverged (AppendBatch
// then stops its helper).
func (tx *Tx) appendAhead(req Request, ahead *hashAhead, i int) (Result, error) {
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
	var now int64
	if ahead != nil {
		now = ahead.now
	} else {
		now = tx.db.clock().UnixNano()
	}
	now = entryTime(now, head.Seq, head.TimeUnixNano)
	e := Entry{
		Chain:          req.Chain,
		Seq:            head.Seq + 1,
		PrevHash:       head.Hash,
		TimeUnixNano:   now,
		IdempotencyKey: req.IdempotencyKey,
		Type:           req.Type,
		Payload:        req.Payload,
	}
	// One allocation holds the entry's copy of the payload and, behind
	// it, the record; the payload's capacity ends where the record starts,
	// so an append to the caller's entry cannot reach the stored bytes.
	buf := make([]byte, len(req.Payload), len(req.Payload)+recordSize(&e))
	copy(buf, req.Payload)
	e.Payload = nil // an empty payload is nil, as a decoded one is
	if len(req.Payload) > 0 {
		e.Payload = buf[:len(req.Payload):len(req.Payload)]
	}
	if hash, ok := ahead.hashOf(i, &e); ok {
		e.Hash = hash
	} else {
		e.Hash = hashOf(&e)
	}
	rec := storage.Record{Seq: e.Seq, IdempotencyKey: e.IdempotencyKey, Data: appendRecord(buf[len(buf):], &e)}
	tx.dirty = true
	if err := tx.stx.Append(tx.ctx, e.Chain, rec, storage.Head{Seq: e.Seq, Hash: e.Hash, TimeUnixNano: e.TimeUnixNano}); err != nil {
		return Result{}, tx.failed(err)
	}
	if tx.trees != nil {
		if err := tx.trees.add(tx.ctx, tx.stx, e.Chain, e.Seq, &e.Hash); err != nil {
			return Result{}, tx.failed(err)
		}
	}
	return Result{Entry: e}, nil
}

// entryTime is the time of the entry after a chain's head, given the
// clock's reading: never earlier than the head's. An empty chain's head
// time is 0, which must not floor a clock before 1970.
func entryTime(clock int64, headSeq uint64, headTime int64) int64 {
	if headSeq == 0 {
		return clock
	}
	return max(clock, headTime)
}

// AppendBatch appends reqs in order, as that many calls of Append would,
// and appends their results to results. The result is the same as with
// Append, but for the time: in a batch of at least 256 requests on at
// most 4 chains, the new entries of each storage.PrepareKeysMax requests
// take one time from the clock, read when they begin (and still never
// earlier than their chain's newest entry), so that a second core can
// compute their hashes ahead of the appends (see hashAhead).
// The cost is also lower on a backend that looks many keys up at once
// (storage.KeyPreparer): the keyed requests' keys are looked up together
// before their entries are appended, storage.PrepareKeysMax at a time.
//
// On an error, results comes back extended by the results of the requests
// before the failing one, with the error. Their appends stay in the
// transaction, as Append's do; the function that returns the error rolls
// them back with the rest.
func (tx *Tx) AppendBatch(reqs []Request, results []Result) ([]Result, error) {
	if !tx.stx.Writable() {
		return results, ErrReadOnly
	}
	preparer, _ := tx.stx.(storage.KeyPreparer)
	var keys []storage.ChainKey
	if tx.keys != nil && preparer != nil {
		keys = *tx.keys
		defer func() {
			clear(keys) // the scratch outlives the group: keep none of its strings
			*tx.keys = keys[:0]
		}()
	}
	for len(reqs) > 0 {
		part := reqs[:min(len(reqs), storage.PrepareKeysMax)]
		reqs = reqs[len(part):]
		var err error
		if keys, results, err = tx.appendPart(part, preparer, keys, results); err != nil {
			return results, err
		}
	}
	return results, nil
}

// appendPart appends one part of an AppendBatch: its keys looked up
// together (keys is the scratch for them) and its hashes computed ahead
// when that pays off (see hashAhead), until the first request that does
// not become the new entry assumed.
func (tx *Tx) appendPart(part []Request, preparer storage.KeyPreparer, keys []storage.ChainKey, results []Result) ([]storage.ChainKey, []Result, error) {
	ahead := tx.startHashAhead(part) // it hashes while the keys are looked up
	defer func() { ahead.finish() }()
	if preparer != nil && len(part) > 1 {
		keys = keys[:0]
		for _, r := range part {
			keys = appendChainKey(keys, r)
		}
		preparer.PrepareKeys(tx.ctx, keys)
	}
	for i, r := range part {
		res, err := tx.appendAhead(r, ahead, i)
		if err != nil {
			return keys, results, err
		}
		if ahead != nil && (res.Replayed || ahead.diverged) {
			ahead.finish()
			ahead = nil
		}
		results = append(results, res)
	}
	return keys, results, nil
}

// appendChainKey appends r's chain and idempotency key to keys, for a
// storage.KeyPreparer, when r carries a key.
func appendChainKey(keys []storage.ChainKey, r Request) []storage.ChainKey {
	if r.IdempotencyKey == "" {
		return keys
	}
	return append(keys, storage.ChainKey{Chain: r.Chain, Key: r.IdempotencyKey})
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
	if err := checkStateKey(key); err != nil {
		return err
	}
	tx.dirty = true
	return tx.failed(tx.stx.StatePut(tx.ctx, key, value))
}

// Exec runs a SQL statement of the caller's in this transaction, on a
// backend that can (storage.Execer: PostgreSQL), and returns the rows it
// affected, so that a row of the caller's table commits or rolls back with
// the entries. A failed statement fails the transaction, as a failed
// write does. ErrExecUnsupported on the embedded default.
func (tx *Tx) Exec(sql string, args ...any) (int64, error) {
	if !tx.stx.Writable() {
		return 0, ErrReadOnly
	}
	ex, ok := tx.stx.(storage.Execer)
	if !ok {
		return 0, ErrExecUnsupported
	}
	tx.dirty = true
	n, err := ex.Exec(tx.ctx, sql, args...)
	return n, tx.failed(err)
}

// ExecAtCommit queues a SQL statement of the caller's to run when the
// transaction commits, on a backend that can (storage.CommitExecer:
// PostgreSQL): for a row whose write decides whether the request may
// commit but that nothing in the transaction reads, such as a guard's
// SUCCESS record. The statements of a whole group commit travel with its
// COMMIT, in one round trip, instead of one round trip each. The
// statement must not depend on the transaction's appends or state writes.
// With a none error, sql is an INSERT, UPDATE or DELETE without
// RETURNING, and affecting no row fails it with none. When the statement
// fails, the request that queued it fails with that error and writes
// nothing, and the rest of its group commits without it.
// ErrExecUnsupported on the embedded default.
func (tx *Tx) ExecAtCommit(none error, sql string, args ...any) error {
	if !tx.stx.Writable() {
		return ErrReadOnly
	}
	ce, ok := tx.stx.(storage.CommitExecer)
	if !ok {
		return ErrExecUnsupported
	}
	tx.dirty = true
	i := ce.ExecAtCommit(sql, args, none)
	if tx.atCommit != nil {
		owners := *tx.atCommit
		for len(owners) < i {
			owners = append(owners, -1) // queued by no request of the group
		}
		*tx.atCommit = append(owners[:i], tx.member)
	}
	return nil
}

// StateDelete removes derived state in this transaction.
func (tx *Tx) StateDelete(key []byte) error {
	if !tx.stx.Writable() {
		return ErrReadOnly
	}
	if err := checkStateKey(key); err != nil {
		return err
	}
	tx.dirty = true
	return tx.failed(tx.stx.StateDelete(tx.ctx, key))
}

// StateScan yields the state pairs with start <= key < end (no upper bound
// when end is nil), descending when reverse is set. Keys and values are valid
// until the transaction ends.
func (tx *Tx) StateScan(start, end []byte, reverse bool) iter.Seq2[storage.KeyValue, error] {
	if bytes.Compare(start, stateReservedEnd) < 0 {
		start = stateReservedEnd // the engine's own keys are not the caller's
	}
	return func(yield func(storage.KeyValue, error) bool) {
		if end != nil && bytes.Compare(end, start) <= 0 {
			return
		}
		for kv, err := range tx.stx.StateScan(tx.ctx, start, end, reverse) {
			if !yield(kv, tx.failed(err)) || err != nil {
				return
			}
		}
	}
}
