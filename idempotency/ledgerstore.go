package idempotency

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// State keys of the ledger store, in the ledger's state keyspace.
var (
	prefixRecord  = []byte("idempotency/r/") // + scope: a finished record
	prefixRetries = []byte("idempotency/n/") // + scope: retry count, expiry
	prefixExpiry  = []byte("idempotency/x/") // + u64be(expiry) + scope: purge index
)

// ledgerShards is how many locks split the ledger store's leases.
const ledgerShards = 64

// cleanupBatchMax bounds the records one cleanup transaction deletes.
const cleanupBatchMax = 1000

// LedgerStore keeps records in the ledger's own file, in its state
// keyspace, so that a service has one file to back up. It is a TxStore: a
// handler that appends entries can commit its SUCCESS record in the same
// transaction (Context.SucceedTx).
//
// What is durable when: finished records (SUCCESS, FAILED) and retry counts
// are written through the ledger's group commit, durable before the guard
// answers. PROCESSING leases live in this process's memory. The embedded
// ledger file has one writer process (its file lock), so every request that
// can reach the file passes through this process and its leases; if the
// process dies, its leases die with it, which is what recovering them would
// do, and the ledger's UNIQUE(chain, key) keeps the re-run handler's entries
// exactly once (the handler derives its entry keys from the request's key).
// A lease therefore costs no fsync, and a request that appends entries
// costs one durable commit, shared with concurrent requests.
type LedgerStore struct {
	db     *chain.DB
	seed   maphash.Seed
	shards [ledgerShards]leaseShard
}

type leaseShard struct {
	mu sync.Mutex
	m  map[Scope]*lease
}

// lease is a PROCESSING record held in memory. committing is set while
// its final record is being written, so that recovery leaves it alone.
type lease struct {
	rec        Record
	committing bool
}

var (
	ledgerStoresMu sync.Mutex
	ledgerStores   = map[*chain.DB]*LedgerStore{}
)

// NewLedgerStore returns the store of db (one per DB: a second call returns
// the same store, so that leases are shared). db must be an embedded ledger
// (chain.Open): on a backend that several processes share, leases in one
// process's memory would not exclude the others; use the PostgreSQL store
// (idempotency/pgstore) there.
func NewLedgerStore(db *chain.DB) (*LedgerStore, error) {
	if _, ok := db.Backend().(*bolt.Backend); !ok {
		return nil, fmt.Errorf("idempotency: the ledger store needs an embedded ledger (chain.Open), not %T", db.Backend())
	}
	ledgerStoresMu.Lock()
	defer ledgerStoresMu.Unlock()
	if s, ok := ledgerStores[db]; ok {
		return s, nil
	}
	s := &LedgerStore{db: db, seed: maphash.MakeSeed()}
	for i := range s.shards {
		s.shards[i].m = map[Scope]*lease{}
	}
	ledgerStores[db] = s
	return s, nil
}

func (s *LedgerStore) shard(scope Scope) *leaseShard {
	var h maphash.Hash
	h.SetSeed(s.seed)
	h.WriteString(scope.Operation)
	h.WriteByte(0)
	h.WriteString(scope.User)
	h.WriteByte(0)
	h.WriteString(scope.Key)
	return &s.shards[h.Sum64()%ledgerShards]
}

func recordKey(scope Scope) []byte  { return scopeBytes(append([]byte(nil), prefixRecord...), scope) }
func retriesKey(scope Scope) []byte { return scopeBytes(append([]byte(nil), prefixRetries...), scope) }

func expiryKey(scope Scope, expiresAt time.Time) []byte {
	b := append([]byte(nil), prefixExpiry...)
	b = binary.BigEndian.AppendUint64(b, uint64(expiresAt.UnixNano())^1<<63)
	return scopeBytes(b, scope)
}

// readDurable reads scope's finished record and retry count in tx.
func readDurable(tx *chain.Tx, scope Scope, now time.Time) (rec Record, found bool, retries int, err error) {
	v, err := tx.StateGet(recordKey(scope))
	switch {
	case err == nil:
		rec, err = decodeRecord(scope, v)
		if err != nil {
			return Record{}, false, 0, err
		}
		found = !rec.expired(now)
	case !errors.Is(err, chain.ErrNotFound):
		return Record{}, false, 0, err
	}
	retries, err = readRetries(tx, scope, now)
	return rec, found, retries, err
}

func readRetries(tx *chain.Tx, scope Scope, now time.Time) (int, error) {
	v, err := tx.StateGet(retriesKey(scope))
	if errors.Is(err, chain.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(v) != 12 {
		return 0, errBadRecord
	}
	if !now.Before(time.Unix(0, int64(binary.BigEndian.Uint64(v[4:])))) {
		return 0, nil
	}
	return int(binary.BigEndian.Uint32(v)), nil
}

// Create implements Store.
func (s *LedgerStore) Create(ctx context.Context, c Claim) (CreateResult, error) {
	if err := c.Scope.Validate(); err != nil {
		return CreateResult{}, err
	}
	sh := s.shard(c.Scope)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if l, ok := sh.m[c.Scope]; ok {
		if !l.rec.expired(c.Now) {
			return CreateResult{Record: l.rec.clone()}, nil
		}
		delete(sh.m, c.Scope)
	}
	var (
		rec     Record
		found   bool
		retries int
	)
	err := s.db.View(ctx, func(tx *chain.Tx) error {
		var err error
		rec, found, retries, err = readDurable(tx, c.Scope, c.Now)
		return err
	})
	if err != nil {
		return CreateResult{}, err
	}
	if found {
		return CreateResult{Record: rec}, nil
	}
	l := &lease{rec: newProcessing(c, retries)}
	sh.m[c.Scope] = l
	return CreateResult{Created: true, Record: l.rec.clone()}, nil
}

// Get implements Store.
func (s *LedgerStore) Get(ctx context.Context, scope Scope, now time.Time) (Record, error) {
	sh := s.shard(scope)
	sh.mu.Lock()
	if l, ok := sh.m[scope]; ok && !l.rec.expired(now) {
		rec := l.rec.clone()
		sh.mu.Unlock()
		return rec, nil
	}
	sh.mu.Unlock()
	var (
		rec   Record
		found bool
	)
	err := s.db.View(ctx, func(tx *chain.Tx) error {
		var err error
		rec, found, _, err = readDurable(tx, scope, now)
		return err
	})
	if err != nil {
		return Record{}, err
	}
	if !found {
		return Record{}, ErrNotFound
	}
	return rec, nil
}

// held returns the lease of scope held by token; sh.mu is held.
func (sh *leaseShard) held(scope Scope, token string, now time.Time) (*lease, error) {
	l, ok := sh.m[scope]
	if !ok || l.rec.Token != token || l.rec.expired(now) {
		return nil, ErrLeaseLost
	}
	return l, nil
}

// Extend implements Store.
func (s *LedgerStore) Extend(ctx context.Context, scope Scope, token string, leaseExpiresAt, now time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	sh := s.shard(scope)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	l, err := sh.held(scope, token, now)
	if err != nil {
		return err
	}
	l.rec.LeaseExpiresAt, l.rec.UpdatedAt = leaseExpiresAt, now
	return nil
}

// begin marks the lease held by token as committing and returns a copy of
// its record.
func (s *LedgerStore) begin(scope Scope, token string, now time.Time) (Record, error) {
	sh := s.shard(scope)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	l, err := sh.held(scope, token, now)
	if err != nil {
		return Record{}, err
	}
	l.committing = true
	return l.rec.clone(), nil
}

// end drops the lease held by token (done) or makes it recoverable again.
func (s *LedgerStore) end(scope Scope, token string, done bool) {
	sh := s.shard(scope)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if l, ok := sh.m[scope]; ok && l.rec.Token == token {
		if done {
			delete(sh.m, scope)
		} else {
			l.committing = false
		}
	}
}

// putFinal writes a finished record and its purge index entry in tx.
func putFinal(tx *chain.Tx, rec *Record) error {
	if err := tx.StatePut(recordKey(rec.Scope), encodeRecord(nil, rec)); err != nil {
		return err
	}
	return tx.StatePut(expiryKey(rec.Scope, rec.ExpiresAt), nil)
}

// finish writes the final record that final makes of the lease's record,
// then drops the lease.
func (s *LedgerStore) finish(ctx context.Context, scope Scope, token string, now time.Time, final func(tx *chain.Tx, rec *Record) error) error {
	rec, err := s.begin(scope, token, now)
	if err != nil {
		return err
	}
	err = s.db.Update(ctx, func(tx *chain.Tx) error {
		r := rec.clone()
		return final(tx, &r)
	})
	s.end(scope, token, err == nil)
	return err
}

// Succeed implements Store.
func (s *LedgerStore) Succeed(ctx context.Context, scope Scope, token string, resp Response, expiresAt, now time.Time) error {
	return s.finish(ctx, scope, token, now, func(tx *chain.Tx, rec *Record) error {
		rec.Status, rec.Response, rec.ExpiresAt, rec.UpdatedAt = StatusSuccess, &resp, expiresAt, now
		return putFinal(tx, rec)
	})
}

// Fail implements Store.
func (s *LedgerStore) Fail(ctx context.Context, scope Scope, token string, failure string, expiresAt, now time.Time) error {
	return s.finish(ctx, scope, token, now, func(tx *chain.Tx, rec *Record) error {
		rec.Status, rec.Failure, rec.ExpiresAt, rec.UpdatedAt = StatusFailed, failure, expiresAt, now
		return putFinal(tx, rec)
	})
}

// Release implements Store.
func (s *LedgerStore) Release(ctx context.Context, scope Scope, token string, maxRetries int, expiresAt, now time.Time) (ReleaseResult, error) {
	var res ReleaseResult
	err := s.finish(ctx, scope, token, now, func(tx *chain.Tx, rec *Record) error {
		n, err := readRetries(tx, scope, now)
		if err != nil {
			return err
		}
		n++
		v := binary.BigEndian.AppendUint32(nil, uint32(n))
		v = binary.BigEndian.AppendUint64(v, uint64(expiresAt.UnixNano()))
		if err := tx.StatePut(retriesKey(scope), v); err != nil {
			return err
		}
		res = ReleaseResult{Retries: n, Poisoned: n >= maxRetries}
		if !res.Poisoned {
			// An expired record the lease replaced may still be stored.
			return tx.StateDelete(recordKey(scope))
		}
		rec.Status, rec.Failure, rec.ExpiresAt, rec.UpdatedAt = StatusFailed, poisonedFailure, expiresAt, now
		return putFinal(tx, rec)
	})
	if err != nil {
		return ReleaseResult{}, err
	}
	return res, nil
}

// SucceedTx implements TxStore: the SUCCESS record is written in tx, and
// the lease stays (committing, so recovery leaves it) until Committed.
func (s *LedgerStore) SucceedTx(tx *chain.Tx, scope Scope, token string, resp Response, expiresAt, now time.Time) error {
	rec, err := s.begin(scope, token, now)
	if err != nil {
		return err
	}
	rec.Status, rec.Response, rec.ExpiresAt, rec.UpdatedAt = StatusSuccess, &resp, expiresAt, now
	return putFinal(tx, &rec)
}

// Committed implements TxStore.
func (s *LedgerStore) Committed(ctx context.Context, scope Scope, token string) (bool, error) {
	var committed bool
	err := s.db.View(ctx, func(tx *chain.Tx) error {
		v, err := tx.StateGet(recordKey(scope))
		if errors.Is(err, chain.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		rec, err := decodeRecord(scope, v)
		committed = err == nil && rec.Token == token && rec.Status == StatusSuccess
		return err
	})
	if err != nil {
		return false, err
	}
	s.end(scope, token, committed)
	return committed, nil
}

// RecoverStuck implements Store. Only leases of this process exist to be
// recovered: a dead process's leases died with it.
func (s *LedgerStore) RecoverStuck(ctx context.Context, leaseEndedBy time.Time, limit, maxRetries int, expiresAt, now time.Time) (int, error) {
	type stuck struct {
		scope Scope
		token string
	}
	var found []stuck
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for scope, l := range sh.m {
			if len(found) < limit && !l.committing && !l.rec.LeaseExpiresAt.After(leaseEndedBy) {
				found = append(found, stuck{scope, l.rec.Token})
			}
		}
		sh.mu.Unlock()
	}
	n := 0
	for _, st := range found {
		_, err := s.Release(ctx, st.scope, st.token, maxRetries, expiresAt, now)
		if errors.Is(err, ErrLeaseLost) {
			continue // it finished meanwhile
		}
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// DeleteExpired implements Store: in transactions of at most
// cleanupBatchMax records, each written through the group commit beside
// the writers' requests.
func (s *LedgerStore) DeleteExpired(ctx context.Context, now time.Time, limit int) (int, error) {
	deleted := 0
	leaseDeleted := map[Scope]bool{}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for scope, l := range sh.m {
			if deleted < limit && l.rec.expired(now) && !l.committing {
				delete(sh.m, scope)
				leaseDeleted[scope] = true
				deleted++
			}
		}
		sh.mu.Unlock()
	}
	end := binary.BigEndian.AppendUint64(append([]byte(nil), prefixExpiry...), uint64(now.UnixNano())^1<<63+1)
	for deleted < limit {
		batch := min(limit-deleted, cleanupBatchMax)
		n, more := 0, false
		err := s.db.Update(ctx, func(tx *chain.Tx) error {
			n, more = 0, false
			var keys [][]byte
			for kv, err := range tx.StateScan(prefixExpiry, end, false) {
				if err != nil {
					return err
				}
				if len(keys) == batch {
					more = true
					break
				}
				keys = append(keys, bytes.Clone(kv.Key))
			}
			for _, k := range keys {
				scope, ok := parseScope(k[len(prefixExpiry)+8:])
				if err := tx.StateDelete(k); err != nil {
					return err
				}
				if !ok {
					continue
				}
				v, err := tx.StateGet(recordKey(scope))
				if errors.Is(err, chain.ErrNotFound) {
					continue
				}
				if err != nil {
					return err
				}
				rec, err := decodeRecord(scope, v)
				if err == nil && !rec.expired(now) {
					continue // replaced by a newer record; its own index entry stays
				}
				if err := tx.StateDelete(recordKey(scope)); err != nil {
					return err
				}
				if !s.leased(scope) && !leaseDeleted[scope] { // else the scope's record was the lease; this was its expired predecessor
					n++
				}
			}
			return s.deleteExpiredRetries(tx, now, batch)
		})
		if err != nil {
			return deleted, err
		}
		deleted += n
		if !more {
			break
		}
	}
	return deleted, nil
}

// leased reports whether scope has a lease in memory.
func (s *LedgerStore) leased(scope Scope) bool {
	sh := s.shard(scope)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	_, ok := sh.m[scope]
	return ok
}

// deleteExpiredRetries deletes up to limit expired retry counts in tx.
func (s *LedgerStore) deleteExpiredRetries(tx *chain.Tx, now time.Time, limit int) error {
	var keys [][]byte
	for kv, err := range tx.StateScan(prefixRetries, prefixEnd(prefixRetries), false) {
		if err != nil {
			return err
		}
		if len(kv.Value) == 12 && !now.Before(time.Unix(0, int64(binary.BigEndian.Uint64(kv.Value[4:])))) {
			keys = append(keys, bytes.Clone(kv.Key))
			if len(keys) == limit {
				break
			}
		}
	}
	for _, k := range keys {
		if err := tx.StateDelete(k); err != nil {
			return err
		}
	}
	return nil
}

// prefixEnd is the first key after every key with prefix p.
func prefixEnd(p []byte) []byte {
	e := bytes.Clone(p)
	e[len(e)-1]++
	return e
}

// List implements Store: the leases of this process and the finished
// records of the file, merged in scope order.
func (s *LedgerStore) List(ctx context.Context, after Scope, status Status, limit int, now time.Time) ([]Record, error) {
	var out []Record
	if status == "" || status == StatusProcessing {
		for i := range s.shards {
			sh := &s.shards[i]
			sh.mu.Lock()
			for scope, l := range sh.m {
				if !l.rec.expired(now) && (after == Scope{} || scopeLess(after, scope)) {
					out = append(out, l.rec.clone())
				}
			}
			sh.mu.Unlock()
		}
	}
	if status != StatusProcessing {
		start := prefixRecord
		if after != (Scope{}) {
			start = append(recordKey(after), 0)
		}
		n := 0
		err := s.db.View(ctx, func(tx *chain.Tx) error {
			for kv, err := range tx.StateScan(start, prefixEnd(prefixRecord), false) {
				if err != nil {
					return err
				}
				scope, ok := parseScope(kv.Key[len(prefixRecord):])
				if !ok {
					return errBadRecord
				}
				rec, err := decodeRecord(scope, kv.Value)
				if err != nil {
					return err
				}
				if rec.expired(now) || (status != "" && rec.Status != status) {
					continue
				}
				out = append(out, rec)
				if n++; n == limit {
					break
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.SortFunc(out, func(a, b Record) int {
		if scopeLess(a.Scope, b.Scope) {
			return -1
		}
		if scopeLess(b.Scope, a.Scope) {
			return 1
		}
		return 0
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
