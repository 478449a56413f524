package apikey

import (
	"fmt"

	"github.com/ledgerworks/ledger/chain"
)

// keySet is the keys the system chain's entries give, replayed in seq
// order. Check and Rebuild derive the state from it and the Authenticator
// answers from it, so the three cannot disagree on what an entry means.
type keySet struct {
	records map[string]*record // by id; a record is replaced, never changed
	seq     uint64             // the last entry applied
	hash    chain.Hash         // its hash (the genesis while seq is 0)
}

func newKeySet() *keySet {
	return &keySet{records: map[string]*record{}, hash: chain.Genesis(SystemChain)}
}

// link checks that e is the next entry of the chain and that its hash is
// its own: an entry edited in place, dropped or inserted is refused.
func (s *keySet) link(e *chain.Entry) error {
	if e.Seq != s.seq+1 {
		return &systemChainError{seq: e.Seq, reason: fmt.Sprintf("follows seq %d", s.seq)}
	}
	if e.PrevHash != s.hash {
		return &systemChainError{seq: e.Seq, reason: "prev_hash is not the hash of the entry before"}
	}
	if e.ComputeHash() != e.Hash {
		return &systemChainError{seq: e.Seq, reason: "hash does not match the entry"}
	}
	return nil
}

// apply applies one entry of the system chain and returns the record it
// made, or says why the entry does not fit the keys before it; nothing
// changes then. It does not check the linkage (link does).
func (s *keySet) apply(e *chain.Entry) (*record, error) {
	switch e.Type {
	case TypeCreate:
		p, err := decodeCreate(e.Payload)
		if err != nil {
			return nil, err
		}
		if e.IdempotencyKey != createKey(p.ID) {
			return nil, fmt.Errorf("creation of %s with idempotency key %q", p.ID, e.IdempotencyKey)
		}
		if s.records[p.ID] != nil {
			return nil, fmt.Errorf("key %s created twice", p.ID)
		}
		if len(s.records) >= KeysMax {
			return nil, fmt.Errorf("more than %d keys", KeysMax)
		}
		r := &record{Key: Key{ID: p.ID, Tenant: p.Tenant, Name: p.Name, Scopes: p.Scopes,
			CreatedUnixNano: e.TimeUnixNano}, Digest: p.Digest}
		s.records[p.ID] = r
		return r, nil
	case TypeRevoke:
		p, err := decodeRevoke(e.Payload)
		if err != nil {
			return nil, err
		}
		if e.IdempotencyKey != revokeKey(p.ID) {
			return nil, fmt.Errorf("revocation of %s with idempotency key %q", p.ID, e.IdempotencyKey)
		}
		old := s.records[p.ID]
		if old == nil {
			return nil, fmt.Errorf("revocation of unknown key %s", p.ID)
		}
		if old.Key.Revoked() {
			return nil, fmt.Errorf("key %s revoked twice", p.ID)
		}
		r := *old
		r.Key.RevokedUnixNano, r.Key.RevokedReason = e.TimeUnixNano, p.Reason
		s.records[p.ID] = &r
		return &r, nil
	}
	return nil, fmt.Errorf("type %q", e.Type)
}

// advance records e as the last entry seen.
func (s *keySet) advance(e *chain.Entry) { s.seq, s.hash = e.Seq, e.Hash }

// state is the derived state the keys give: state key -> value.
func (s *keySet) state() map[string][]byte {
	out := make(map[string][]byte, 2*len(s.records)+1)
	for id, r := range s.records {
		out[string(recordKey(id))] = encodeRecord(r)
		out[string(tenantKey(r.Key.Tenant, id))] = []byte{}
	}
	if len(s.records) > 0 {
		out[string(countKey())] = countValue(len(s.records))
	}
	return out
}
