package apikey_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/chain"
)

// The keys against a plain model: every answer of Create, Revoke, List and
// Authenticate is predicted, the ledger is closed and opened again at
// random, and after every step the stored state equals the state the
// system chain gives (apikey.Check) and the chains verify.

type modelKey struct {
	key   apikey.Key
	token string
	// creator is the key that asked for this one (CreateRequest.By); nil
	// for the operator's keys.
	creator *modelKey
}

type keyMachine struct {
	open func() (*chain.DB, error)
	db   *chain.DB
	auth *apikey.Authenticator
	keys []*modelKey // in creation order
}

var (
	modelTenants = []string{"acme", "globex"}
	modelScopes  = []apikey.Scope{apikey.ScopeRead, apikey.ScopeWrite, apikey.ScopeAdmin}
)

func (m *keyMachine) start(t *rapid.T) {
	var err error
	if m.db, err = m.open(); err != nil {
		t.Fatal(err)
	}
	if m.auth, err = apikey.NewAuthenticator(m.db, apikey.AuthOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (m *keyMachine) stop() {
	m.auth.Close()
	m.db.Close()
}

func (m *keyMachine) Create(t *rapid.T) {
	tenant := rapid.SampledFrom(modelTenants).Draw(t, "tenant")
	scopes := rapid.SliceOfNDistinct(rapid.SampledFrom(modelScopes), 0, 3, func(s apikey.Scope) apikey.Scope { return s }).Draw(t, "scopes")
	name := rapid.SampledFrom([]string{"", "erp", "nightly sync", "bad\x00name"}).Draw(t, "name")
	key, token, err := apikey.Create(context.Background(), m.db, apikey.CreateRequest{Tenant: tenant, Name: name, Scopes: scopes})
	switch {
	case len(scopes) == 0:
		if !errors.Is(err, apikey.ErrInvalidScope) || !errors.Is(err, chain.ErrInvalid) {
			t.Fatalf("create without scopes: %v", err)
		}
		return
	case strings.Contains(name, "\x00"):
		if !errors.Is(err, apikey.ErrInvalidName) {
			t.Fatalf("create with a control character in the name: %v", err)
		}
		return
	case err != nil:
		t.Fatalf("create: %v", err)
	}
	want := slices.DeleteFunc(slices.Clone(modelScopes), func(s apikey.Scope) bool { return !slices.Contains(scopes, s) })
	if key.Tenant != tenant || key.Name != name || !slices.Equal(key.Scopes, want) || key.Revoked() || key.CreatedUnixNano == 0 {
		t.Fatalf("created %+v for %s %q %v", key, tenant, name, scopes)
	}
	m.keys = append(m.keys, &modelKey{key: key, token: token})
}

func (m *keyMachine) Revoke(t *rapid.T) {
	if len(m.keys) == 0 || rapid.IntRange(0, 5).Draw(t, "unknown") == 0 {
		id := fmt.Sprintf("%016x", rapid.Uint64().Draw(t, "id"))
		if m.find(id) != nil {
			return
		}
		if _, err := apikey.Revoke(context.Background(), m.db, id, "gone"); !errors.Is(err, apikey.ErrUnknownKey) || !errors.Is(err, chain.ErrNotFound) {
			t.Fatalf("revoke of an unknown id: %v", err)
		}
		return
	}
	k := rapid.SampledFrom(m.keys).Draw(t, "key")
	reason := rapid.SampledFrom([]string{"", "rotated", "leaked"}).Draw(t, "reason")
	got, err := apikey.Revoke(context.Background(), m.db, k.key.ID, reason)
	if err != nil {
		t.Fatalf("revoke: %v", err)
	}
	if !k.key.Revoked() {
		if !got.Revoked() || got.RevokedReason != reason {
			t.Fatalf("revoked %+v, reason %q", got, reason)
		}
		k.key = got
	}
	if diff := cmp.Diff(k.key, got); diff != "" {
		t.Fatalf("revoke answered (-model +got):\n%s", diff)
	}
}

// mayAct is the model of CreateRequest.By and RevokeRequest.By: the
// asking key is valid, of the tenant, and holds every scope.
func mayAct(by *modelKey, tenant string, scopes []apikey.Scope) bool {
	if by.key.Revoked() || by.key.Tenant != tenant {
		return false
	}
	for _, sc := range scopes {
		if !by.key.Has(sc) {
			return false
		}
	}
	return true
}

// CreateBy is a create asked by a key, as over the API: it succeeds
// exactly when the asking key holds every scope asked for.
func (m *keyMachine) CreateBy(t *rapid.T) {
	if len(m.keys) == 0 {
		return
	}
	by := rapid.SampledFrom(m.keys).Draw(t, "by")
	tenant := rapid.SampledFrom(append([]string{by.key.Tenant, by.key.Tenant}, modelTenants...)).Draw(t, "tenant")
	scopes := rapid.SliceOfNDistinct(rapid.SampledFrom(modelScopes), 1, 3, func(s apikey.Scope) apikey.Scope { return s }).Draw(t, "scopes")
	key, token, err := apikey.Create(context.Background(), m.db, apikey.CreateRequest{Tenant: tenant, Name: "by", Scopes: scopes, By: by.key.ID})
	if !mayAct(by, tenant, scopes) {
		if !errors.Is(err, apikey.ErrScopeNotHeld) {
			t.Fatalf("key %+v created %s %v: %+v %v, want ErrScopeNotHeld", by.key, tenant, scopes, key, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("create by %+v of %v: %v", by.key, scopes, err)
	}
	m.keys = append(m.keys, &modelKey{key: key, token: token, creator: by})
}

// RevokeBy is a revocation asked by a key: it succeeds exactly when the
// asking key holds every scope of the revoked one.
func (m *keyMachine) RevokeBy(t *rapid.T) {
	if len(m.keys) == 0 {
		return
	}
	by := rapid.SampledFrom(m.keys).Draw(t, "by")
	k := rapid.SampledFrom(m.keys).Draw(t, "key")
	got, err := apikey.RevokeIn(context.Background(), m.db, apikey.RevokeRequest{ID: k.key.ID, Reason: "by", By: by.key.ID})
	if !mayAct(by, k.key.Tenant, k.key.Scopes) {
		if !errors.Is(err, apikey.ErrScopeNotHeld) {
			t.Fatalf("key %+v revoked %+v: %v, want ErrScopeNotHeld", by.key, k.key, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("revoke by %+v of %+v: %v", by.key, k.key, err)
	}
	if !k.key.Revoked() {
		k.key = got
	}
	if !got.Revoked() {
		t.Fatalf("revoked %+v", got)
	}
}

func (m *keyMachine) Authenticate(t *rapid.T) {
	ctx := context.Background()
	if len(m.keys) == 0 {
		return
	}
	k := rapid.SampledFrom(m.keys).Draw(t, "key")
	token := k.token
	valid := !k.key.Revoked()
	switch how := rapid.SampledFrom([]string{"right", "right", "secret", "id", "malformed"}).Draw(t, "how"); how {
	case "secret": // another secret, same id
		i := rapid.IntRange(len(token)-apikey.SecretTextLength, len(token)-2).Draw(t, "at")
		c := byte('A')
		if token[i] == c {
			c = 'B'
		}
		token, valid = token[:i]+string(c)+token[i+1:], false
	case "id": // the secret of one key with the id of another
		other := rapid.SampledFrom(m.keys).Draw(t, "other")
		if other.key.ID == k.key.ID {
			return
		}
		token, valid = strings.Replace(token, k.key.ID, other.key.ID, 1), false
	case "malformed":
		token = rapid.SampledFrom([]string{"", token[:len(token)-1], token + "A", strings.ToUpper(token), "lwk_" + k.key.ID, "Bearer " + token}).Draw(t, "token")
		valid = false
	}
	got, err := m.auth.Authenticate(ctx, token)
	if !valid {
		if !errors.Is(err, apikey.ErrUnauthenticated) {
			t.Fatalf("token %q (key revoked %v): %+v %v", token, k.key.Revoked(), got, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("authenticate: %v", err)
	}
	if diff := cmp.Diff(k.key, got); diff != "" {
		t.Fatalf("authenticated (-model +got):\n%s", diff)
	}
}

// Reopen closes the ledger and the Authenticator and opens both again:
// every key survives, with its token. It is drawn as often as any action
// but reopens one time in three: on PostgreSQL an opening is a new
// connection pool.
func (m *keyMachine) Reopen(t *rapid.T) {
	if rapid.IntRange(0, 2).Draw(t, "reopen") != 0 {
		return
	}
	m.stop()
	m.start(t)
}

func (m *keyMachine) find(id string) *modelKey {
	for _, k := range m.keys {
		if k.key.ID == id {
			return k
		}
	}
	return nil
}

func (m *keyMachine) Check(t *rapid.T) {
	ctx := context.Background()
	all, err := apikey.List(ctx, m.db, "")
	if err != nil {
		t.Fatal(err)
	}
	var want []apikey.Key
	for _, tenant := range modelTenants {
		var ofTenant []apikey.Key
		for _, k := range m.keys {
			if k.key.Tenant == tenant {
				ofTenant = append(ofTenant, k.key)
			}
		}
		// List's order: creation time, then id (times of entries may tie).
		slices.SortStableFunc(ofTenant, func(a, b apikey.Key) int {
			return cmpOr(a.CreatedUnixNano-b.CreatedUnixNano, strings.Compare(a.ID, b.ID))
		})
		got, err := apikey.List(ctx, m.db, tenant)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(ofTenant, got); diff != "" {
			t.Fatalf("list %s (-model +got):\n%s", tenant, diff)
		}
		want = append(want, ofTenant...)
	}
	if diff := cmp.Diff(want, all); diff != "" {
		t.Fatalf("list (-model +got):\n%s", diff)
	}
	failures, err := apikey.Check(ctx, m.db)
	if err != nil || len(failures) > 0 {
		t.Fatalf("check: %v %v", failures, err)
	}
	// Scopes never widen: no key holds a scope its creator lacks.
	for _, k := range m.keys {
		for _, sc := range k.key.Scopes {
			if k.creator != nil && !k.creator.key.Has(sc) {
				t.Fatalf("key %+v holds %s, its creator %+v does not", k.key, sc, k.creator.key)
			}
		}
	}
}

func TestKeysAgainstModel(t *testing.T) {
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			checks := s.checks
			if checksExplicit {
				checks = 0 // rapid's flag decides
			}
			run := func(rt *rapid.T) {
				m := &keyMachine{open: s.fresh(t).open}
				m.start(rt)
				defer m.stop()
				rt.Repeat(rapid.StateMachineActions(m))
				report, err := m.db.Verify(context.Background(), chain.VerifyOptions{})
				if err != nil || !report.OK() {
					rt.Fatalf("verify: %v %v", report.Failures, err)
				}
			}
			if checks > 0 {
				rapidCheck(t, checks, run)
				return
			}
			rapid.Check(t, run)
		})
	}
}

func cmpOr(d int64, c int) int {
	switch {
	case d < 0:
		return -1
	case d > 0:
		return 1
	}
	return c
}
