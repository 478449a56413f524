package server_test

import (
	"net/http"
	"testing"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/server"
)

// Scopes never widen over the API: an admin-only key cannot create a key
// with read or write, nor revoke the operator's first key (which holds
// scopes it lacks); it creates and revokes admin-only keys. Every refusal
// is 403 SCOPE_NOT_HELD and writes nothing.
func TestAPIKeyScopesNeverWiden(t *testing.T) {
	db := openBolt(t)
	ts := startServer(t, db, server.Options{})
	operator := ts.key("acme", apikey.ScopeRead, apikey.ScopeWrite, apikey.ScopeAdmin) // as `ledgerctl apikey create` makes it
	body := api.AppendRequest{Type: "t", Payload: []byte("p")}

	var adminOnly api.APIKeyCreated
	ts.do(http.MethodPost, "/v1/apikeys", operator, "admin-only", api.APIKeyRequest{Name: "keys", Scopes: []string{"admin"}}).
		decode(t, http.StatusCreated, &adminOnly)
	var keys api.APIKeyList
	ts.do(http.MethodGet, "/v1/apikeys", operator, "", nil).decode(t, http.StatusOK, &keys)
	operatorID := ""
	for _, k := range keys.Keys {
		if k.ID != adminOnly.Key.ID {
			operatorID = k.ID
		}
	}

	before := ledgerSnapshot(t, ts)
	for i, scopes := range [][]string{{"read", "write", "admin"}, {"write"}, {"read"}, {"admin", "write"}} {
		ts.do(http.MethodPost, "/v1/apikeys", adminOnly.Token, "widen-"+string(rune('a'+i)), api.APIKeyRequest{Name: "x", Scopes: scopes}).
			wantProblem(t, http.StatusForbidden, api.CodeScopeNotHeld)
	}
	ts.do(http.MethodDelete, "/v1/apikeys/"+operatorID, adminOnly.Token, "revoke-operator", nil).
		wantProblem(t, http.StatusForbidden, api.CodeScopeNotHeld)
	if diff := diffSnapshots(before, ledgerSnapshot(t, ts)); diff != "" {
		t.Fatalf("a refused key change wrote: %s", diff)
	}
	if r := ts.do(http.MethodPost, "/v1/chains/c/entries", operator, "still-valid", body); r.status != http.StatusCreated {
		t.Fatalf("the operator's key after the refused revocation: %d %s", r.status, r.body)
	}

	// What the admin-only key holds, it may give and take.
	var peer api.APIKeyCreated
	ts.do(http.MethodPost, "/v1/apikeys", adminOnly.Token, "peer", api.APIKeyRequest{Name: "peer", Scopes: []string{"admin"}}).
		decode(t, http.StatusCreated, &peer)
	if len(peer.Key.Scopes) != 1 || peer.Key.Scopes[0] != "admin" {
		t.Fatalf("created %+v", peer.Key)
	}
	ts.do(http.MethodPost, "/v1/chains/c/entries", peer.Token, "peer-writes", body).wantProblem(t, http.StatusForbidden, api.CodeForbidden)
	var revoked api.APIKey
	ts.do(http.MethodDelete, "/v1/apikeys/"+peer.Key.ID, adminOnly.Token, "revoke-peer", nil).decode(t, http.StatusOK, &revoked)
	if revoked.RevokedUnixNano == 0 {
		t.Fatalf("revoked %+v", revoked)
	}

	// A wider key revokes a narrower one; a read+admin key cannot create
	// a writer either.
	var readAdmin api.APIKeyCreated
	ts.do(http.MethodPost, "/v1/apikeys", operator, "read-admin", api.APIKeyRequest{Name: "ra", Scopes: []string{"read", "admin"}}).
		decode(t, http.StatusCreated, &readAdmin)
	ts.do(http.MethodPost, "/v1/apikeys", readAdmin.Token, "writer", api.APIKeyRequest{Name: "w", Scopes: []string{"read", "write"}}).
		wantProblem(t, http.StatusForbidden, api.CodeScopeNotHeld)
	ts.do(http.MethodDelete, "/v1/apikeys/"+adminOnly.Key.ID, readAdmin.Token, "revoke-narrower", nil).decode(t, http.StatusOK, &revoked)
	ts.do(http.MethodPost, "/v1/apikeys", adminOnly.Token, "after-revoked", api.APIKeyRequest{Name: "x", Scopes: []string{"admin"}}).
		wantProblem(t, http.StatusUnauthorized, api.CodeUnauthenticated)
}
