package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/chain"
)

func (l *testLedger) apikeyJSON(value any, args ...string) {
	l.t.Helper()
	out := l.must(append([]string{"-o", "json", "apikey"}, args...)...)
	if err := json.Unmarshal([]byte(out), value); err != nil {
		l.t.Fatalf("apikey %v: %v in %q", args, err, out)
	}
}

func TestAPIKeyCommands(t *testing.T) {
	for _, l := range testLedgers(t) {
		t.Run(l.backend, func(t *testing.T) {
			l.t = t
			// create makes the ledger when it is missing, so a first key
			// can be made before the first `serve`.
			var created apikeyJSON
			l.apikeyJSON(&created, "create", "--tenant", "acme", "--name", "erp sync", "--scopes", "write, read")
			if created.Token == "" || created.Tenant != "acme" || strings.Join(created.Scopes, ",") != "read,write" || created.Status != "valid" {
				t.Fatalf("create: %+v", created)
			}
			if id, ok := apikey.TokenKeyID(created.Token); !ok || id != created.ID {
				t.Fatalf("token %q names %q, id %q", created.Token, id, created.ID)
			}
			text := l.must("apikey", "create", "--tenant", "globex", "--scopes", "admin")
			if !strings.Contains(text, "token: "+apikey.TokenPrefix) {
				t.Fatalf("create text: %q", text)
			}

			var list apikeyListJSON
			l.apikeyJSON(&list, "list", "--tenant", "acme")
			if len(list.Keys) != 1 || list.Keys[0].ID != created.ID || list.Keys[0].Token != "" {
				t.Fatalf("list acme: %+v", list)
			}
			l.apikeyJSON(&list, "list")
			if len(list.Keys) != 2 || list.Keys[1].Tenant != "globex" {
				t.Fatalf("list: %+v", list)
			}
			if out := l.must("apikey", "list"); strings.Contains(out, created.Token) || !strings.Contains(out, created.ID) {
				t.Fatalf("list text: %q", out)
			}

			var revoked apikeyJSON
			l.apikeyJSON(&revoked, "revoke", created.ID, "--reason", "rotated")
			if revoked.Status != "revoked" || revoked.RevokedReason != "rotated" || revoked.RevokedUnixNano == 0 {
				t.Fatalf("revoke: %+v", revoked)
			}
			var again apikeyJSON
			l.apikeyJSON(&again, "revoke", created.ID, "--reason", "other")
			if again.RevokedUnixNano != revoked.RevokedUnixNano || again.RevokedReason != "rotated" {
				t.Fatalf("second revoke: %+v, first %+v", again, revoked)
			}

			db := l.open()
			auth, err := apikey.NewAuthenticator(db, apikey.AuthOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := auth.Authenticate(context.Background(), created.Token); err == nil {
				t.Fatal("a revoked key's token authenticates")
			}
			auth.Close()
			db.Close()

			l.must("verify")
			before := l.snapshot()
			for _, c := range []struct {
				args   []string
				code   int
				stderr string
			}{
				{[]string{"apikey", "create", "--tenant", "acme"}, exitUsage, "--scopes are required"},
				{[]string{"apikey", "create", "--tenant", "acme", "--scopes", "read,owner"}, exitUsage, "invalid scope"},
				{[]string{"apikey", "create", "--tenant", "_system", "--scopes", "read"}, exitUsage, "reserved"},
				{[]string{"apikey", "create", "--tenant", "a/b", "--scopes", "read"}, exitUsage, "invalid tenant"},
				{[]string{"apikey", "create", "--tenant", "acme", "--scopes", "read", "--name", "tab\there"}, exitUsage, "invalid key name"},
				{[]string{"apikey", "revoke", "0123456789abcdef"}, exitNotFound, "unknown key"},
				{[]string{"apikey", "revoke", "not-an-id"}, exitUsage, "invalid key id"},
				{[]string{"apikey", "list", "--tenant", "_x"}, exitUsage, "reserved"},
				{[]string{"-o", "json", "apikey", "revoke", "0123456789abcdef"}, exitNotFound, `"code":"NOT_FOUND"`},
			} {
				l.run(c.args...).expect(t, c.code, c.stderr)
			}
			if after := l.snapshot(); after != before {
				t.Fatal("a refused command wrote to the ledger")
			}
		})
	}
}

// A key record edited in the state is caught by verify and repaired by
// rebuild-state; an edited entry of the system chain is caught by verify
// (its hash) and refused by the Authenticator.
func TestAPIKeyTamperIsCaught(t *testing.T) {
	l := newFileLedger(t)
	var created apikeyJSON
	l.apikeyJSON(&created, "create", "--tenant", "acme", "--scopes", "read")

	db, err := chain.Open(l.name, chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(context.Background(), func(tx *chain.Tx) error {
		v, err := tx.StateGet([]byte("apikey/k/" + created.ID))
		if err != nil {
			return err
		}
		v = append([]byte(nil), v...)
		v[len(v)-20] ^= 1 // a byte of the digest
		return tx.StatePut([]byte("apikey/k/"+created.ID), v)
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	r := l.run("verify")
	r.expect(t, exitVerification, "")
	if !strings.Contains(r.stdout, "apikey state key") {
		t.Fatalf("verify: %q", r.stdout)
	}
	l.must("rebuild-state", "--domain", "apikey")
	l.must("verify")

	flipPayloadByte(t, l.name, apikey.SystemChain, 1)
	r = l.run("verify")
	r.expect(t, exitVerification, "")
	if !strings.Contains(r.stdout, apikey.SystemChain) {
		t.Fatalf("verify: %q", r.stdout)
	}
	db = l.open()
	defer db.Close()
	if _, err := apikey.NewAuthenticator(db, apikey.AuthOptions{}); err == nil {
		t.Fatal("an Authenticator trusts an edited system chain")
	}
}
