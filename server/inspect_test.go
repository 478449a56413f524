package server_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/audit"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/checkpoint"
	"github.com/ledgerworks/ledger/outbox/signature"
	"github.com/ledgerworks/ledger/server"
)

// GET /v1/chains lists the tenant's chains under a prefix, in pages, and
// nothing of another tenant; GET /v1/whoami is the calling key.
func TestChainListAndWhoami(t *testing.T) {
	forEachBackend(t, server.Options{}, testChainListAndWhoami)
}

func testChainListAndWhoami(t *testing.T, ts *testServer) {
	token, other := ts.key("acme", allScopes...), ts.key("acme2", allScopes...)
	for i, name := range []string{"orders/2026", "orders/2027", "orders-x", "audit/a"} {
		ts.do(http.MethodPost, "/v1/chains/"+name+"/entries", token, "k"+itoa(i), api.AppendRequest{Type: "t/v1", Payload: []byte("{}")})
	}
	ts.do(http.MethodPost, "/v1/chains/orders/9999/entries", other, "k", api.AppendRequest{Type: "t/v1", Payload: []byte("{}")})
	var list api.ChainList
	ts.do(http.MethodGet, "/v1/chains?prefix=orders/&limit=1", token, "", nil).decode(t, http.StatusOK, &list)
	if len(list.Chains) != 1 || list.Chains[0].Chain != "orders/2026" || list.Chains[0].Seq != 1 || list.NextFromName != "orders/2027" {
		t.Fatalf("first page %+v", list)
	}
	list = api.ChainList{}
	ts.do(http.MethodGet, "/v1/chains?prefix=orders/&limit=1&from_name=orders/2027", token, "", nil).decode(t, http.StatusOK, &list)
	if len(list.Chains) != 1 || list.Chains[0].Chain != "orders/2027" || list.NextFromName != "" {
		t.Fatalf("second page %+v", list)
	}
	ts.do(http.MethodGet, "/v1/chains", token, "", nil).decode(t, http.StatusOK, &list)
	var names []string
	for _, c := range list.Chains {
		names = append(names, c.Chain)
	}
	if got := strings.Join(names, ","); got != "audit/a,orders-x,orders/2026,orders/2027" {
		t.Fatalf("chains %s", got)
	}
	ts.do(http.MethodGet, "/v1/chains?limit=0", token, "", nil).wantProblem(t, http.StatusBadRequest, api.CodeInvalidInput)
	ts.do(http.MethodGet, "/v1/chains?prefix=orders/&from_name=audit", token, "", nil).wantProblem(t, http.StatusBadRequest, api.CodeInvalidInput)

	reader := ts.key("acme", apikey.ScopeRead)
	var me api.APIKey
	ts.do(http.MethodGet, "/v1/whoami", reader, "", nil).decode(t, http.StatusOK, &me)
	if me.Tenant != "acme" || strings.Join(me.Scopes, ",") != "read" || me.ID == "" {
		t.Fatalf("whoami %+v", me)
	}
	ts.do(http.MethodGet, "/v1/whoami", "", "", nil).wantProblem(t, http.StatusUnauthorized, api.CodeUnauthenticated)
}

// GET /v1/inbox shows the tenant's providers only, their events newest
// first, and the duplicates, reused ids and bad signatures refused.
func TestInboxView(t *testing.T) {
	ts := startServer(t, openBolt(t), server.Options{Providers: []server.Provider{
		{Name: "gh", Kind: server.ProviderGitHub, Tenant: "acme", Secrets: []string{"s3cret"}},
		{Name: "theirs", Kind: server.ProviderGitHub, Tenant: "other", Secrets: []string{"x"}}}})
	token := ts.key("acme", allScopes...)
	send := func(id, body, secret string) int {
		req, _ := http.NewRequest(http.MethodPost, ts.url+"/v1/webhooks/gh", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Delivery", id)
		req.Header.Set("X-Hub-Signature-256", signature.SignGitHub([]byte(secret), []byte(body)))
		resp, err := ts.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, st := range []struct {
		id, body, secret string
		status           int
	}{{"d-1", `{"n":1}`, "s3cret", 200}, {"d-2", `{"n":2}`, "s3cret", 200}, {"d-1", `{"n":1}`, "s3cret", 200},
		{"d-1", `{"n":9}`, "s3cret", 409}, {"d-3", `{"n":3}`, "wrong", 401}} {
		if got := send(st.id, st.body, st.secret); got != st.status {
			t.Fatalf("%s: %d, want %d", st.id, got, st.status)
		}
	}
	var list api.InboxList
	ts.do(http.MethodGet, "/v1/inbox", token, "", nil).decode(t, http.StatusOK, &list)
	if len(list.Providers) != 1 {
		t.Fatalf("providers %+v", list.Providers)
	}
	p := list.Providers[0]
	if p.Name != "gh" || p.Chain != "inbox/gh" || p.Events != 2 || p.Duplicates != 1 || p.EventIDReused != 1 || p.BadSignatures != 1 ||
		len(p.Recent) != 2 || p.Recent[0].EventID != "d-2" || p.Recent[0].Seq != 2 || p.Recent[1].BodySize != 7 || len(p.Recent[1].BodyDigest) != 64 {
		t.Fatalf("provider %+v", p)
	}
	ts.do(http.MethodGet, "/v1/inbox", ts.key("acme", apikey.ScopeRead), "", nil).wantProblem(t, http.StatusForbidden, api.CodeForbidden)
}

// GET /v1/idempotency/records shows a request's guard record within the
// tenant: its state, attempt and stored response (withheld for a created
// key's token); another tenant's key id names nothing.
func TestGuardRecordView(t *testing.T) {
	forEachBackend(t, server.Options{}, testGuardRecordView)
}

func testGuardRecordView(t *testing.T, ts *testServer) {
	token := ts.key("acme", allScopes...)
	var me api.APIKey
	ts.do(http.MethodGet, "/v1/whoami", token, "", nil).decode(t, http.StatusOK, &me)
	ts.do(http.MethodPost, "/v1/chains/orders/entries", token, "intent-1", api.AppendRequest{Type: "t/v1", Payload: []byte("{}")})
	ts.do(http.MethodPost, "/v1/apikeys", token, "intent-2", api.APIKeyRequest{Name: "x", Scopes: []string{"read"}})
	get := func(tok, keyID, method, path, key string) response {
		q := url.Values{"key_id": {keyID}, "method": {method}, "path": {path}, "key": {key}}
		return ts.do(http.MethodGet, "/v1/idempotency/records?"+q.Encode(), tok, "", nil)
	}
	var rec api.GuardRecord
	get(token, me.ID, "POST", "/v1/chains/orders/entries", "intent-1").decode(t, http.StatusOK, &rec)
	if rec.Status != "SUCCESS" || rec.Attempt != 1 || rec.Response == nil || rec.Response.Status != http.StatusCreated ||
		!strings.Contains(rec.Response.Body, `"seq":"1"`) || len(rec.RequestHash) != 64 {
		t.Fatalf("record %+v %+v", rec, rec.Response)
	}
	get(token, me.ID, "POST", "/v1/apikeys", "intent-2").decode(t, http.StatusOK, &rec)
	if rec.Response == nil || !rec.Response.BodyWithheld || rec.Response.Body != "" {
		t.Fatalf("a created key's answer shown: %+v", rec.Response)
	}
	get(token, me.ID, "POST", "/v1/chains/orders/entries", "intent-9").wantProblem(t, http.StatusNotFound, api.CodeNotFound)
	other := ts.key("other", allScopes...)
	get(other, me.ID, "POST", "/v1/chains/orders/entries", "intent-1").wantProblem(t, http.StatusNotFound, api.CodeNotFound)
	get(token, "nothex", "POST", "/v1/x", "k").wantProblem(t, http.StatusBadRequest, api.CodeInvalidInput)
	get(token, me.ID, "GET", "/v1/x", "k").wantProblem(t, http.StatusBadRequest, api.CodeInvalidInput)
	get(token, me.ID, "POST", "/v1/x", "").wantProblem(t, http.StatusBadRequest, api.CodeInvalidInput)
}

// GET /v1/outbox/activity counts the attempts of the tenant's topics in
// twelve buckets of the window: a rejected delivery in the last one.
func TestOutboxActivityView(t *testing.T) {
	_, url := newReceiver(t, func(int) int { return http.StatusBadRequest })
	ts := startServer(t, openBolt(t), server.Options{
		Deliveries: []server.Delivery{{Tenant: "acme", Topic: api.TopicDefault, URL: url, Secret: whsec, AllowPrivateAddresses: true}}})
	token := ts.key("acme", allScopes...)
	fixture(t, ts, token)
	var act api.OutboxActivity
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		act = api.OutboxActivity{}
		ts.do(http.MethodGet, "/v1/outbox/activity?minutes=60", token, "", nil).decode(t, http.StatusOK, &act)
		if len(act.Topics) == 1 && len(act.Topics[0].Buckets) == server.OutboxActivityBuckets &&
			act.Topics[0].Buckets[server.OutboxActivityBuckets-1].Rejected == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("activity %+v", act)
		}
	}
	if a := act.Topics[0]; a.Topic != api.TopicDefault || a.BucketSeconds != 300 || a.Buckets[0].Delivered+a.Buckets[0].Failed != 0 {
		t.Fatalf("activity %+v", a)
	}
	ts.do(http.MethodGet, "/v1/outbox/activity?minutes=0", token, "", nil).wantProblem(t, http.StatusBadRequest, api.CodeInvalidInput)
	act = api.OutboxActivity{}
	ts.do(http.MethodGet, "/v1/outbox/activity", ts.key("other", allScopes...), "", nil).decode(t, http.StatusOK, &act)
	if len(act.Topics) != 0 {
		t.Fatalf("another tenant sees %+v", act.Topics)
	}
}

// GET /v1/proofs/entry answers the entry proof file against the newest
// checkpoint the server signed, which an auditor verifies without the
// ledger; a chain of another tenant, an entry after the checkpoint and a
// server without a signing key answer 404.
func TestEntryProof(t *testing.T) {
	signer, verifier, err := checkpoint.GenerateKey("ledger.example/test")
	if err != nil {
		t.Fatal(err)
	}
	db := openBolt(t)
	for _, r := range []chain.Request{{Chain: "acme/orders", Type: "t/v1", Payload: []byte(`{"n":1}`)},
		{Chain: "acme/orders", Type: "t/v1", Payload: []byte(`{"n":2}`)}, {Chain: "other/orders", Type: "t/v1", Payload: []byte("x")}} {
		if _, err := db.Append(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	ts := startServer(t, db, server.Options{CheckpointSignerKey: signer, CheckpointInterval: time.Hour})
	token := ts.key("acme", apikey.ScopeRead)
	r := ts.do(http.MethodGet, "/v1/proofs/entry?chain=orders&seq=2", token, "", nil)
	if r.status != http.StatusOK {
		t.Fatalf("proof: %d %s", r.status, r.body)
	}
	p, err := audit.ParseEntryProof(r.body)
	if err != nil {
		t.Fatal(err)
	}
	cp, e, err := audit.VerifyEntryProof(p, verifier)
	if err != nil || e.Chain != "acme/orders" || e.Seq != 2 || string(e.Payload) != `{"n":2}` || cp.Size != 2 {
		t.Fatalf("verified %+v %+v: %v", cp, e, err)
	}
	ts.do(http.MethodGet, "/v1/proofs/entry?chain=orders&seq=3", token, "", nil).wantProblem(t, http.StatusNotFound, api.CodeNotFound)
	ts.do(http.MethodGet, "/v1/proofs/entry?chain=orders&seq=1", ts.key("other", apikey.ScopeRead), "", nil).decode(t, http.StatusOK, &map[string]any{})
	ts.do(http.MethodGet, "/v1/proofs/entry?chain=nothing&seq=1", token, "", nil).wantProblem(t, http.StatusNotFound, api.CodeNotFound)
	ts.do(http.MethodGet, "/v1/proofs/entry?chain=orders&seq=0", token, "", nil).wantProblem(t, http.StatusBadRequest, api.CodeInvalidInput)

	plain := startServer(t, openBolt(t), server.Options{})
	plain.do(http.MethodGet, "/v1/proofs/entry?chain=orders&seq=1", plain.key("acme", apikey.ScopeRead), "", nil).
		wantProblem(t, http.StatusNotFound, api.CodeNotFound)
}
