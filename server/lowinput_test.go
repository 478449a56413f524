package server_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/server"
)

// An Idempotency-Key outside printable ASCII is refused with 400
// KEY_INVALID, and nothing is written.
func TestNonASCIIIdempotencyKeyRefused(t *testing.T) {
	ts := startServer(t, openBolt(t), server.Options{})
	token := ts.key("acme", allScopes...)
	fixture(t, ts, token)
	before := ledgerSnapshot(t, ts)
	for _, key := range []string{"clé-1", "key\x80", "ключ"} {
		ts.do(http.MethodPost, "/v1/chains/orders/entries", token, key, api.AppendRequest{Type: "t/v1", Payload: []byte("x")}).
			wantProblem(t, http.StatusBadRequest, api.CodeKeyInvalid)
	}
	if d := diffSnapshots(before, ledgerSnapshot(t, ts)); d != "" {
		t.Fatalf("a refused key wrote:\n%s", d)
	}
}

// A body without Content-Type is refused with 415 before the replay
// guard stores an answer, so the retry that names the type, with the same
// key, is served.
func TestBodyWithoutContentTypeRefused(t *testing.T) {
	ts := startServer(t, openBolt(t), server.Options{})
	token := ts.key("acme", allScopes...)
	send := func(ct string) response {
		req, err := http.NewRequest(http.MethodPost, ts.url+"/v1/chains/orders/entries", strings.NewReader(`{"type":"t/v1","payload":"eA=="}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set(api.HeaderIdempotencyKey, "ct-1")
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := ts.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return response{status: resp.StatusCode, header: resp.Header, body: b}
	}
	send("").wantProblem(t, http.StatusUnsupportedMediaType, api.CodeUnsupportedMedia)
	send("text/plain").wantProblem(t, http.StatusUnsupportedMediaType, api.CodeUnsupportedMedia)
	if r := send("application/json; charset=utf-8"); r.status != http.StatusCreated || r.header.Get(api.HeaderReplayed) == "true" {
		t.Fatalf("with Content-Type: %d %s", r.status, r.body)
	}
}

// A requeue that lists one message twice (in either of its spellings)
// requeues and reports it once.
func TestRequeueListsAMessageOnce(t *testing.T) {
	db := openBolt(t)
	_, url := newReceiver(t, func(n int) int { return http.StatusBadRequest }) // permanent: dead at once
	ts := startServer(t, db, server.Options{Deliveries: []server.Delivery{{Tenant: "acme", Topic: api.TopicDefault, URL: url, Secret: whsec, AllowPrivateAddresses: true}}})
	token := ts.key("acme", allScopes...)
	fixture(t, ts, token)
	dead, ok := ts.deadLetters(t, token)
	if !ok {
		t.Fatal("no dead letter")
	}
	id := dead.Messages[0].ID
	var res api.OutboxRequeueResponse
	ts.do(http.MethodPost, "/v1/outbox/requeue", token, "rq-twice", api.OutboxRequeueRequest{IDs: []string{id, id, "outbox:" + id}}).
		decode(t, http.StatusOK, &res)
	if len(res.Requeued) != 1 || res.Requeued[0] != id {
		t.Fatalf("requeued %v, want [%s]", res.Requeued, id)
	}
}

// Refusals name a tenant's chains as the tenant names them, without the
// tenant's prefix.
func TestDetailsNameChainsWithoutTheTenant(t *testing.T) {
	ts := startServer(t, openBolt(t), server.Options{})
	token := ts.key("acme", allScopes...)
	fixture(t, ts, token)
	for _, path := range []string{"/v1/chains/nochain/head", "/v1/chains/orders/entries/99", "/v1/chains/a/b/entries"} {
		p := ts.do(http.MethodGet, path, token, "", nil).wantProblem(t, http.StatusNotFound, api.CodeNotFound)
		if strings.Contains(p.Detail, "acme") {
			t.Errorf("%s: detail %q names the tenant", path, p.Detail)
		}
	}
	p := ts.do(http.MethodPost, "/v1/chains/"+strings.Repeat("x", 300)+"/entries", token, "long", api.AppendRequest{Type: "t/v1"}).
		wantProblem(t, http.StatusBadRequest, api.CodeInvalidInput)
	if strings.Contains(p.Detail, "acme/") {
		t.Errorf("detail %q names the tenant", p.Detail)
	}
}

// A key is created only for a tenant of lowercase ASCII: names that look
// like another tenant's are refused. Keys stored before the rule (whose
// tenants ValidateTenant still reads) keep working.
func TestTenantLookAlikesRefused(t *testing.T) {
	db := openBolt(t)
	for _, tenant := range []string{"ACME", "Acme", "acme ", " acme", "аcme" /* Cyrillic а */, "acme\u200b", "-acme", "ac/me"} {
		_, _, err := apikey.Create(context.Background(), db, apikey.CreateRequest{Tenant: tenant, Name: "k", Scopes: []apikey.Scope{apikey.ScopeRead}})
		if !errors.Is(err, apikey.ErrInvalidTenant) {
			t.Errorf("tenant %q: %v, want ErrInvalidTenant", tenant, err)
		}
	}
	for _, tenant := range []string{"acme", "acme-2", "a.b_c", "0x"} {
		if _, _, err := apikey.Create(context.Background(), db, apikey.CreateRequest{Tenant: tenant, Name: "k", Scopes: []apikey.Scope{apikey.ScopeRead}}); err != nil {
			t.Errorf("tenant %q: %v", tenant, err)
		}
	}
}
