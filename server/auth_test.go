package server_test

import (
	"net/http"
	"testing"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/server"
)

// A second tenant's key sees none of the first tenant's chains, and the
// first tenant's Idempotency-Key with the same body is its own request.
func TestTenantIsolation(t *testing.T) {
	forEachBackend(t, server.Options{}, func(t *testing.T, ts *testServer) {
		acme, globex := ts.key("acme", writer...), ts.key("globex", writer...)
		body := api.AppendRequest{Type: "order/v1", Payload: []byte("secret")}
		first := ts.do(http.MethodPost, "/v1/chains/orders/entries", acme, "shared-key", body)
		if first.status != http.StatusCreated {
			t.Fatalf("acme's append: %d %s", first.status, first.body)
		}
		for _, path := range []string{"/v1/chains/orders/head", "/v1/chains/orders/entries/1", "/v1/chains/orders/entries"} {
			ts.do(http.MethodGet, path, globex, "", nil).wantProblem(t, http.StatusNotFound, api.CodeNotFound)
		}
		// Neither a chain path nor its encoded form reaches another tenant.
		for _, path := range []string{"/v1/chains/..%2Facme%2Forders/head", "/v1/chains/%2E%2E/acme/orders/head"} {
			if r := ts.do(http.MethodGet, path, globex, "", nil); r.status == http.StatusOK {
				t.Fatalf("%s: %d %s", path, r.status, r.body)
			}
		}
		again := ts.do(http.MethodPost, "/v1/chains/orders/entries", globex, "shared-key", body)
		if again.status != http.StatusCreated || again.header.Get(api.HeaderReplayed) != "" {
			t.Fatalf("globex with acme's key: %d %q %s", again.status, again.header.Get(api.HeaderReplayed), again.body)
		}
		var a, g api.Head
		ts.do(http.MethodGet, "/v1/chains/orders/head", acme, "", nil).decode(t, http.StatusOK, &a)
		ts.do(http.MethodGet, "/v1/chains/orders/head", globex, "", nil).decode(t, http.StatusOK, &g)
		if a.Seq != 1 || g.Seq != 1 || a.Hash == g.Hash {
			t.Fatalf("heads acme %+v globex %+v: want one entry each, on two chains", a, g)
		}
		// Another key of the same tenant does not replay the first key's
		// requests either: the guard's user is the tenant and the key id.
		other := ts.key("acme", writer...)
		if r := ts.do(http.MethodPost, "/v1/chains/orders/entries", other, "shared-key", body); r.header.Get(api.HeaderReplayed) != "" {
			t.Fatalf("another key of acme replayed the first key's request: %s", r.body)
		}
	})
}

// Missing, malformed, unknown and revoked keys are 401; a key without the
// route's scope is 403; neither writes anything.
func TestAuthenticationAndScopes(t *testing.T) {
	db := openBolt(t)
	ts := startServer(t, db, server.Options{})
	reader := ts.key("acme", apikey.ScopeRead)
	admin := ts.key("acme", apikey.ScopeAdmin)
	body := api.AppendRequest{Type: "t", Payload: []byte("p")}
	for _, token := range []string{"", "nonsense", "lwk_0000000000000000_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"} {
		r := ts.do(http.MethodPost, "/v1/chains/c/entries", token, "k", body)
		r.wantProblem(t, http.StatusUnauthorized, api.CodeUnauthenticated)
		if r.header.Get("WWW-Authenticate") == "" {
			t.Fatalf("401 without WWW-Authenticate")
		}
	}
	ts.do(http.MethodPost, "/v1/chains/c/entries", reader, "k", body).wantProblem(t, http.StatusForbidden, api.CodeForbidden)
	ts.do(http.MethodGet, "/v1/chains/c/head", admin, "", nil).wantProblem(t, http.StatusForbidden, api.CodeForbidden)
	ts.do(http.MethodGet, "/v1/apikeys", reader, "", nil).wantProblem(t, http.StatusForbidden, api.CodeForbidden)
	ts.do(http.MethodPost, "/v1/verify", reader, "", nil).wantProblem(t, http.StatusForbidden, api.CodeForbidden)
	ts.do(http.MethodGet, "/v1/chains/c/head", reader, "", nil).wantProblem(t, http.StatusNotFound, api.CodeNotFound)

	// Keys over the API: an operator's key creates a key of its own
	// tenant (with scopes it holds), lists and revokes it; the revoked
	// token is refused at once.
	operator := ts.key("acme", apikey.ScopeRead, apikey.ScopeWrite, apikey.ScopeAdmin)
	var created api.APIKeyCreated
	ts.do(http.MethodPost, "/v1/apikeys", operator, "new-key", api.APIKeyRequest{Name: "erp", Scopes: []string{"read", "write"}}).
		decode(t, http.StatusCreated, &created)
	if created.Key.Tenant != "acme" || created.Token == "" {
		t.Fatalf("created %+v", created)
	}
	var replayed api.APIKeyCreated
	ts.do(http.MethodPost, "/v1/apikeys", operator, "new-key", api.APIKeyRequest{Name: "erp", Scopes: []string{"read", "write"}}).
		decode(t, http.StatusCreated, &replayed)
	if replayed.Token != created.Token || replayed.Key.ID != created.Key.ID {
		t.Fatalf("a retried create made another key: %+v", replayed)
	}
	if r := ts.do(http.MethodPost, "/v1/chains/c/entries", created.Token, "k", body); r.status != http.StatusCreated {
		t.Fatalf("the new key: %d %s", r.status, r.body)
	}
	var list api.APIKeyList
	ts.do(http.MethodGet, "/v1/apikeys", operator, "", nil).decode(t, http.StatusOK, &list)
	if len(list.Keys) != 4 {
		t.Fatalf("keys %+v", list)
	}
	other := startServer(t, db, server.Options{}) // a key of another tenant is not this tenant's to revoke
	globex := other.key("globex", apikey.ScopeAdmin)
	ts.do(http.MethodDelete, "/v1/apikeys/"+created.Key.ID, globex, "revoke", nil).wantProblem(t, http.StatusNotFound, api.CodeNotFound)
	var revoked api.APIKey
	ts.do(http.MethodDelete, "/v1/apikeys/"+created.Key.ID+"?reason=leaked", operator, "revoke", nil).decode(t, http.StatusOK, &revoked)
	if revoked.RevokedUnixNano == 0 {
		t.Fatalf("revoked %+v", revoked)
	}
	ts.do(http.MethodPost, "/v1/chains/c/entries", created.Token, "k2", body).wantProblem(t, http.StatusUnauthorized, api.CodeUnauthenticated)
}
