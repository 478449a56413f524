package servertest_test

import (
	"bytes"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/server"
	"github.com/ledgerworks/ledger/server/servertest"
)

// The full stack and the bare baseline answer one append alike.
func TestStartAndBareAppend(t *testing.T) {
	db, err := chain.Open(filepath.Join(t.TempDir(), "l.db"), chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	full := servertest.Start(t, server.Options{DB: db}).URL
	bare := servertest.Serve(t, servertest.BareAppend(db, "bare"))
	token := servertest.Key(t, db, "acme", apikey.ScopeWrite)
	for _, base := range []string{full, bare} {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/chains/c/entries", bytes.NewReader([]byte(`{"type":"t","payload":"cA=="}`)))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Idempotency-Key", "k")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("%s: %d", base, resp.StatusCode)
		}
	}
	for _, c := range []string{"acme/c", "bare/c"} {
		if h, err := db.Head(t.Context(), c); err != nil || h.Seq != 1 {
			t.Fatalf("%s: %+v %v", c, h, err)
		}
	}
}
