package idempotencytest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/ledgerworks/ledger/idempotency"
)

// modelRecord is the plain model of one scope's record.
type modelRecord struct {
	status    idempotency.Status
	token     string
	hash      byte
	attempt   int
	lease     time.Time
	expiresAt time.Time
}

type modelRetries struct {
	n         int
	expiresAt time.Time
}

// machine drives a store and a plain model of it with the same calls.
type machine struct {
	store   idempotency.Store
	now     time.Time
	records map[idempotency.Scope]*modelRecord
	retries map[idempotency.Scope]modelRetries
	tokens  int
}

var machineScopes = []idempotency.Scope{
	{Operation: "op", User: "u1", Key: "a"}, {Operation: "op", User: "u1", Key: "b"},
	{Operation: "op", User: "u2", Key: "a"}, {Operation: "op2", User: "u1", Key: "a"},
}

const machineMaxRetries = 3

func (m *machine) live(s idempotency.Scope) *modelRecord {
	r, ok := m.records[s]
	if !ok || !m.now.Before(r.expiresAt) {
		return nil
	}
	return r
}

func (m *machine) held(s idempotency.Scope, token string) *modelRecord {
	r := m.live(s)
	if r == nil || r.status != idempotency.StatusProcessing || r.token != token {
		return nil
	}
	return r
}

func (m *machine) liveRetries(s idempotency.Scope) int {
	rc, ok := m.retries[s]
	if !ok || !m.now.Before(rc.expiresAt) {
		return 0
	}
	return rc.n
}

// release applies a transient failure to the model; it reports whether it
// poisoned the key.
func (m *machine) release(s idempotency.Scope, r *modelRecord) bool {
	n := m.liveRetries(s) + 1
	m.retries[s] = modelRetries{n, m.now.Add(ttl)}
	if n >= machineMaxRetries {
		r.status, r.expiresAt = idempotency.StatusFailed, m.now.Add(ttl)
		return true
	}
	delete(m.records, s)
	return false
}

// token returns a token some attempt held (or a fresh one).
func (m *machine) token(t *rapid.T, s idempotency.Scope) string {
	if r, ok := m.records[s]; ok && rapid.Bool().Draw(t, "current token") {
		return r.token
	}
	return fmt.Sprint("t", rapid.IntRange(0, m.tokens).Draw(t, "token"))
}

func leaseErr(want bool, err error) error {
	if want && err != nil {
		return fmt.Errorf("store refused a held lease: %v", err)
	}
	if !want && !errors.Is(err, idempotency.ErrLeaseLost) {
		return fmt.Errorf("store accepted a lease it does not hold (err %v)", err)
	}
	return nil
}

func (m *machine) actions(ctx context.Context) map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"Create": func(t *rapid.T) {
			s := rapid.SampledFrom(machineScopes).Draw(t, "scope")
			hash := rapid.ByteRange(1, 2).Draw(t, "hash")
			m.tokens++
			tok := fmt.Sprint("t", m.tokens)
			res, err := m.store.Create(ctx, idempotency.Claim{Scope: s, RequestHash: [32]byte{hash}, Token: tok, Now: m.now,
				LeaseExpiresAt: m.now.Add(lease), ExpiresAt: m.now.Add(ttl)})
			if err != nil {
				t.Fatal(err)
			}
			if r := m.live(s); r != nil {
				if res.Created || res.Record.Status != r.status || res.Record.Token != r.token || res.Record.RequestHash != [32]byte{r.hash} {
					t.Fatalf("Create over %+v: %+v", r, res)
				}
				return
			}
			r := &modelRecord{idempotency.StatusProcessing, tok, hash, m.liveRetries(s) + 1, m.now.Add(lease), m.now.Add(ttl)}
			if !res.Created || res.Record.Attempt != r.attempt {
				t.Fatalf("Create of a free scope: %+v, want created with attempt %d", res, r.attempt)
			}
			m.records[s] = r
		},
		"Succeed": func(t *rapid.T) {
			s := rapid.SampledFrom(machineScopes).Draw(t, "scope")
			tok := m.token(t, s)
			r := m.held(s, tok)
			err := m.store.Succeed(ctx, s, tok, idempotency.Response{Status: 201, Body: []byte(tok)}, m.now.Add(ttl), m.now)
			if e := leaseErr(r != nil, err); e != nil {
				t.Fatal(e)
			}
			if r != nil {
				r.status, r.expiresAt = idempotency.StatusSuccess, m.now.Add(ttl)
			}
		},
		"Fail": func(t *rapid.T) {
			s := rapid.SampledFrom(machineScopes).Draw(t, "scope")
			tok := m.token(t, s)
			r := m.held(s, tok)
			if e := leaseErr(r != nil, m.store.Fail(ctx, s, tok, "declined", m.now.Add(ttl), m.now)); e != nil {
				t.Fatal(e)
			}
			if r != nil {
				r.status, r.expiresAt = idempotency.StatusFailed, m.now.Add(ttl)
			}
		},
		"Release": func(t *rapid.T) {
			s := rapid.SampledFrom(machineScopes).Draw(t, "scope")
			tok := m.token(t, s)
			r := m.held(s, tok)
			res, err := m.store.Release(ctx, s, tok, machineMaxRetries, m.now.Add(ttl), m.now)
			if e := leaseErr(r != nil, err); e != nil {
				t.Fatal(e)
			}
			if r != nil {
				if poisoned := m.release(s, r); res.Poisoned != poisoned {
					t.Fatalf("Release: poisoned %v, model %v", res.Poisoned, poisoned)
				}
			}
		},
		"Abandon": func(t *rapid.T) {
			s := rapid.SampledFrom(machineScopes).Draw(t, "scope")
			tok := m.token(t, s)
			r := m.held(s, tok)
			if e := leaseErr(r != nil, m.store.Abandon(ctx, s, tok, m.now)); e != nil {
				t.Fatal(e)
			}
			if r != nil {
				delete(m.records, s) // the retry count stays
			}
		},
		"Extend": func(t *rapid.T) {
			s := rapid.SampledFrom(machineScopes).Draw(t, "scope")
			tok := m.token(t, s)
			r := m.held(s, tok)
			if e := leaseErr(r != nil, m.store.Extend(ctx, s, tok, m.now.Add(lease), m.now)); e != nil {
				t.Fatal(e)
			}
			if r != nil {
				r.lease = m.now.Add(lease)
			}
		},
		"RecoverStuck": func(t *rapid.T) {
			want := 0
			for s, r := range m.records {
				if m.live(s) != nil && r.status == idempotency.StatusProcessing && !r.lease.After(m.now) {
					m.release(s, r)
					want++
				}
			}
			n, err := m.store.RecoverStuck(ctx, m.now, 100, machineMaxRetries, m.now.Add(ttl), m.now)
			if err != nil || n != want {
				t.Fatalf("RecoverStuck: %d, %v, want %d", n, err, want)
			}
		},
		"DeleteExpired": func(t *rapid.T) {
			want := 0
			for s := range m.records {
				if m.live(s) == nil {
					delete(m.records, s)
					want++
				}
			}
			n, err := m.store.DeleteExpired(ctx, m.now, 100)
			if err != nil || n != want {
				t.Fatalf("DeleteExpired: %d, %v, want %d", n, err, want)
			}
		},
		"Advance": func(t *rapid.T) {
			m.now = m.now.Add(time.Duration(rapid.IntRange(1, int(2*ttl/time.Second)).Draw(t, "seconds")) * time.Second / 4)
		},
		"": func(t *rapid.T) { m.check(t, ctx) },
	}
}

func (m *machine) check(t *rapid.T, ctx context.Context) {
	for _, s := range machineScopes {
		got, err := m.store.Get(ctx, s, m.now)
		r := m.live(s)
		if r == nil {
			if !errors.Is(err, idempotency.ErrNotFound) {
				t.Fatalf("Get(%v): %+v, %v; model has no record", s, got, err)
			}
			continue
		}
		if err != nil || got.Status != r.status || got.Token != r.token || got.Attempt != r.attempt || got.RequestHash != [32]byte{r.hash} {
			t.Fatalf("Get(%v): %+v, %v; model %+v", s, got, err, r)
		}
	}
}

// StateMachine checks stores of h against a plain model under random
// sequences of every Store call and of the clock.
func StateMachine(t *testing.T, h Harness) {
	rapid.Check(t, func(rt *rapid.T) {
		tt := t // stores are opened for the outer test: rapid.T has no Cleanup
		m := &machine{store: h.Open(tt), now: NewClock().Now(), records: map[idempotency.Scope]*modelRecord{}, retries: map[idempotency.Scope]modelRetries{}}
		rt.Repeat(m.actions(context.Background()))
	})
}
