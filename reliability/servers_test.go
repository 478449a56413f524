package reliability

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerworks/ledger/internal/testbin"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// pgLedger is a PostgreSQL ledger on a schema of its own, initialized,
// with an API key of tenant acme: what several `ledgerctl serve` share.
type pgLedger struct {
	url   string // with the schema as search_path
	token string
}

// newPGLedger creates the schema (dropped at cleanup), runs `ledgerctl
// init` and `ledgerctl apikey create` on it.
func newPGLedger(t *testing.T) *pgLedger {
	t.Helper()
	l := &pgLedger{url: pgtest.SchemaURL(t, pgtest.URL(t))}
	if r := runLedgerctl(t, nil, "--db", l.url, "init"); r.exitCode != 0 {
		t.Fatalf("init: exit %d\n%s", r.exitCode, r.stderr)
	}
	r := runLedgerctl(t, nil, "--db", l.url, "apikey", "create", "--tenant", "acme", "--name", "servers",
		"--scopes", "read,write,admin", "-o", "json")
	var created struct {
		Token string `json:"token"`
	}
	if r.exitCode != 0 || json.Unmarshal([]byte(r.stdout), &created) != nil || created.Token == "" {
		t.Fatalf("apikey create: exit %d\n%s%s", r.exitCode, r.stdout, r.stderr)
	}
	l.token = created.Token
	return l
}

// conn opens a connection to the ledger's schema, closed at cleanup.
func (l *pgLedger) conn(t *testing.T) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgtest.Connect(ctx, l.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// startServer starts `ledgerctl --db url serve` on a free port with extra
// flags and waits for its first line, "listening on http://ADDR". It is
// safe from any goroutine once testbin.Ledgerctl has built the binary.
func startServer(url string, extra ...string) (*testbin.Served, error) {
	return testbin.StartServe(nil, 60*time.Second, append([]string{"--db", url, "serve", "--addr", "127.0.0.1:0"}, extra...)...)
}

// mustStartServer is startServer on the test's goroutine; the server is
// killed at cleanup.
func mustStartServer(t *testing.T, url string, extra ...string) *testbin.Served {
	t.Helper()
	return testbin.Serve(t, nil, 60*time.Second, append([]string{"--db", url, "serve", "--addr", "127.0.0.1:0"}, extra...)...)
}
