package outbox

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/ledgerworks/ledger/chain"
)

// stateStore is what the transitions (apply.go) read and write: a write
// transaction's state keyspace (txState), or the memory a check rebuilds
// the state in (memState). One set of transitions serves both, so the
// stored state and the state rebuilt from the chains cannot drift apart.
type stateStore interface {
	get(key []byte) (value []byte, found bool, err error)
	put(key, value []byte) error
	del(key []byte) error
	// queueHead returns the value (a message id) and key of the first
	// entry with the prefix of an ordering key's queue.
	queueHead(prefix []byte) (value, key []byte, found bool, err error)
}

// txState is a transaction's state keyspace. cache, when set, holds the
// keys one operation read or wrote, so that a batch of a thousand
// transitions reads each record and its topic's floor once (on PostgreSQL
// every read the transaction has not written is a round trip); records
// holds the messages' records it read or wrote, decoded (getRecord and
// putRecord keep them there instead of in cache, so that a transition
// neither builds a record's key nor decodes it again). Only the operation
// writes these keys while it runs: the transaction is its own.
type txState struct {
	tx      *chain.Tx
	cache   map[string][]byte // nil value: absent
	records map[ID]record
}

// newTxState returns a txState with a cache of keys, for one operation.
func newTxState(tx *chain.Tx) txState { return txState{tx: tx, cache: map[string][]byte{}} }

// newTxStateSized returns a txState with both caches, with room for an
// operation on n messages (each message's record and one index key), so
// that a batch of a thousand does not grow them step by step.
func newTxStateSized(tx *chain.Tx, n int) txState {
	return txState{tx: tx, cache: make(map[string][]byte, n+4), records: make(map[ID]record, n)}
}

func (s txState) get(key []byte) ([]byte, bool, error) {
	if s.cache == nil {
		return s.getStored(key)
	}
	if v, ok := s.cache[string(key)]; ok {
		return v, v != nil, nil
	}
	v, found, err := s.getStored(key)
	if err == nil {
		s.remember(key, v, found)
	}
	return v, found, err
}

// remember caches a key's value (found) or its absence.
func (s txState) remember(key, value []byte, found bool) {
	var v []byte
	if found {
		v = append([]byte{}, value...) // non-nil, even when empty
	}
	s.cache[string(key)] = v
}

func (s txState) getStored(key []byte) ([]byte, bool, error) {
	v, err := s.tx.StateGet(key)
	if errors.Is(err, chain.ErrNotFound) {
		return nil, false, nil
	}
	return v, err == nil, err
}

// put writes a key. The cache keeps value itself, not a copy: every
// transition puts a slice it has just encoded and never changes it after.
func (s txState) put(key, value []byte) error {
	if s.cache != nil {
		if value == nil {
			value = []byte{} // nil in the cache is an absence
		}
		s.cache[string(key)] = value
	}
	return s.tx.StatePut(key, value)
}

func (s txState) del(key []byte) error {
	if s.cache != nil {
		s.remember(key, nil, false)
	}
	return s.tx.StateDelete(key)
}

func (s txState) queueHead(prefix []byte) ([]byte, []byte, bool, error) {
	for kv, err := range s.tx.StateScan(prefix, prefixEnd(prefix), false) {
		if err != nil {
			return nil, nil, false, err
		}
		return bytes.Clone(kv.Value), bytes.Clone(kv.Key), true, nil
	}
	return nil, nil, false, nil
}

// memState is state rebuilt in memory. Ordering-key queues are kept as
// sorted seqs beside the map, so that a queue's head is found without a
// scan.
type memState struct {
	kv     map[string][]byte
	queues map[string][]uint64 // queue prefix -> seqs, ascending
}

func newMemState() *memState {
	return &memState{kv: map[string][]byte{}, queues: map[string][]uint64{}}
}

// queueOf splits a key of an ordering-key queue into its prefix and seq.
func queueOf(key []byte) (prefix string, seq uint64, ok bool) {
	if len(key) < 8 || !isQueueKey(key) {
		return "", 0, false
	}
	return string(key[:len(key)-8]), binary.BigEndian.Uint64(key[len(key)-8:]), true
}

// isQueueKey reports whether key is outbox/<tenant>/k/<topic>/....
func isQueueKey(key []byte) bool {
	parts := bytes.SplitN(key, []byte("/"), 4)
	return len(parts) == 4 && string(parts[0]) == Domain && string(parts[2]) == stateKeyQ
}

func (m *memState) get(key []byte) ([]byte, bool, error) {
	v, ok := m.kv[string(key)]
	return v, ok, nil
}

func (m *memState) put(key, value []byte) error {
	k := string(key)
	if _, exists := m.kv[k]; !exists {
		if prefix, seq, ok := queueOf(key); ok {
			q := m.queues[prefix]
			i := sort.Search(len(q), func(i int) bool { return q[i] >= seq })
			m.queues[prefix] = slices.Insert(q, i, seq)
		}
	}
	m.kv[k] = bytes.Clone(value)
	return nil
}

func (m *memState) del(key []byte) error {
	k := string(key)
	if _, exists := m.kv[k]; !exists {
		return nil
	}
	delete(m.kv, k)
	if prefix, seq, ok := queueOf(key); ok {
		q := m.queues[prefix]
		if i, found := slices.BinarySearch(q, seq); found {
			q = slices.Delete(q, i, i+1)
		}
		if len(q) == 0 {
			delete(m.queues, prefix)
		} else {
			m.queues[prefix] = q
		}
	}
	return nil
}

func (m *memState) queueHead(prefix []byte) ([]byte, []byte, bool, error) {
	q := m.queues[string(prefix)]
	if len(q) == 0 {
		return nil, nil, false, nil
	}
	key := binary.BigEndian.AppendUint64(bytes.Clone(prefix), q[0])
	return m.kv[string(key)], key, true, nil
}

// getRecord reads a message's record; ErrUnknownMessage when it has none.
func getRecord(s stateStore, tenant string, id ID) (record, error) {
	ts, cached := s.(txState)
	cached = cached && ts.records != nil
	if cached {
		if r, ok := ts.records[id]; ok {
			return r, nil
		}
	}
	var v []byte
	var found bool
	var err error
	if cached {
		v, found, err = ts.getStored(recordKey(tenant, id))
	} else {
		v, found, err = s.get(recordKey(tenant, id))
	}
	if err != nil {
		return record{}, err
	}
	if !found {
		return record{}, invalid("id", ErrUnknownMessage, "no message %s", id)
	}
	r, err := decodeRecord(v)
	if err != nil {
		return record{}, fmt.Errorf("outbox: record of %s: %w", id, err)
	}
	if cached {
		ts.records[id] = r
	}
	return r, nil
}

func putRecord(s stateStore, tenant string, id ID, r *record) error {
	if ts, ok := s.(txState); ok && ts.records != nil {
		ts.records[id] = *r
		return ts.tx.StatePut(recordKey(tenant, id), r.encode())
	}
	return s.put(recordKey(tenant, id), r.encode())
}

// prefetchRecords reads the records of the messages ids that s does not
// hold yet into its cache, together (one round trip on PostgreSQL rather
// than one a message), for an operation about to read them one by one. A
// message with no record is left out, for getRecord to report. The caller
// has locked the topic's deliveries chain head first, which every writer
// of an existing record locks too (claims, outcomes, heartbeats,
// requeues), so the batch, which locks no row, reads the newest records.
func prefetchRecords(s txState, tenant string, ids []ID) error {
	if s.records == nil {
		return nil
	}
	keys := make([][]byte, 0, len(ids))
	want := make([]ID, 0, len(ids))
	asked := make(map[ID]bool, len(ids))
	for _, id := range ids {
		if _, ok := s.records[id]; ok || asked[id] {
			continue
		}
		asked[id] = true
		want = append(want, id)
		keys = append(keys, recordKey(tenant, id))
	}
	var bad error
	err := s.tx.StateGetBatch(keys, func(i int, v []byte) {
		r, err := decodeRecord(v)
		if err != nil {
			bad = cmp.Or(bad, fmt.Errorf("outbox: record of %s: %w", want[i], err))
			return
		}
		s.records[want[i]] = r
	})
	return cmp.Or(err, bad)
}

// rememberRecord puts a record read with an index (a ready key's copy)
// in s's cache, when it has one, as if getRecord had read it.
func rememberRecord(s txState, id ID, encoded []byte) error {
	if s.records == nil {
		return nil
	}
	r, err := decodeRecord(encoded)
	if err != nil {
		return fmt.Errorf("outbox: ready key's record of %s: %w", id, err)
	}
	s.records[id] = r
	return nil
}
