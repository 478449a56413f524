package apikey_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/chain/chaintest"
	"github.com/ledgerworks/ledger/storage/postgres"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// rapidChecksDefault is how many rapid checks a plain `go test` runs on the
// file backend, rapidChecksShared on PostgreSQL (a round trip per
// statement); -rapid.checks=N or RAPID_CHECKS chooses another number.
const (
	rapidChecksDefault = 15
	rapidChecksShared  = 4
)

var checksExplicit bool

func TestMain(m *testing.M) {
	if path := os.Getenv(crashChildEnv); path != "" {
		os.Exit(crashChild(path))
	}
	flag.Parse()
	flag.Visit(func(f *flag.Flag) { checksExplicit = checksExplicit || f.Name == "rapid.checks" })
	_, set := os.LookupEnv("RAPID_CHECKS")
	checksExplicit = checksExplicit || set
	os.Exit(m.Run())
}

func testOptions() chain.Options {
	return chain.Options{Clock: chaintest.SteppingClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Millisecond)}
}

// store is a backend a test can open, close and open again.
type store struct {
	name string
	// fresh returns an opener of a new, empty ledger; each call of the
	// opener opens that same ledger again.
	fresh func(t *testing.T) func() (*chain.DB, error)
	// checks is the default number of rapid checks on it.
	checks int
}

// stores are the file backend and, when LEDGER_TEST_POSTGRES_URL is set,
// PostgreSQL.
func stores(t *testing.T) []store {
	out := []store{{name: "bolt", checks: rapidChecksDefault, fresh: func(t *testing.T) func() (*chain.DB, error) {
		path := filepath.Join(t.TempDir(), "ledger.db")
		opts := testOptions() // one clock for every opening
		return func() (*chain.DB, error) { return chain.Open(path, opts) }
	}}}
	if pgtest.Available(t) {
		out = append(out, store{name: "postgres", checks: rapidChecksShared, fresh: func(t *testing.T) func() (*chain.DB, error) {
			url := pgtest.URL(t)
			schema := pgtest.NewSchema(t, url)
			opts := testOptions()
			return func() (*chain.DB, error) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				b, err := postgres.Open(ctx, url, postgres.Options{Schema: schema})
				if err != nil {
					return nil, err
				}
				db, err := chain.OpenBackend(b, opts)
				if err != nil {
					b.Close()
				}
				return db, err
			}
		}})
	}
	return out
}

// rapidCheck runs rapid.Check with checks checks: rapid reads the number
// from its flag, which is set for the call and restored after (the tests
// of this package do not run in parallel).
func rapidCheck(t *testing.T, checks int, prop func(*rapid.T)) {
	t.Helper()
	f := flag.Lookup("rapid.checks")
	previous := f.Value.String()
	if err := f.Value.Set(strconv.Itoa(checks)); err != nil {
		t.Fatal(err)
	}
	defer f.Value.Set(previous)
	rapid.Check(t, prop)
}

// newKeyed returns an Authenticator of db (closed when the test ends) and a
// new key of tenant acme with the read scope, with its token.
func newKeyed(t *testing.T, db *chain.DB) (*apikey.Authenticator, apikey.Key, string) {
	t.Helper()
	auth, err := apikey.NewAuthenticator(db, apikey.AuthOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(auth.Close)
	key, token, err := apikey.Create(context.Background(), db, apikey.CreateRequest{Tenant: "acme", Scopes: []apikey.Scope{apikey.ScopeRead}})
	if err != nil {
		t.Fatal(err)
	}
	return auth, key, token
}
