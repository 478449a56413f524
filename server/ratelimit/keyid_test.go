package ratelimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/server/ratelimit"
)

// With Authenticator.KeyIDOf as KeyID, forged tokens that name a real key's
// id spend only their address's tokens, never the key's; with the default
// (the unchecked id) they spend the key's.
func TestForgedTokensAndKeyIDOf(t *testing.T) {
	db, err := chain.Open(filepath.Join(t.TempDir(), "ledger.db"), chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	key, token, err := apikey.Create(context.Background(), db, apikey.CreateRequest{Tenant: "acme", Scopes: []apikey.Scope{apikey.ScopeRead}})
	if err != nil {
		t.Fatal(err)
	}
	auth, err := apikey.NewAuthenticator(db, apikey.AuthOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer auth.Close()
	forged := apikey.TokenPrefix + key.ID + "_" + strings.Repeat("A", apikey.SecretTextLength)
	for _, c := range []struct {
		name        string
		keyID       func(*http.Request) (string, bool)
		victimAfter int
	}{
		{"KeyIDOf", auth.KeyIDOf, http.StatusNoContent},
		{"default", nil, http.StatusTooManyRequests},
	} {
		t.Run(c.name, func(t *testing.T) {
			clock := newFakeClock()
			_, url := serve(t, ratelimit.Options{PerKey: rate.Every(time.Minute), KeyBurst: 2, PerAddr: rate.Every(time.Minute), AddrBurst: 2,
				KeyID: c.keyID, Now: clock.Now})
			for range 2 {
				sendToken(t, url, "192.0.2.66", forged) // the attacker's address
			}
			if got := sendToken(t, url, "192.0.2.1", token); got != c.victimAfter {
				t.Fatalf("the key's owner after two forged requests: %d, want %d", got, c.victimAfter)
			}
		})
	}
}

func sendToken(t *testing.T, url, addr, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("X-Test-Addr", addr)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// FuzzClientAddr: any RemoteAddr gives a bucket name; an IP address gives
// its canonical IPv4 text or its IPv6 /64.
func FuzzClientAddr(f *testing.F) {
	for _, seed := range []string{"127.0.0.1:80", "[::1]:1", "[::ffff:1.2.3.4]:5", "[fe80::1%lo]:9", "1.2.3.4", "", ":", "[]:1", "x:y:z"} {
		f.Add(seed)
	}
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	f.Fuzz(func(t *testing.T, remote string) {
		req.RemoteAddr = remote
		name := ratelimit.ClientAddr(req)
		if p, err := netip.ParsePrefix(name); err == nil {
			if !p.Addr().Is6() || p.Bits() != 64 || p.Masked() != p {
				t.Fatalf("ClientAddr(%q) = %q", remote, name)
			}
			return
		}
		if a, err := netip.ParseAddr(name); err == nil && (!a.Is4() || a.String() != name) {
			t.Fatalf("ClientAddr(%q) = %q", remote, name)
		}
	})
}
