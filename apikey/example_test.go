package apikey_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/chain"
)

// A key is created once, its token handed to the client; the server's
// handlers behind Middleware read the key from the request's context.
func Example() {
	dir, _ := os.MkdirTemp("", "apikey-example")
	defer os.RemoveAll(dir)
	db, err := chain.Open(filepath.Join(dir, "ledger.db"), chain.Options{})
	if err != nil {
		panic(err)
	}
	defer db.Close()
	ctx := context.Background()

	key, token, err := apikey.Create(ctx, db, apikey.CreateRequest{Tenant: "acme", Name: "erp-sync",
		Scopes: []apikey.Scope{apikey.ScopeRead, apikey.ScopeWrite}})
	if err != nil {
		panic(err)
	}
	auth, err := apikey.NewAuthenticator(db, apikey.AuthOptions{})
	if err != nil {
		panic(err)
	}
	defer auth.Close()
	handler := apikey.Middleware(auth)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, _ := apikey.FromContext(r.Context())
		fmt.Fprintf(w, "tenant %s, may write: %v", k.Tenant, k.Has(apikey.ScopeWrite))
	}))

	for _, authorization := range []string{"Bearer " + token, "Bearer " + token[:len(token)-1] + "x", ""} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/v1/chains/stock/head", nil)
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		handler.ServeHTTP(rec, req)
		if rec.Code == http.StatusOK {
			fmt.Println(rec.Code, rec.Body)
		} else {
			fmt.Println(rec.Code, rec.Header().Get("WWW-Authenticate"))
		}
	}
	if _, err := apikey.Revoke(ctx, db, key.ID, "rotated"); err != nil {
		panic(err)
	}
	_, err = auth.Authenticate(ctx, token)
	fmt.Println(err)
	// Output:
	// 200 tenant acme, may write: true
	// 401 Bearer realm="ledger", error="invalid_token"
	// 401 Bearer realm="ledger"
	// apikey: unauthenticated
}
