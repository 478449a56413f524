package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/chain"
)

// The rate limiter's KeyID authenticates a request's token once, and the
// API key check takes that answer from the request's info: a key revoked
// between the two still passes the request it was checked for, and no
// other request.
func TestOneAuthenticationARequest(t *testing.T) {
	db, err := chain.Open(filepath.Join(t.TempDir(), "ledger.db"), chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	key, token, err := apikey.Create(context.Background(), db, apikey.CreateRequest{Tenant: "acme", Scopes: []apikey.Scope{apikey.ScopeRead}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{DB: db, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	r, _ := http.NewRequest(http.MethodGet, "http://x/v1/chains/a/head", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	r = r.WithContext(context.WithValue(r.Context(), infoKey{}, &info{}))
	if id, ok := s.keyID(r); !ok || id != key.ID {
		t.Fatalf("keyID = %q, %v; want %q", id, ok, key.ID)
	}
	if _, err := apikey.Revoke(context.Background(), db, key.ID, "test"); err != nil {
		t.Fatal(err)
	}
	if k, err := s.authenticate(r.Context(), token); err != nil || k.ID != key.ID {
		t.Fatalf("the same request: %v, %v; want the key the limiter saw", k.ID, err)
	}
	if _, err := s.authenticate(r.Context(), token+"x"); err == nil {
		t.Fatal("another token in the same request authenticated")
	}
	fresh := context.WithValue(context.Background(), infoKey{}, &info{})
	if _, err := s.authenticate(fresh, token); !errors.Is(err, apikey.ErrUnauthenticated) {
		t.Fatalf("a new request with the revoked key: %v, want ErrUnauthenticated", err)
	}
}
