package main

import (
	"net/url"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// A wrong PostgreSQL password exits 5 with a message that says the
// authentication failed, never that a retry is safe, and never shows the
// password.
func TestWrongPostgresPassword(t *testing.T) {
	if !pgtest.Available(t) {
		return
	}
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "wrong-password-42")
	l := &testLedger{t: t, backend: "postgres", name: u.String(), dir: t.TempDir(), next: clockStart}
	for _, args := range [][]string{{"chains"}, {"-o", "json", "chains"}, {"init"}} {
		r := l.run(args...)
		r.expect(t, exitStorage, "authentication failed")
		if strings.Contains(r.stderr, "safe to retry") || strings.Contains(r.stderr, "wrong-password-42") {
			t.Fatalf("%v: %s", args, r.stderr)
		}
	}
}
