package apikey_test

import (
	"context"
	"encoding/binary"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	bbolt "go.etcd.io/bbolt"
	"pgregory.net/rapid"

	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/chain/chaintest"
	"github.com/ledgerworks/ledger/storage/bolt"
	"github.com/ledgerworks/ledger/storage/postgres"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// rapidChecksDefault is how many rapid checks a plain `go test` runs on the
// file backend, rapidChecksShared on PostgreSQL (a round trip per
// statement); -rapid.checks=N or RAPID_CHECKS chooses another number.
const (
	rapidChecksDefault = 15
	rapidChecksShared  = 3
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
	// fresh returns a new, empty ledger.
	fresh func(t *testing.T) ledger
	// checks is the default number of rapid checks on it.
	checks int
}

// ledger is one ledger of a store.
type ledger struct {
	// open opens the ledger; each call opens it again.
	open func() (*chain.DB, error)
	// edit stores e in place of the entry of its chain and seq, behind the
	// engine's back, as an attacker with access to the store would; the
	// ledger must be closed (bbolt) or may be open (PostgreSQL).
	edit func(t *testing.T, e chain.Entry)
}

// stores are the file backend and, when LEDGER_TEST_POSTGRES_URL is set,
// PostgreSQL.
func stores(t *testing.T) []store {
	out := []store{{name: "bolt", checks: rapidChecksDefault, fresh: func(t *testing.T) ledger {
		path := filepath.Join(t.TempDir(), "ledger.db")
		opts := testOptions() // one clock for every opening
		return ledger{
			open: func() (*chain.DB, error) { return chain.Open(path, opts) },
			edit: func(t *testing.T, e chain.Entry) { editFileEntry(t, path, e) },
		}
	}}}
	if pgtest.Available(t) {
		out = append(out, store{name: "postgres", checks: rapidChecksShared, fresh: func(t *testing.T) ledger {
			url := pgtest.URL(t)
			schema := pgtest.NewSchema(t, url)
			opts := testOptions()
			open := func() (*chain.DB, error) {
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
			return ledger{open: open, edit: func(t *testing.T, e chain.Entry) { editRowEntry(t, url, schema, e) }}
		}})
	}
	return out
}

// editFileEntry stores e in place of its entry in a closed ledger file.
func editFileEntry(t *testing.T, path string, e chain.Entry) {
	t.Helper()
	bdb, err := bbolt.Open(path, bolt.FileMode, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	err = bdb.Update(func(tx *bbolt.Tx) error {
		v := tx.Bucket(bolt.BucketChains).Get([]byte(e.Chain))
		return bolt.PutRawEntry(tx, binary.BigEndian.Uint64(v[:8]), e.Seq, chain.EncodeRecord(&e))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// editRowEntry stores e in place of its entry's row in a PostgreSQL schema.
func editRowEntry(t *testing.T, url, schema string, e chain.Entry) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgtest.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	table := pgx.Identifier{schema, "entries"}.Sanitize()
	tag, err := conn.Exec(ctx, "UPDATE "+table+" SET data = $1 WHERE chain_id = $2 AND seq = $3", chain.EncodeRecord(&e), e.Chain, int64(e.Seq))
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("edit of %s seq %d: %v (%d rows)", e.Chain, e.Seq, err, tag.RowsAffected())
	}
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
