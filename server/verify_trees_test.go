package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/server"
)

// flipTreeByte changes the last byte of a chain's stored Merkle tree (its
// compact range) behind the engine's back, its entries untouched.
func flipTreeByte(t *testing.T, db *chain.DB, chainName string) {
	t.Helper()
	ctx := context.Background()
	stx, err := db.Backend().Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer stx.Rollback()
	key := []byte("\x00tree/v1/r/" + chainName)
	v, err := stx.StateGet(ctx, key)
	if err != nil {
		t.Fatalf("tree of %s: %v", chainName, err)
	}
	v = append([]byte(nil), v...)
	v[len(v)-1] ^= 1
	if err := stx.StatePut(ctx, key, v); err != nil {
		t.Fatal(err)
	}
	if err := stx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// failureList is a report's failures as "chain seq reason".
func failureList(rep api.VerifyReport) string {
	var out []string
	for _, f := range rep.Failures {
		out = append(out, f.Chain+" "+itoa(int(f.Seq))+" "+f.Reason)
	}
	return strings.Join(out, "; ")
}

// With trees, a chain's damaged stored tree is reported to its tenant, at
// the tree's size and under the tenant's own chain name, and never to
// another tenant; without, the entries' checks pass.
func TestVerifyFindsDamagedTreesWithinTheTenant(t *testing.T) {
	forEachBackend(t, server.Options{}, func(t *testing.T, ts *testServer) {
		acme, beta := ts.key("acme", allScopes...), ts.key("beta", allScopes...)
		for _, tenant := range []string{"acme", "beta"} {
			// Three entries of the chain in one transaction store its tree.
			err := ts.db.Update(context.Background(), func(tx *chain.Tx) error {
				for i := range 3 {
					if _, err := tx.Append(chain.Request{Chain: tenant + "/ledger", Type: "t/v1", Payload: []byte{'a' + byte(i)}}); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		trees := api.VerifyRequest{Trees: true}
		if rep := verifyAs(t, ts, acme, trees); !rep.OK || rep.Chains != 1 || rep.Entries != 3 {
			t.Fatalf("intact: %+v", rep)
		}
		flipTreeByte(t, ts.db, "beta/ledger")
		if rep := verifyAs(t, ts, acme, trees); !rep.OK {
			t.Fatalf("acme is shown beta's damaged tree: %+v", rep)
		}
		if got := failureList(verifyAs(t, ts, beta, trees)); got != "ledger 3 tree_mismatch" {
			t.Fatalf("beta's damaged tree: %q", got)
		}
		if rep := verifyAs(t, ts, beta, api.VerifyRequest{}); !rep.OK {
			t.Fatalf("without trees, beta's intact entries: %+v", rep)
		}
		flipTreeByte(t, ts.db, "acme/ledger")
		r := ts.do(http.MethodPost, "/v1/verify", acme, "", api.VerifyRequest{Chains: []string{"ledger"}, Trees: true})
		var rep api.VerifyReport
		r.decode(t, http.StatusOK, &rep)
		if got := failureList(rep); got != "ledger 3 tree_mismatch" || strings.Contains(string(r.body), "beta") {
			t.Fatalf("acme's damaged tree: %q: %s", got, r.body)
		}
	})
}
