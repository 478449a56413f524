package apikey_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/chain/chaintest"
	"github.com/ledgerworks/ledger/internal/problem"
)

// serveKeys starts Middleware in front of a handler that prints the key of
// the request's context, on a real listener on 127.0.0.1.
func serveKeys(t *testing.T, auth *apikey.Authenticator) string {
	t.Helper()
	srv := httptest.NewServer(apikey.Middleware(auth)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ok := apikey.FromContext(r.Context())
		if !ok {
			t.Error("no key in the context")
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(key)
	})))
	t.Cleanup(srv.Close)
	return srv.URL
}

type answer struct {
	status    int
	challenge string
	body      []byte
}

func send(t *testing.T, url string, authorization ...string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range authorization {
		req.Header.Add("Authorization", a)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, challenge: resp.Header.Get("WWW-Authenticate"), body: body}
}

func TestMiddlewareOverHTTP(t *testing.T) {
	chaintest.ForEachBackend(t, testOptions, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		auth, key, token := newKeyed(t, db)
		url := serveKeys(t, auth)

		a := send(t, url, "Bearer "+token)
		var got apikey.Key
		if a.status != http.StatusOK || json.Unmarshal(a.body, &got) != nil || got.ID != key.ID || got.Tenant != "acme" || !got.Has(apikey.ScopeRead) {
			t.Fatalf("valid token: %d %s", a.status, a.body)
		}
		if a := send(t, url, "bearer   "+token); a.status != http.StatusOK {
			t.Fatalf("lowercase scheme, several spaces: %d %s", a.status, a.body)
		}

		for _, c := range []struct {
			name          string
			authorization []string
			challenge     string
		}{
			{"no header", nil, `Bearer realm="ledger"`},
			{"another scheme", []string{"Basic dXNlcjpwYXNz"}, `Bearer realm="ledger", error="invalid_token"`},
			{"malformed token", []string{"Bearer lwk_nope"}, `Bearer realm="ledger", error="invalid_token"`},
			{"wrong secret", []string{"Bearer " + token[:len(token)-4] + "AAAA"}, `Bearer realm="ledger", error="invalid_token"`},
			{"two headers", []string{"Bearer " + token, "Bearer " + token}, `Bearer realm="ledger", error="invalid_token"`},
			{"empty token", []string{"Bearer "}, `Bearer realm="ledger", error="invalid_token"`},
		} {
			a := send(t, url, c.authorization...)
			if a.status != http.StatusUnauthorized || a.challenge != c.challenge {
				t.Errorf("%s: %d, WWW-Authenticate %q", c.name, a.status, a.challenge)
			}
			var body problem.Body
			if err := json.Unmarshal(a.body, &body); err != nil || body.Code != apikey.CodeUnauthenticated || body.Status != 401 {
				t.Errorf("%s: body %s", c.name, a.body)
			}
		}

		if _, err := apikey.Revoke(ctx, db, key.ID, "test"); err != nil {
			t.Fatal(err)
		}
		if a := send(t, url, "Bearer "+token); a.status != http.StatusUnauthorized || !strings.Contains(a.challenge, "invalid_token") {
			t.Fatalf("revoked key: %d %q", a.status, a.challenge)
		}
	})
}

// A store that cannot be read is 503 STORE_UNAVAILABLE, not 401: the
// token was not judged.
func TestMiddlewareStoreUnavailable(t *testing.T) {
	db, err := chain.Open(t.TempDir()+"/ledger.db", chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	auth, err := apikey.NewAuthenticator(db, apikey.AuthOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, token, err := apikey.Create(context.Background(), db, apikey.CreateRequest{Tenant: "acme", Scopes: []apikey.Scope{apikey.ScopeRead}})
	if err != nil {
		t.Fatal(err)
	}
	url := serveKeys(t, auth)
	db.Close() // the notification of the creation is pending: the next call reads the store
	a := send(t, url, "Bearer "+token)
	var body problem.Body
	if a.status != http.StatusServiceUnavailable || json.Unmarshal(a.body, &body) != nil || body.Code != apikey.CodeStoreUnavailable {
		t.Fatalf("closed store: %d %s", a.status, a.body)
	}
}

func TestFromContextWithoutKey(t *testing.T) {
	if _, ok := apikey.FromContext(context.Background()); ok {
		t.Fatal("a key in an empty context")
	}
	k := apikey.Key{ID: "0123456789abcdef"}
	if got, ok := apikey.FromContext(apikey.NewContext(context.Background(), k)); !ok || got.ID != k.ID {
		t.Fatal(got, ok)
	}
}
