package reliability

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/financial"
	"github.com/ledgerworks/ledger/stockmovement"
	"github.com/ledgerworks/ledger/storage/storagetest"
	"github.com/ledgerworks/ledger/valuations"
)

// Two tenants that use the same item, location and account names and the
// same idempotency keys and operation ids.
var isolationTenants = [2]string{"acme", "globex"}

// forEachBackend runs fn with a fresh DB on every registered backend.
func forEachBackend(t *testing.T, fn func(t *testing.T, db *chain.DB)) {
	for _, f := range storagetest.Factories(t) {
		t.Run(f.Name, func(t *testing.T) {
			db, err := chain.OpenBackend(f.Open(t), chain.Options{Clock: testClock()})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			fn(t, db)
		})
	}
}

// TestIsolationRawChains: the same key on the same scoped chain name of two
// tenants is two independent requests; neither tenant's lookups, replays or
// chain listings reach the other's entries, and no choice of components can
// name another tenant's chain.
func TestIsolationRawChains(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		var entries [2]chain.Entry
		for i, tenant := range isolationTenants {
			c := mustChain(chain.ScopedName(tenant, "raw", "orders"))
			res := mustAppend(t, db, chain.Request{Chain: c, IdempotencyKey: "order-1", Type: "raw/v1", Payload: []byte("from " + tenant)})
			if res.Replayed || res.Entry.Seq != 1 {
				t.Fatalf("%s: first append of key order-1: seq %d replayed %v; another tenant's key leaked in", tenant, res.Entry.Seq, res.Replayed)
			}
			entries[i] = res.Entry
		}
		for i, tenant := range isolationTenants {
			c := mustChain(chain.ScopedName(tenant, "raw", "orders"))
			res := mustAppend(t, db, chain.Request{Chain: c, IdempotencyKey: "order-1", Type: "raw/v1", Payload: []byte("from " + tenant)})
			if !res.Replayed || res.Entry.Hash != entries[i].Hash {
				t.Errorf("%s: retry replayed %v entry %x; want its own entry", tenant, res.Replayed, res.Entry.Hash[:4])
			}
			got, err := db.Lookup(ctx, c, "order-1")
			if err != nil || string(got.Payload) != "from "+tenant {
				t.Errorf("%s: lookup of order-1 gives %q (%v)", tenant, got.Payload, err)
			}
			other := isolationTenants[1-i]
			_, err = db.Append(ctx, chain.Request{Chain: c, IdempotencyKey: "order-1", Type: "raw/v1", Payload: []byte("from " + other)})
			if !errors.Is(err, chain.ErrIdempotencyConflict) {
				t.Errorf("%s: the other tenant's payload under its key: %v; want a conflict in its own chain only", tenant, err)
			}
		}
		// Components cannot carry a separator, so "acme/raw" + "orders"
		// never names acme's chain from another tenant's scope.
		for _, parts := range [][]string{{"globex", "acme/raw", "orders"}, {"globex/../acme", "raw", "orders"}, {"acme", "raw/orders"}} {
			if name, err := chain.ScopedName(parts[0], parts[1], parts[2:]...); err == nil {
				t.Errorf("ScopedName%q = %q; want it refused", parts, name)
			}
		}
		for h, err := range db.Chains(ctx, "") {
			if err != nil {
				t.Fatal(err)
			}
			owners := 0
			for _, tenant := range isolationTenants {
				if strings.HasPrefix(h.Chain, tenant+chain.NameSeparator) {
					owners++
				}
			}
			if owners != 1 {
				t.Errorf("chain %q belongs to %d tenants", h.Chain, owners)
			}
		}
	})
}

// TestIsolationDomainPackages: two tenants with the same item, locations,
// accounts, idempotency keys and operation ids, through each domain
// package: their movements, balances, valuations and postings stay apart,
// a retry replays only the caller's own operation, and one tenant's stock
// never covers the other's issue.
func TestIsolationDomainPackages(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		quantities := map[string]int64{"acme": 10, "globex": 3}
		cents := map[string]int64{"acme": 12345, "globex": 99}
		receive := func(tenant string) (stockmovement.Result, error) {
			return stockmovement.Receive(ctx, db, stockmovement.ReceiveRequest{Tenant: tenant, Item: crashItem,
				Location: crashLocations[0], Quantity: decimal.MustNew(quantities[tenant], 0), IdempotencyKey: "grn-1"})
		}
		valuate := func(tenant string) (valuations.Result, error) {
			cost := decimal.MustNew(cents[tenant], 2)
			return valuations.Receive(ctx, db, valuations.ReceiveRequest{Tenant: tenant, Item: crashItem,
				Location: crashLocations[0], OperationID: "grn-1", Quantity: decimal.MustNew(quantities[tenant], 0), UnitCost: &cost})
		}
		post := func(tenant string) (financial.PostingResult, error) {
			return bookOf(db, tenant).Post(ctx, posting("grn-1", cents[tenant]))
		}
		for _, tenant := range isolationTenants {
			if err := setupTenant(ctx, db, tenant, false); err != nil {
				t.Fatal(err)
			}
		}
		for round, wantReplayed := range []bool{false, true} {
			for _, tenant := range isolationTenants {
				s, err := receive(tenant)
				if err != nil || s.Replayed != wantReplayed {
					t.Fatalf("round %d %s: stock receipt grn-1: replayed %v, err %v; want replayed %v", round, tenant, s.Replayed, err, wantReplayed)
				}
				v, err := valuate(tenant)
				if err != nil || v.Replayed != wantReplayed {
					t.Fatalf("round %d %s: valuation grn-1: replayed %v, err %v; want replayed %v", round, tenant, v.Replayed, err, wantReplayed)
				}
				p, err := post(tenant)
				if err != nil || p.Replayed != wantReplayed {
					t.Fatalf("round %d %s: posting grn-1: replayed %v, err %v; want replayed %v", round, tenant, p.Replayed, err, wantReplayed)
				}
			}
		}
		for _, tenant := range isolationTenants {
			b, err := stockmovement.GetBalance(ctx, db, tenant, crashItem, crashLocations[0])
			if err != nil || b.Quantity != decimal.MustNew(quantities[tenant], 0) {
				t.Errorf("%s: stock balance %v (%v), want %d", tenant, b.Quantity, err, quantities[tenant])
			}
			vb, err := valuations.GetBalance(ctx, db, tenant, crashItem, crashLocations[0])
			wantValue := decimal.MustNew(quantities[tenant]*cents[tenant], 2)
			if err != nil || vb.Quantity != decimal.MustNew(quantities[tenant], 0) || vb.Value != wantValue {
				t.Errorf("%s: valuation %v / %v (%v), want %d / %v", tenant, vb.Quantity, vb.Value, err, quantities[tenant], wantValue)
			}
			p, err := bookOf(db, tenant).PostingByKey(ctx, "grn-1")
			if err != nil || p.Posting.Lines[0].Amount != decimal.MustNew(cents[tenant], 2) {
				t.Errorf("%s: posting grn-1 is %+v (%v)", tenant, p.Posting, err)
			}
			fb, err := bookOf(db, tenant).Balance(ctx, crashInventory, crashCurrency)
			if err != nil || fb.Amount != decimal.MustNew(cents[tenant], 2) {
				t.Errorf("%s: inventory balance %v (%v), want %d cents", tenant, fb.Amount, err, cents[tenant])
			}
		}
		// globex holds 3: acme's 10 must not let it issue 5.
		_, err := stockmovement.Issue(ctx, db, stockmovement.IssueRequest{Tenant: "globex", Item: crashItem,
			Location: crashLocations[0], Quantity: decimal.MustNew(5, 0), IdempotencyKey: "issue-1"})
		if !errors.Is(err, stockmovement.ErrNegativeStock) {
			t.Errorf("globex issuing 5 of its 3: %v; want ErrNegativeStock", err)
		}
		_, err = valuations.Issue(ctx, db, valuations.IssueRequest{Tenant: "globex", Item: crashItem,
			Location: crashLocations[0], OperationID: "issue-1", Quantity: decimal.MustNew(5, 0)})
		if !errors.Is(err, valuations.ErrInsufficientStock) {
			t.Errorf("globex valuing an issue of 5 of its 3: %v; want ErrInsufficientStock", err)
		}
		// A tenant cannot reverse the other's movement, even by naming it.
		acmeChain := mustChain(stockmovement.MovementChain("acme", crashItem, crashLocations[0]))
		_, err = stockmovement.Reverse(ctx, db, stockmovement.ReverseRequest{Tenant: "globex",
			Original: stockmovement.Ref{Chain: acmeChain, Seq: 1}, IdempotencyKey: "reverse-1"})
		if !errors.Is(err, stockmovement.ErrCrossTenant) {
			t.Errorf("globex reversing acme's movement: %v; want ErrCrossTenant", err)
		}
		assertVerifies(t, db)
		for name, check := range map[string]func(context.Context, *chain.DB) ([]chain.Failure, error){
			"stockmovement": stockmovement.Check, "financial": financial.Check, "valuations": valuations.Check,
		} {
			if failures, err := check(ctx, db); err != nil || len(failures) > 0 {
				t.Errorf("%s.Check: %v %v", name, failures, err)
			}
		}
		// Every chain and every state key belongs to exactly one tenant.
		err = db.View(ctx, func(tx *chain.Tx) error {
			for kv, err := range tx.StateScan(nil, nil, false) {
				if err != nil {
					return err
				}
				parts := strings.SplitN(string(kv.Key), "/", 3)
				if len(parts) < 3 || (parts[1] != "acme" && parts[1] != "globex") {
					t.Errorf("state key %q is not <domain>/<tenant>/…", kv.Key)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}
