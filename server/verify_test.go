package server_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/server"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// verifyLedger is a ledger file in which tenants acme and beta each hold a
// chain "orders", written over the API.
type verifyLedger struct {
	path     string
	acmeHead api.AppendResponse
}

func newVerifyLedger(t *testing.T) verifyLedger {
	t.Helper()
	l := verifyLedger{path: filepath.Join(t.TempDir(), "ledger.db")}
	db, err := chain.Open(l.path, chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, db, server.Options{})
	for _, tenant := range []string{"acme", "beta"} {
		token := ts.key(tenant, allScopes...)
		for i := range 3 {
			var res api.AppendResponse
			ts.do(http.MethodPost, "/v1/chains/orders/entries", token, fmt.Sprintf("%s-%d", tenant, i),
				api.AppendRequest{Type: "order/v1", Payload: fmt.Appendf(nil, `{"order":%d}`, i)}).decode(t, http.StatusCreated, &res)
			if tenant == "acme" {
				l.acmeHead = res
			}
		}
	}
	ts.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return l
}

// damage flips the last byte of the stored record of chain at seq.
func (l verifyLedger) damage(t *testing.T, chainName string, seq uint64) {
	t.Helper()
	bdb, err := bbolt.Open(l.path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	err = bdb.Update(func(btx *bbolt.Tx) error {
		id, err := bolt.ChainID(btx, chainName)
		if err != nil {
			return err
		}
		rec := append([]byte(nil), bolt.RawEntry(btx, id, seq)...)
		if len(rec) == 0 {
			return fmt.Errorf("no record at %s/%d", chainName, seq)
		}
		rec[len(rec)-1] ^= 0x01
		return bolt.PutRawEntry(btx, id, seq, rec)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// serve opens the file and serves it until the test ends, returning an
// admin token of each tenant.
func (l verifyLedger) serve(t *testing.T) (ts *testServer, acme, beta string) {
	t.Helper()
	db, err := chain.Open(l.path, chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ts = startServer(t, db, server.Options{})
	return ts, ts.key("acme", allScopes...), ts.key("beta", allScopes...)
}

func verifyAs(t *testing.T, ts *testServer, token string, req any) api.VerifyReport {
	t.Helper()
	var rep api.VerifyReport
	ts.do(http.MethodPost, "/v1/verify", token, "", req).decode(t, http.StatusOK, &rep)
	return rep
}

// An intact ledger verifies, with its trees and against a saved head; a
// saved head it no longer holds is reported under the tenant's own name.
func TestVerifyIntactTreesAndHeads(t *testing.T) {
	l := newVerifyLedger(t)
	ts, acme, _ := l.serve(t)
	head := api.VerifyHead{Chain: "orders", Seq: l.acmeHead.Seq, Hash: l.acmeHead.Hash}
	for _, req := range []api.VerifyRequest{{}, {Trees: true}, {ExpectHeads: []api.VerifyHead{head}},
		{Chains: []string{"orders"}, Trees: true, ExpectHeads: []api.VerifyHead{head}}} {
		if rep := verifyAs(t, ts, acme, req); !rep.OK || rep.Chains != 1 || rep.Entries != 3 {
			t.Fatalf("%+v: %+v, want 1 intact chain of 3 entries", req, rep)
		}
	}
	other := head
	other.Hash = fmt.Sprintf("%064x", 1)
	rep := verifyAs(t, ts, acme, api.VerifyRequest{ExpectHeads: []api.VerifyHead{other}})
	if rep.OK || len(rep.Failures) != 1 || rep.Failures[0].Chain != "orders" || rep.Failures[0].Seq != head.Seq {
		t.Fatalf("a saved head the chain does not hold: %+v", rep)
	}
	ts.do(http.MethodPost, "/v1/verify", acme, "", api.VerifyRequest{ExpectHeads: []api.VerifyHead{{Chain: "orders", Hash: "zz"}}}).
		wantProblem(t, http.StatusBadRequest, api.CodeInvalidInput)
	ts.do(http.MethodPost, "/v1/verify", acme, "", api.VerifyRequest{Chains: []string{""}}).
		wantProblem(t, http.StatusBadRequest, api.CodeInvalidInput)
}

// A damaged entry is reported to its tenant, at its seq and under the
// tenant's own chain name, and never to another tenant.
func TestVerifyFindsDamageWithinTheTenant(t *testing.T) {
	l := newVerifyLedger(t)
	l.damage(t, "beta/orders", 2)
	ts, acme, beta := l.serve(t)
	if rep := verifyAs(t, ts, acme, api.VerifyRequest{}); !rep.OK {
		t.Fatalf("acme is shown beta's damage: %+v", rep)
	}
	rep := verifyAs(t, ts, beta, api.VerifyRequest{})
	if rep.OK || len(rep.Failures) == 0 || rep.Failures[0].Chain != "orders" || rep.Failures[0].Seq != 2 {
		t.Fatalf("beta's damaged entry 2: %+v", rep)
	}
	if rep.Failures[0].Reason != string(chain.ReasonHashMismatch) {
		t.Fatalf("reason %q, want %s", rep.Failures[0].Reason, chain.ReasonHashMismatch)
	}
}
