package stockmovement_test

import (
	"cmp"
	"context"
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/stockmovement"
)

// buildCheckLedger records a little of everything for two tenants, plus a
// chain of another domain that Check must leave alone.
func buildCheckLedger(t *testing.T, db *chain.DB) {
	ctx := context.Background()
	for _, tenant := range []string{"acme", "beta"} {
		setup(t, db, tenant)
		if _, err := stockmovement.Receive(ctx, db, stockmovement.ReceiveRequest{Tenant: tenant, Item: "pcs", Location: "A",
			Quantity: decimal.MustNew(10, 0), IdempotencyKey: "r"}); err != nil {
			t.Fatal(err)
		}
		if _, err := stockmovement.Transfer(ctx, db, stockmovement.TransferRequest{Tenant: tenant, Item: "pcs", From: "A", To: "B",
			Quantity: decimal.MustNew(4, 0), IdempotencyKey: "t"}); err != nil {
			t.Fatal(err)
		}
		if _, err := stockmovement.Reverse(ctx, db, stockmovement.ReverseRequest{Tenant: tenant,
			Original: stockmovement.Ref{Chain: tenant + "/stock/pcs/A", Seq: 2}, IdempotencyKey: "rv"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Append(ctx, chain.Request{Chain: "acme/fin/book/cash", Type: "fin.posting/v1", Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
}

func TestCheckFindsTampering(t *testing.T) {
	putState := func(key string, value []byte) func(t *testing.T, db *chain.DB) {
		return func(t *testing.T, db *chain.DB) {
			err := db.Update(context.Background(), func(tx *chain.Tx) error { return tx.StatePut([]byte(key), value) })
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	deleteState := func(key []byte) func(t *testing.T, db *chain.DB) {
		return func(t *testing.T, db *chain.DB) {
			err := db.Update(context.Background(), func(tx *chain.Tx) error { return tx.StateDelete(key) })
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	appendRaw := func(chainName, typ string, payload []byte) func(t *testing.T, db *chain.DB) {
		return func(t *testing.T, db *chain.DB) {
			if _, err := db.Append(context.Background(), chain.Request{Chain: chainName, Type: typ, Payload: payload}); err != nil {
				t.Fatal(err)
			}
		}
	}
	balance := func(units int64, seq uint64) []byte {
		v := binary.BigEndian.AppendUint64(nil, uint64(units))
		return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(v, seq), 0)
	}
	marker := append([]byte("stock/acme/reversed/pcs/A/"), binary.BigEndian.AppendUint64(nil, 2)...)
	cases := []struct {
		name   string
		tamper func(t *testing.T, db *chain.DB)
		chain  string // of a failure Check must report
		detail string // part of that failure's detail
	}{
		{"balance changed", putState("stock/acme/balance/pcs/A", balance(11, 3)), "acme/stock/pcs/A", "state holds balance units 11"},
		{"balance missing", deleteState([]byte("stock/acme/balance/pcs/B")), "acme/stock/pcs/B", "missing from state"},
		{"total changed", putState("stock/beta/total/pcs", binary.BigEndian.AppendUint64(nil, 9)), "beta/stock/pcs", "state holds total 9"},
		{"balance without chain", putState("stock/acme/balance/pcs/C", balance(0, 0)), "acme/stock/pcs/C", "without entries"},
		{"state of an item without chains", putState("stock/acme/total/kg", binary.BigEndian.AppendUint64(nil, 0)), "acme/stock/kg", "without movement chains"},
		{"definition changed", putState("stock/acme/location/A", append(binary.BigEndian.AppendUint64(nil, 4),
			stockmovement.EncodeLocation(stockmovement.Location{ID: "A", Name: "renamed"})...)), "acme/stock/catalog", "differs from its definition"},
		{"definition missing", deleteState([]byte("stock/beta/item/kg")), "beta/stock/catalog", "missing from state"},
		{"marker missing", deleteState(marker), "acme/stock/pcs/A", "no marker"},
		{"entry with a wrong running quantity", appendRaw("acme/stock/pcs/A", stockmovement.MovementType,
			stockmovement.EncodeMovement(stockmovement.Movement{Kind: stockmovement.KindReceipt,
				Quantity: decimal.MustNew(1, 0), Balance: decimal.MustNew(100, 0)})), "acme/stock/pcs/A", "records balance 100, movements sum to 11"},
		{"foreign entry in a movement chain", appendRaw("beta/stock/pcs/B", "other/v1", []byte("x")), "beta/stock/pcs/B", "type \"other/v1\""},
		{"state of an undefined item", func(t *testing.T, db *chain.DB) {
			appendRaw("acme/stock/ghost/A", stockmovement.MovementType, []byte("+1"))(t, db)
			putState("stock/acme/balance/ghost/A", balance(1, 1))(t, db)
		}, "acme/stock/ghost", "has not defined"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, db *chain.DB) {
				buildCheckLedger(t, db)
				mustCheck(t, db)
				c.tamper(t, db)
				failures, err := stockmovement.Check(context.Background(), db)
				if err != nil {
					t.Fatal(err)
				}
				found := false
				for _, f := range failures {
					if f.Reason != chain.ReasonStateMismatch {
						t.Fatalf("reason %q in %v", f.Reason, f)
					}
					found = found || f.Chain == c.chain && strings.Contains(f.Detail, c.detail)
				}
				if !found {
					t.Fatalf("no failure of chain %q with %q in %v", c.chain, c.detail, failures)
				}
				if !slices.IsSortedFunc(failures, func(a, b chain.Failure) int {
					return cmp.Or(strings.Compare(a.Chain, b.Chain), cmp.Compare(a.Seq, b.Seq))
				}) {
					t.Fatalf("failures out of order: %v", failures)
				}
			})
		})
	}
}

// TestCheckSkipsChainsOfUndefinedItems: raw entries under a stock-like name
// of an item the tenant never defined were not written by this package and
// have no state, so Check does not judge them.
func TestCheckSkipsChainsOfUndefinedItems(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *chain.DB) {
		buildCheckLedger(t, db)
		for _, payload := range []string{"+10", "\x00\x01binary"} {
			if _, err := db.Append(context.Background(), chain.Request{Chain: "acme/stock/SKU-1/WH-1",
				Type: stockmovement.MovementType, Payload: []byte(payload)}); err != nil {
				t.Fatal(err)
			}
		}
		mustCheck(t, db)
	})
}
