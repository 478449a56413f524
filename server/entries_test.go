package server_test

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/server"
)

var writer = []apikey.Scope{apikey.ScopeRead, apikey.ScopeWrite}

// A retried POST gets the first answer back byte for byte, marked
// Idempotent-Replayed, and the ledger holds one entry.
func TestDuplicatePostReplaysByteIdentical(t *testing.T) {
	forEachBackend(t, server.Options{}, func(t *testing.T, ts *testServer) {
		token := ts.key("acme", writer...)
		body := api.AppendRequest{Type: "order/v1", Payload: []byte(`{"id":42}`)}
		first := ts.do(http.MethodPost, "/v1/chains/orders/2026/entries", token, "k-1", body)
		if first.status != http.StatusCreated || first.header.Get(api.HeaderReplayed) != "" {
			t.Fatalf("first: %d %v %s", first.status, first.header, first.body)
		}
		for range 3 {
			again := ts.do(http.MethodPost, "/v1/chains/orders/2026/entries", token, "k-1", body)
			if again.status != http.StatusCreated || again.header.Get(api.HeaderReplayed) != "true" || !bytes.Equal(again.body, first.body) {
				t.Fatalf("replay: %d %q %s, want %s", again.status, again.header.Get(api.HeaderReplayed), again.body, first.body)
			}
		}
		var res api.AppendResponse
		first.decode(t, http.StatusCreated, &res)
		if res.Chain != "orders/2026" || res.Seq != 1 {
			t.Fatalf("answer %+v", res)
		}
		var head api.Head
		ts.do(http.MethodGet, "/v1/chains/orders/2026/head", token, "", nil).decode(t, http.StatusOK, &head)
		if head.Seq != 1 || head.Hash != res.Hash {
			t.Fatalf("head %+v after one append and three replays", head)
		}
		var e api.Entry
		ts.do(http.MethodGet, "/v1/chains/orders/2026/entries/1", token, "", nil).decode(t, http.StatusOK, &e)
		if string(e.Payload) != `{"id":42}` || e.Type != "order/v1" || e.Chain != "orders/2026" || e.IdempotencyKey == "" {
			t.Fatalf("entry %+v", e)
		}
		// The same key with another body is refused, and writes nothing.
		other := ts.do(http.MethodPost, "/v1/chains/orders/2026/entries", token, "k-1", api.AppendRequest{Type: "order/v1", Payload: []byte("x")})
		other.wantProblem(t, http.StatusConflict, api.CodeKeyReused)
		// A second key appends.
		ts.do(http.MethodPost, "/v1/chains/orders/2026/entries", token, "k-2", body).decode(t, http.StatusCreated, &res)
		var page api.EntryPage
		ts.do(http.MethodGet, "/v1/chains/orders/2026/entries?from=1&limit=1", token, "", nil).decode(t, http.StatusOK, &page)
		if len(page.Entries) != 1 || page.NextSeq != 2 {
			t.Fatalf("page %+v", page)
		}
	})
}
