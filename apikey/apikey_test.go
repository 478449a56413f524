package apikey_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/chain/chaintest"
)

func TestCreateAuthenticateRevoke(t *testing.T) {
	chaintest.ForEachBackend(t, testOptions, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		auth, err := apikey.NewAuthenticator(db, apikey.AuthOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer auth.Close()
		key, token, err := apikey.Create(ctx, db, apikey.CreateRequest{Tenant: "acme", Name: "sync",
			Scopes: []apikey.Scope{apikey.ScopeWrite, apikey.ScopeRead}})
		if err != nil {
			t.Fatal(err)
		}
		if len(token) != apikey.TokenLength || !strings.HasPrefix(token, apikey.TokenPrefix+key.ID+"_") {
			t.Fatalf("token %q for id %s", token, key.ID)
		}
		if id, ok := apikey.TokenKeyID(token); !ok || id != key.ID {
			t.Fatalf("TokenKeyID = %q %v", id, ok)
		}
		if !key.Has(apikey.ScopeRead) || !key.Has(apikey.ScopeWrite) || key.Has(apikey.ScopeAdmin) {
			t.Fatalf("scopes %v", key.Scopes)
		}
		got, err := auth.Authenticate(ctx, token)
		if err != nil || got.ID != key.ID || got.Tenant != "acme" {
			t.Fatalf("authenticate: %+v %v", got, err)
		}
		wrong := token[:len(token)-2] + "AA"
		if wrong == token {
			wrong = token[:len(token)-2] + "BA"
		}
		if _, err := auth.Authenticate(ctx, wrong); !errors.Is(err, apikey.ErrUnauthenticated) {
			t.Fatalf("wrong secret: %v", err)
		}
		revoked, err := apikey.Revoke(ctx, db, key.ID, "rotated")
		if err != nil || !revoked.Revoked() || revoked.RevokedReason != "rotated" {
			t.Fatalf("revoke: %+v %v", revoked, err)
		}
		if _, err := auth.Authenticate(ctx, token); !errors.Is(err, apikey.ErrUnauthenticated) {
			t.Fatalf("revoked key authenticates: %v", err)
		}
		failures, err := apikey.Check(ctx, db)
		if err != nil || len(failures) > 0 {
			t.Fatalf("check: %v %v", failures, err)
		}
		report, err := db.Verify(ctx, chain.VerifyOptions{})
		if err != nil || !report.OK() {
			t.Fatalf("verify: %v %v", report.Failures, err)
		}
	})
}
