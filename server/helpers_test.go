package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/chain/chaintest"
	"github.com/ledgerworks/ledger/idempotency"
	"github.com/ledgerworks/ledger/idempotency/pgstore"
	"github.com/ledgerworks/ledger/server"
	"github.com/ledgerworks/ledger/server/servertest"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// testServer is a server on 127.0.0.1 over a test's ledger.
type testServer struct {
	*servertest.Running
	t   *testing.T
	db  *chain.DB
	srv *server.Server
	url string
	// client keeps connections alive, as clients do.
	client *http.Client
}

// openBolt opens a fresh embedded ledger, closed when the test ends.
func openBolt(t *testing.T) *chain.DB {
	t.Helper()
	db, err := chain.Open(filepath.Join(t.TempDir(), "ledger.db"), chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// forEachBackend runs fn on a server over a fresh ledger of every backend:
// the embedded default with its ledger store, PostgreSQL (when
// LEDGER_TEST_POSTGRES_URL is set) with the PostgreSQL store.
func forEachBackend(t *testing.T, opts server.Options, fn func(t *testing.T, ts *testServer)) {
	chaintest.ForEachBackend(t, func() chain.Options { return chain.Options{} }, func(t *testing.T, db *chain.DB) {
		o := opts
		if _, err := idempotency.NewLedgerStore(db); err != nil { // not embedded: PostgreSQL
			url := pgtest.URL(t)
			store, err := pgstore.Open(context.Background(), url, pgstore.Options{Schema: pgtest.NewSchema(t, url), Migrate: true, Ledger: db})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(store.Close)
			o.IdempotencyStore = store
		}
		fn(t, startServer(t, db, o))
	})
}

// startServer serves db on a free port of 127.0.0.1 until the test ends.
func startServer(t *testing.T, db *chain.DB, opts server.Options) *testServer {
	t.Helper()
	opts.DB = db
	r := servertest.Start(t, opts)
	ts := &testServer{Running: r, t: t, db: db, srv: r.Server, url: r.URL, client: &http.Client{Timeout: 30 * time.Second}}
	t.Cleanup(ts.client.CloseIdleConnections)
	return ts
}

// key creates an API key of tenant with scopes and returns its token.
func (ts *testServer) key(tenant string, scopes ...apikey.Scope) string {
	ts.t.Helper()
	return servertest.Key(ts.t, ts.db, tenant, scopes...)
}

// response is an answer read whole.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) problem(t *testing.T) api.Problem {
	t.Helper()
	var p api.Problem
	if ct := r.header.Get("Content-Type"); ct != api.MediaProblem {
		t.Fatalf("status %d Content-Type %q, want a problem: %s", r.status, ct, r.body)
	}
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("problem body %q: %v", r.body, err)
	}
	return p
}

// wantProblem checks the status and code of a refusal.
func (r response) wantProblem(t *testing.T, status int, code string) api.Problem {
	t.Helper()
	p := r.problem(t)
	if r.status != status || p.Code != code {
		t.Fatalf("got %d %s (%s), want %d %s", r.status, p.Code, p.Detail, status, code)
	}
	return p
}

// decode decodes a success body into v.
func (r response) decode(t *testing.T, status int, v any) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
}

// deadLetters polls GET /v1/outbox/dead for up to 10 s until it lists a
// message, and returns the list; false when none came.
func (ts *testServer) deadLetters(t *testing.T, token string) (api.OutboxMessageList, bool) {
	t.Helper()
	var dead api.OutboxMessageList
	for deadline := time.Now().Add(10 * time.Second); len(dead.Messages) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return dead, false
		}
		ts.do(http.MethodGet, "/v1/outbox/dead", token, "", nil).decode(t, http.StatusOK, &dead)
	}
	return dead, true
}

// do sends a request: body is JSON-encoded unless it is a string or nil;
// key, when set, is the Idempotency-Key.
func (ts *testServer) do(method, path, token, key string, body any) response {
	ts.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			ts.t.Fatal(err)
		}
		rd = bytes.NewReader(enc)
	}
	req, err := http.NewRequest(method, ts.url+path, rd)
	if err != nil {
		ts.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", api.MediaJSON)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if key != "" {
		req.Header.Set(api.HeaderIdempotencyKey, key)
	}
	resp, err := ts.client.Do(req)
	if err != nil {
		ts.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		ts.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// marshalBody is v as JSON, nil when it does not encode.
func marshalBody(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}
