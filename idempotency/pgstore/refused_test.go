package pgstore_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerworks/ledger/idempotency"
	"github.com/ledgerworks/ledger/idempotency/pgstore"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// A store whose password is wrong is not an outage: the guard answers
// 500 STORE_REFUSED, never a 503 that tells the client to retry.
func TestWrongPasswordIsRefusedNotUnavailable(t *testing.T) {
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	u.User = url.UserPassword(u.User.Username(), "not-the-password")
	pool, err := pgxpool.New(ctx, u.String()) // connects on first use
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := pool.Ping(ctx); err == nil {
		t.Skip("the test server does not check passwords")
	}
	g, err := idempotency.New(idempotency.Options{Store: pgstore.New(pool, pgtest.NewSchema(t, pgtest.URL(t))),
		User: func(*http.Request) (string, error) { return "alice", nil }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("the handler ran without a store")
	})))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"a":1}`))
	req.Header.Set("Idempotency-Key", "k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusInternalServerError || resp.Header.Get("Retry-After") != "" ||
		!strings.Contains(string(body), string(idempotency.CodeStoreRefused)) {
		t.Fatalf("%d Retry-After %q %s; want 500 STORE_REFUSED without Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
}
