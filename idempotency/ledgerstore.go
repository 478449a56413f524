package idempotency

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// State keys of the ledger store, in the ledger's state keyspace.
var (
	prefixRecord  = []byte("idempotency/r/") // + scope: a finished record
	prefixRetries = []byte("idempotency/n/") // + scope: retry count, expiry
)

// ledgerShards is how many locks split the ledger store's leases.
const ledgerShards = 64

// cleanupBatchMax bounds the records one cleanup transaction deletes, and
// cleanupScanMax the records it examines.
const (
	cleanupBatchMax = 1000
	cleanupScanMax  = 10_000
)

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
//
// A scope has a lease or a stored record, never both: a claim of a scope
// whose stored record expired (and was not purged yet) deletes that record
// in one commit before it takes the lease, as the other stores replace it,
// so that an attempt which ends without writing (Abandon, a transient
// failure) leaves nothing of the scope behind for cleanup to count.
type LedgerStore struct {
	db     *chain.DB
	seed   maphash.Seed
	shards [ledgerShards]leaseShard
	filter scopeFilter
	reader storage.KeyReader // the backend's, for alive; nil without one
	// filterScopes is how many scopes the last rebuild found.
	filterScopes atomic.Int64
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

// ledgerStores maps each DB to its store, both held weakly, so that a
// store and its DB are collected once the program drops them.
var (
	ledgerStoresMu sync.Mutex
	ledgerStores   = map[weak.Pointer[chain.DB]]weak.Pointer[LedgerStore]{}
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
	for d, s := range ledgerStores {
		if s.Value() == nil {
			delete(ledgerStores, d)
		}
	}
	key := weak.Make(db)
	if s := ledgerStores[key].Value(); s != nil {
		return s, nil
	}
	s := &LedgerStore{db: db, seed: maphash.MakeSeed()}
	for i := range s.shards {
		s.shards[i].m = map[Scope]*lease{}
	}
	s.reader, _ = db.Backend().(storage.KeyReader)
	s.filter.seed = maphash.MakeSeed()
	s.filter.layers = []*bloom{newBloom(0)}
	if err := s.rebuildFilter(context.Background()); err != nil {
		return nil, err
	}
	ledgerStores[key] = weak.Make(s)
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

// readDurable reads scope's finished record in tx and, when there is none
// (or it expired), its retry count. An expired record is returned with
// found false; rec is the zero Record when none is stored.
func readDurable(tx *chain.Tx, scope Scope, now time.Time) (rec Record, found bool, retries int, err error) {
	v, err := tx.StateGet(recordKey(scope))
	switch {
	case err == nil:
		rec, err = decodeRecord(scope, v)
		if err != nil {
			return Record{}, false, 0, err
		}
		if found = !rec.expired(now); found {
			return rec, true, 0, nil
		}
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
	if !s.filter.mayHold(c.Scope) {
		// No durable record, no retry count: the first attempt, once the
		// ledger is known to be open (a probe that takes no transaction).
		if err := s.alive(ctx); err != nil {
			return CreateResult{}, err
		}
		l := &lease{rec: newProcessing(c, 0)}
		sh.m[c.Scope] = l
		return CreateResult{Created: true, Record: l.rec.clone()}, nil
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
	if rec.Status != "" {
		// An expired record is stored: the lease replaces it, so it is
		// deleted now rather than left to reappear, and be purged as a
		// record, once the lease ends without writing its own.
		if rec, found, retries, err = s.deleteExpiredRecord(ctx, c.Scope, c.Now); err != nil {
			return CreateResult{}, err
		}
		if found {
			return CreateResult{Record: rec}, nil
		}
	}
	l := &lease{rec: newProcessing(c, retries)}
	sh.m[c.Scope] = l
	return CreateResult{Created: true, Record: l.rec.clone()}, nil
}

// deleteExpiredRecord deletes the stored record of scope if it expired by
// now, and answers as readDurable does. The caller holds the scope's shard.
func (s *LedgerStore) deleteExpiredRecord(ctx context.Context, scope Scope, now time.Time) (rec Record, found bool, retries int, err error) {
	err = s.db.Update(ctx, func(tx *chain.Tx) error {
		var err error
		rec, found, retries, err = readDurable(tx, scope, now)
		if err != nil || found || rec.Status == "" {
			return err
		}
		return tx.StateDelete(recordKey(scope))
	})
	return rec, found, retries, err
}

// probeChain and probeKey are what alive asks the backend for.
const probeChain, probeKey = "idempotency", "probe"

// alive fails when the ledger is closed, without a transaction: the
// embedded backend answers a key lookup (storage.KeyReader) with
// ErrClosed once it is closed.
func (s *LedgerStore) alive(ctx context.Context) error {
	if s.reader == nil {
		return s.db.View(ctx, func(*chain.Tx) error { return nil })
	}
	_, _, _, err := s.reader.ReadKey(ctx, probeChain, probeKey)
	return err
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

// putFinal writes a finished record in tx: one state key per record, the
// least the backend's state keyspace can hold it in (cleanup scans the
// records rather than an expiry index, so that a request writes one key).
func putFinal(tx *chain.Tx, rec *Record) error {
	// Key and value in one allocation of their exact size.
	s := rec.Scope
	k := len(prefixRecord) + len(s.Operation) + len(s.User) + len(s.Key) + 2
	b := scopeBytes(append(make([]byte, 0, k+encodedRecordLen(rec)), prefixRecord...), s)
	b = encodeRecord(b, rec)
	return tx.StatePut(b[:k:k], b[k:])
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
	if err == nil {
		s.noteDurable(scope) // before the lease that hides the record is dropped
	}
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
			return nil // no record is stored beside a lease
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

// LedgerDB implements LedgerTxStore.
func (s *LedgerStore) LedgerDB() *chain.DB { return s.db }

// Committed implements TxStore.
func (s *LedgerStore) Committed(ctx context.Context, scope Scope, token string) (bool, error) {
	var committed bool
	key := recordKey(scope)
	err := s.db.View(ctx, func(tx *chain.Tx) error {
		v, err := tx.StateGet(key)
		if errors.Is(err, chain.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		committed = recordHeldBy(v, StatusSuccess, token)
		return nil
	})
	if err != nil {
		return false, err
	}
	if committed {
		s.noteDurable(scope)
	}
	s.end(scope, token, committed)
	return committed, nil
}

// noteDurable adds scope to the filter.
func (s *LedgerStore) noteDurable(scope Scope) { s.filter.add(scope) }

// rebuildFilter builds a new scope filter from the stored records and
// retry counts, sized for them (the scopes it finds, the ones a previous
// rebuild found and the ones added since), while adds go to both filters.
// A filter that the scan overfills (at open, or after much growth) is
// built once more at the size the scan found.
func (s *LedgerStore) rebuildFilter(ctx context.Context) error {
	scopes := max(s.filterScopes.Load(), s.filter.added())
	for {
		b := s.filter.startRebuild(int(scopes))
		n := int64(0)
		err := s.db.View(ctx, func(tx *chain.Tx) error {
			for _, prefix := range [][]byte{prefixRecord, prefixRetries} {
				for kv, err := range tx.StateScan(prefix, prefixEnd(prefix), false) {
					if err != nil {
						return err
					}
					if h1, h2, ok := s.filter.keyHashes(kv.Key[len(prefix):]); ok {
						b.add(h1, h2)
						n++
					}
				}
			}
			return nil
		})
		if err == nil && n > b.sized {
			s.filter.finishRebuild(b, false)
			scopes = n
			continue
		}
		s.filter.finishRebuild(b, err == nil)
		if err == nil {
			s.filterScopes.Store(n)
		}
		return err
	}
}

// Abandon implements Store: the lease, in memory, is dropped; nothing is
// written, so it works on a full disk.
func (s *LedgerStore) Abandon(ctx context.Context, scope Scope, token string, now time.Time) error {
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
	if l.committing {
		return ErrLeaseLost // its outcome is being written
	}
	delete(sh.m, scope)
	return nil
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

// DeleteExpired implements Store. It scans the records in transactions
// that each examine at most cleanupScanMax of them and delete at most
// cleanupBatchMax, written through the group commit beside the writers'
// requests.
func (s *LedgerStore) DeleteExpired(ctx context.Context, now time.Time, limit int) (int, error) {
	deleted := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for scope, l := range sh.m {
			if deleted < limit && l.rec.expired(now) && !l.committing {
				delete(sh.m, scope)
				deleted++
			}
		}
		sh.mu.Unlock()
	}
	start := prefixRecord
	for deleted < limit && start != nil {
		batch := min(limit-deleted, cleanupBatchMax)
		var next []byte
		n := 0
		err := s.db.Update(ctx, func(tx *chain.Tx) error {
			n, next = 0, nil
			var keys [][]byte
			examined := 0
			for kv, err := range tx.StateScan(start, prefixEnd(prefixRecord), false) {
				if err != nil {
					return err
				}
				if examined == cleanupScanMax || len(keys) == batch {
					next = bytes.Clone(kv.Key)
					break
				}
				examined++
				if len(kv.Value) < recordExpiryEnd || !now.Before(recordExpiry(kv.Value)) {
					keys = append(keys, bytes.Clone(kv.Key))
				}
			}
			// No record is stored beside a lease (Create deletes the
			// expired one it replaces), so each key is one record.
			for _, k := range keys {
				if err := tx.StateDelete(k); err != nil {
					return err
				}
			}
			n = len(keys)
			return s.deleteExpiredRetries(tx, now, batch)
		})
		if err != nil {
			return deleted, err
		}
		deleted += n
		start = next
	}
	return deleted, s.rebuildFilter(ctx)
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
	return firstInScopeOrder(out, limit), nil
}
