package stockmovement_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/stockmovement"
	"github.com/ledgerworks/ledger/storage/storagetest"
)

// The model is plain data: balances per (tenant, item, location), the
// entries each chain holds, and the requests that succeeded (to retry them).
type place struct{ tenant, item, location string }

type modelEntry struct {
	place    place
	quantity int64 // signed change
	reversal bool
	reversed bool
	partner  int // index of the other half of a transfer; -1 otherwise
	seq      uint64
}

type modelOp struct {
	run     func(ctx context.Context, db *chain.DB, changed bool) (stockmovement.Result, error)
	entries []int // model entries it wrote
}

type stockModel struct {
	db       *chain.DB
	tenants  [2]string
	balances map[place]int64
	entries  []modelEntry
	heads    map[place]uint64
	done     []modelOp
	keys     int
}

var (
	modelItems     = []string{"pcs", "neg", "kg"} // as in setup: neg allows negative stock, kg has scale 3
	modelLocations = []string{"A", "B", "C"}
)

func scaleOf(item string) uint8 {
	if item == "kg" {
		return 3
	}
	return 0
}

func (m *stockModel) place(t *rapid.T) place {
	return place{rapid.SampledFrom(m.tenants[:]).Draw(t, "tenant"), rapid.SampledFrom(modelItems).Draw(t, "item"),
		rapid.SampledFrom(modelLocations).Draw(t, "location")}
}

func (m *stockModel) key() string { m.keys++; return fmt.Sprintf("k%d", m.keys) }

// allowed reports whether a change may be applied under the item's policy.
func allowed(p place, balance, change int64) bool {
	return p.item == "neg" || change > 0 || balance+change >= 0
}

// record adds the entries of a successful operation to the model and checks
// them against the result.
func (m *stockModel) record(t *rapid.T, res stockmovement.Result, places []place, changes []int64, reversal bool) []int {
	if res.Replayed || len(res.Entries) != len(places) {
		t.Fatalf("result %+v for %d places", res, len(places))
	}
	var indexes []int
	for i, p := range places {
		m.balances[p] += changes[i]
		m.heads[p]++
		e := res.Entries[i]
		if e.Seq != m.heads[p] || e.Quantity.Units() != changes[i] || e.Balance.Units() != m.balances[p] {
			t.Fatalf("entry %+v, model seq %d change %d balance %d", e, m.heads[p], changes[i], m.balances[p])
		}
		m.entries = append(m.entries, modelEntry{place: p, quantity: changes[i], reversal: reversal, partner: -1, seq: e.Seq})
		indexes = append(indexes, len(m.entries)-1)
	}
	if len(indexes) == 2 {
		m.entries[indexes[0]].partner, m.entries[indexes[1]].partner = indexes[1], indexes[0]
	}
	return indexes
}

func (m *stockModel) expectRefused(t *rapid.T, err error, sentinel error) {
	if !errors.Is(err, sentinel) {
		t.Fatalf("got %v, want %v", err, sentinel)
	}
}

func (m *stockModel) single(t *rapid.T, kind string) {
	p := m.place(t)
	units := rapid.Int64Range(1, 1000).Draw(t, "units")
	change := units
	if kind == "issue" || (kind == "adjust" && rapid.Bool().Draw(t, "down")) {
		change = -units
	}
	key := m.key()
	run := func(ctx context.Context, db *chain.DB, changed bool) (stockmovement.Result, error) {
		u := units
		if changed {
			u++
		}
		quantity := decimal.MustNew(u, scaleOf(p.item))
		switch kind {
		case "receive":
			return stockmovement.Receive(ctx, db, stockmovement.ReceiveRequest{Tenant: p.tenant, Item: p.item,
				Location: p.location, Quantity: quantity, IdempotencyKey: key})
		case "issue":
			return stockmovement.Issue(ctx, db, stockmovement.IssueRequest{Tenant: p.tenant, Item: p.item,
				Location: p.location, Quantity: quantity, IdempotencyKey: key})
		}
		if change < 0 {
			quantity, _ = quantity.Neg()
		}
		return stockmovement.Adjust(ctx, db, stockmovement.AdjustRequest{Tenant: p.tenant, Item: p.item,
			Location: p.location, Quantity: quantity, Reason: "count", IdempotencyKey: key})
	}
	res, err := run(context.Background(), m.db, false)
	if !allowed(p, m.balances[p], change) {
		m.expectRefused(t, err, stockmovement.ErrNegativeStock)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	m.done = append(m.done, modelOp{run: run, entries: m.record(t, res, []place{p}, []int64{change}, false)})
}

func (m *stockModel) transfer(t *rapid.T) {
	from := m.place(t)
	to := from
	to.location = rapid.SampledFrom(modelLocations).Filter(func(l string) bool { return l != from.location }).Draw(t, "to")
	units := rapid.Int64Range(1, 1000).Draw(t, "units")
	key := m.key()
	run := func(ctx context.Context, db *chain.DB, changed bool) (stockmovement.Result, error) {
		u := units
		if changed {
			u++
		}
		return stockmovement.Transfer(ctx, db, stockmovement.TransferRequest{Tenant: from.tenant, Item: from.item,
			From: from.location, To: to.location, Quantity: decimal.MustNew(u, scaleOf(from.item)), IdempotencyKey: key})
	}
	res, err := run(context.Background(), m.db, false)
	if !allowed(from, m.balances[from], -units) {
		m.expectRefused(t, err, stockmovement.ErrNegativeStock)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	m.done = append(m.done, modelOp{run: run, entries: m.record(t, res, []place{from, to}, []int64{-units, units}, false)})
}

func (m *stockModel) reverse(t *rapid.T) {
	if len(m.entries) == 0 {
		t.Skip("nothing to reverse")
	}
	index := rapid.IntRange(0, len(m.entries)-1).Draw(t, "entry")
	target := m.entries[index]
	tenant := target.place.tenant
	crossTenant := rapid.IntRange(0, 9).Draw(t, "cross") == 0
	if crossTenant {
		tenant = m.tenants[1-slices.Index(m.tenants[:], tenant)]
	}
	key := m.key()
	ref := stockmovement.Ref{Chain: target.place.tenant + "/stock/" + target.place.item + "/" + target.place.location, Seq: target.seq}
	run := func(ctx context.Context, db *chain.DB, changed bool) (stockmovement.Result, error) {
		note := ""
		if changed {
			note = "changed"
		}
		return stockmovement.Reverse(ctx, db, stockmovement.ReverseRequest{Tenant: tenant, Original: ref, Note: note, IdempotencyKey: key})
	}
	res, err := run(context.Background(), m.db, false)
	halves := []int{index}
	if target.partner >= 0 {
		halves = append(halves, target.partner)
		if m.entries[index].quantity > 0 { // the out half comes first
			halves[0], halves[1] = halves[1], halves[0]
		}
	}
	var places []place
	var changes []int64
	for _, h := range halves {
		places = append(places, m.entries[h].place)
		changes = append(changes, -m.entries[h].quantity)
	}
	switch {
	case crossTenant:
		m.expectRefused(t, err, stockmovement.ErrCrossTenant)
		return
	case target.reversal:
		m.expectRefused(t, err, stockmovement.ErrNotReversible)
		return
	case target.reversed:
		m.expectRefused(t, err, stockmovement.ErrAlreadyReversed)
		return
	}
	for i, p := range places {
		if !allowed(p, m.balances[p], changes[i]) {
			m.expectRefused(t, err, stockmovement.ErrNegativeStock)
			return
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range halves {
		m.entries[h].reversed = true
	}
	m.done = append(m.done, modelOp{run: run, entries: m.record(t, res, places, changes, true)})
}

// replay retries an earlier successful operation: the original entries come
// back and nothing moves.
func (m *stockModel) replay(t *rapid.T) {
	if len(m.done) == 0 {
		t.Skip("nothing to replay")
	}
	op := m.done[rapid.IntRange(0, len(m.done)-1).Draw(t, "op")]
	res, err := op.run(context.Background(), m.db, false)
	if err != nil || !res.Replayed || len(res.Entries) != len(op.entries) {
		t.Fatalf("replay: %+v %v", res, err)
	}
	for i, index := range op.entries {
		if res.Entries[i].Seq != m.entries[index].seq {
			t.Fatalf("replayed seq %d, recorded %d", res.Entries[i].Seq, m.entries[index].seq)
		}
	}
}

// conflict reuses an earlier key for a different request.
func (m *stockModel) conflict(t *rapid.T) {
	if len(m.done) == 0 {
		t.Skip("nothing to conflict with")
	}
	op := m.done[rapid.IntRange(0, len(m.done)-1).Draw(t, "op")]
	_, err := op.run(context.Background(), m.db, true)
	m.expectRefused(t, err, chain.ErrIdempotencyConflict)
}

// batch records several receipts in one caller transaction, each submitted
// twice: the second submission replays inside the transaction.
func (m *stockModel) batch(t *rapid.T) {
	count := rapid.IntRange(1, 5).Draw(t, "count")
	places := make([]place, count)
	units := make([]int64, count)
	keys := make([]string, count)
	for i := range places {
		places[i], units[i], keys[i] = m.place(t), rapid.Int64Range(1, 1000).Draw(t, "units"), m.key()
	}
	results := make([]stockmovement.Result, count)
	err := m.db.Update(context.Background(), func(tx *chain.Tx) error {
		for i, p := range places {
			for attempt := range 2 {
				res, err := stockmovement.ReceiveTx(tx, stockmovement.ReceiveRequest{Tenant: p.tenant, Item: p.item,
					Location: p.location, Quantity: decimal.MustNew(units[i], scaleOf(p.item)), IdempotencyKey: keys[i]})
				if err != nil {
					return err
				}
				if res.Replayed != (attempt == 1) {
					return fmt.Errorf("attempt %d replayed %v", attempt, res.Replayed)
				}
				results[i] = res
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range places {
		results[i].Replayed = false
		key, original := keys[i], units[i]
		run := func(ctx context.Context, db *chain.DB, changed bool) (stockmovement.Result, error) {
			u := original
			if changed {
				u++
			}
			return stockmovement.Receive(ctx, db, stockmovement.ReceiveRequest{Tenant: p.tenant, Item: p.item,
				Location: p.location, Quantity: decimal.MustNew(u, scaleOf(p.item)), IdempotencyKey: key})
		}
		m.done = append(m.done, modelOp{run: run, entries: m.record(t, results[i], []place{p}, []int64{units[i]}, false)})
	}
}

// invariants compares every balance and total with the model, reading them
// all in one transaction: balances by one scan per item.
func (m *stockModel) invariants(t *rapid.T) {
	err := m.db.View(context.Background(), func(tx *chain.Tx) error {
		for _, tenant := range m.tenants {
			for _, item := range modelItems {
				balances, err := stockmovement.ItemBalancesTx(tx, tenant, item)
				if err != nil {
					return err
				}
				var sum int64
				for _, location := range modelLocations {
					p := place{tenant, item, location}
					var got stockmovement.Balance
					if i := slices.IndexFunc(balances, func(b stockmovement.Balance) bool { return b.Location == location }); i >= 0 {
						got = balances[i]
					} else if m.heads[p] != 0 {
						t.Fatalf("%v: no balance, model %d at seq %d", p, m.balances[p], m.heads[p])
					}
					if got.Quantity.Units() != m.balances[p] || got.Seq != m.heads[p] {
						t.Fatalf("%v: balance %s at seq %d, model %d at seq %d", p, got.Quantity, got.Seq, m.balances[p], m.heads[p])
					}
					if item != "neg" && m.balances[p] < 0 {
						t.Fatalf("%v is negative: %d", p, m.balances[p])
					}
					sum += m.balances[p]
				}
				total, err := stockmovement.ItemTotalTx(tx, tenant, item)
				if err != nil || total.Units() != sum {
					t.Fatalf("%s/%s: total %s %v, model %d", tenant, item, total, err, sum)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestStateMachine runs the model on every backend, each check on a fresh
// bbolt file (cheap to open) or, on a shared database backend, on one ledger
// for all checks with two tenants of each check's own (a schema costs more
// than a check's steps). Tenants never see each other's chains; Check
// covers the whole ledger after every check.
func TestStateMachine(t *testing.T) {
	for _, f := range storagetest.Factories(t) {
		t.Run(f.Name, func(t *testing.T) {
			if f.Name != "bolt" && !checksExplicit {
				setFlag(t, "rapid.checks", stateMachineChecksShared)
			}
			open := func() *chain.DB {
				db, err := chain.OpenBackend(f.Open(t), chain.Options{Clock: steppingClock()})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { db.Close() })
				return db
			}
			var shared *chain.DB
			if f.Name != "bolt" {
				shared = open()
			}
			checks := 0
			rapid.Check(t, func(rt *rapid.T) {
				checks++
				db := shared
				if db == nil {
					db = open()
				}
				m := &stockModel{db: db, balances: map[place]int64{}, heads: map[place]uint64{},
					tenants: [2]string{fmt.Sprintf("c%d-a", checks), fmt.Sprintf("c%d-b", checks)}}
				for _, tenant := range m.tenants {
					setup(t, db, tenant)
				}
				rt.Repeat(map[string]func(*rapid.T){
					"receive":  func(t *rapid.T) { m.single(t, "receive") },
					"issue":    func(t *rapid.T) { m.single(t, "issue") },
					"adjust":   func(t *rapid.T) { m.single(t, "adjust") },
					"transfer": m.transfer,
					"reverse":  m.reverse,
					"replay":   m.replay,
					"conflict": m.conflict,
					"batch":    m.batch,
					"":         m.invariants,
				})
				failures, err := stockmovement.Check(context.Background(), db)
				if err != nil || len(failures) > 0 {
					rt.Fatalf("check: %v %v", failures, err)
				}
				if shared == nil {
					db.Close() // the cleanup's second Close is a no-op
				}
			})
		})
	}
}

// setFlag sets a command-line flag for the test and restores it after. The
// tests of this package do not run in parallel, so no other test sees it.
func setFlag(t *testing.T, name, value string) {
	previous := flag.Lookup(name).Value.String()
	if err := flag.Set(name, value); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { flag.Set(name, previous) })
}
