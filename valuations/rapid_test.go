package valuations

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/storage/storagetest"
	"pgregory.net/rapid"
)

// The model restates the arithmetic of docs/VALUATIONS.md with exact
// rationals (math/big.Rat) and explicit half-even rounding, independently of
// the package's 64- and 128-bit integer code.

func ratOf(units int64, scale uint8) *big.Rat {
	return new(big.Rat).SetFrac(big.NewInt(units), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil))
}

// roundRat rounds x to places decimal places, half to even.
func roundRat(x *big.Rat, places uint8) *big.Rat {
	scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(places)), nil)
	scaled := new(big.Rat).Mul(x, new(big.Rat).SetInt(scale))
	q, r := new(big.Int).QuoRem(scaled.Num(), scaled.Denom(), new(big.Int))
	// q truncates toward zero; compare 2|r| with the denominator.
	twice := new(big.Int).Abs(r)
	twice.Lsh(twice, 1)
	switch c := twice.Cmp(scaled.Denom()); {
	case c > 0 || c == 0 && q.Bit(0) == 1:
		if scaled.Sign() < 0 {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	return new(big.Rat).SetFrac(q, scale)
}

func rat(x *big.Rat) *big.Rat { return new(big.Rat).Set(x) }

// fits reports whether x, a multiple of 10^-scale, is an int64 number of
// units at scale: the package refuses anything else with ErrOverflow.
func fits(x *big.Rat, scale uint8) bool {
	scaled := new(big.Rat).Mul(x, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)))
	return scaled.IsInt() && scaled.Num().IsInt64()
}

func (l *modelLocation) clone() modelLocation {
	c := modelLocation{q: rat(l.q), v: rat(l.v), rate: rat(l.rate), rateKnown: l.rateKnown, changes: rat(l.changes)}
	for _, ly := range l.layers {
		c.layers = append(c.layers, modelLayer{rat(ly.q), rat(ly.v)})
	}
	for _, p := range l.pending {
		c.pending = append(c.pending, modelPending{p.op, rat(p.q), rat(p.est)})
	}
	return c
}

type modelLayer struct{ q, v *big.Rat }

type modelPending struct {
	op     string
	q, est *big.Rat
}

type modelLocation struct {
	q, v      *big.Rat
	rate      *big.Rat
	rateKnown bool
	layers    []modelLayer
	pending   []modelPending
	changes   *big.Rat // Σ value changes
}

type model struct {
	method        Method
	s             scales
	allowNegative bool
	locations     map[string]*modelLocation
}

func (m *model) at(loc string) *modelLocation {
	l, ok := m.locations[loc]
	if !ok {
		l = &modelLocation{q: new(big.Rat), v: new(big.Rat), rate: new(big.Rat), changes: new(big.Rat)}
		m.locations[loc] = l
	}
	return l
}

func (m *model) money(x *big.Rat) *big.Rat { return roundRat(x, m.s.minor) }
func (m *model) rateRound(x *big.Rat) *big.Rat {
	return roundRat(x, m.s.rate())
}

// takeRat is the value of t out of a layer (q, v).
func (m *model) takeRat(q, v, t *big.Rat) *big.Rat {
	if t.Cmp(q) == 0 {
		return rat(v)
	}
	x := new(big.Rat).Mul(v, t)
	return m.money(x.Quo(x, q))
}

func minRat(a, b *big.Rat) *big.Rat {
	if a.Cmp(b) < 0 {
		return rat(a)
	}
	return rat(b)
}

func sumEst(list []modelPending) *big.Rat {
	s := new(big.Rat)
	for _, p := range list {
		s.Add(s, p.est)
	}
	return s
}

// inflow: value in is vin; cost is the exact unit cost when given. On an
// error code the caller restores l.
func (m *model) inflow(l *modelLocation, q, vin, cost *big.Rat) (*big.Rat, string) {
	old := rat(l.v)
	restQ, restV := rat(q), rat(vin)
	for len(l.pending) > 0 && restQ.Sign() > 0 {
		p := &l.pending[0]
		t := minRat(p.q, restQ)
		est := m.takeRat(p.q, p.est, t)
		act := m.takeRat(restQ, restV, t)
		p.q.Sub(p.q, t)
		p.est.Sub(p.est, est)
		restQ.Sub(restQ, t)
		restV.Sub(restV, act)
		if p.q.Sign() == 0 {
			l.pending = l.pending[1:]
		}
	}
	incoming := cost
	if incoming == nil {
		incoming = m.rateRound(new(big.Rat).Quo(vin, q))
	}
	if !fits(incoming, m.s.rate()) {
		return nil, "overflow"
	}
	positive := l.q.Sign() > 0
	l.q = new(big.Rat).Add(l.q, q)
	newRate := rat(incoming)
	switch {
	case restQ.Sign() == 0:
		l.v = new(big.Rat).Neg(sumEst(l.pending))
	case m.method == FIFO:
		base := new(big.Rat)
		if positive {
			base = rat(old)
		}
		l.v = base.Add(base, restV)
		l.layers = append(l.layers, modelLayer{restQ, restV})
	default:
		if positive {
			w := new(big.Rat).Mul(q, incoming)
			if cost == nil {
				w = rat(vin)
			}
			x := new(big.Rat).Mul(new(big.Rat).Sub(l.q, q), l.rate)
			x.Add(x, w)
			newRate = m.rateRound(x.Quo(x, l.q))
		}
		l.v = m.money(new(big.Rat).Mul(l.q, newRate))
	}
	if !fits(newRate, m.s.rate()) || !fits(l.v, m.s.minor) || !fits(l.q, m.s.quantity) {
		return nil, "overflow"
	}
	l.rate, l.rateKnown = newRate, true
	change := new(big.Rat).Sub(l.v, old)
	l.changes.Add(l.changes, change)
	return change, ""
}

// outflow returns the value change, or an error code.
func (m *model) outflow(l *modelLocation, op string, q, estimate *big.Rat) (*big.Rat, string) {
	available := new(big.Rat)
	if l.q.Sign() > 0 {
		available = rat(l.q)
	}
	fromStock := minRat(q, available)
	shortfall := new(big.Rat).Sub(q, fromStock)
	if shortfall.Sign() > 0 && !m.allowNegative {
		return nil, "insufficient_stock"
	}
	rate := estimate
	if shortfall.Sign() > 0 && rate == nil {
		if !l.rateKnown {
			return nil, "no_rate"
		}
		rate = l.rate
	}
	old := rat(l.v)
	value := new(big.Rat)
	if m.method == FIFO {
		left := rat(fromStock)
		for left.Sign() > 0 {
			first := &l.layers[0]
			t := minRat(first.q, left)
			taken := m.takeRat(first.q, first.v, t)
			first.q = new(big.Rat).Sub(first.q, t)
			first.v = new(big.Rat).Sub(first.v, taken)
			if first.q.Sign() == 0 {
				l.layers = l.layers[1:]
			}
			left.Sub(left, t)
		}
		for _, ly := range l.layers {
			value.Add(value, ly.v)
		}
	} else if rest := new(big.Rat).Sub(available, fromStock); rest.Sign() > 0 {
		value = m.money(rest.Mul(rest, l.rate))
	}
	if shortfall.Sign() > 0 {
		est := m.money(new(big.Rat).Mul(shortfall, rate))
		if !fits(est, m.s.minor) {
			return nil, "overflow"
		}
		l.pending = append(l.pending, modelPending{op: op, q: shortfall, est: est})
		value = new(big.Rat).Neg(sumEst(l.pending))
	}
	l.q = new(big.Rat).Sub(l.q, q)
	l.v = value
	change := new(big.Rat).Sub(l.v, old)
	l.changes.Add(l.changes, change)
	return change, ""
}

func (m *model) adjust(l *modelLocation, amount *big.Rat) (*big.Rat, string) {
	if l.q.Sign() <= 0 {
		return nil, "no_stock"
	}
	old := rat(l.v)
	if m.method == FIFO {
		spread := new(big.Rat)
		next := make([]modelLayer, len(l.layers))
		total := new(big.Rat)
		for i, ly := range l.layers {
			share := new(big.Rat).Sub(amount, spread)
			if i < len(l.layers)-1 {
				share = m.money(new(big.Rat).Quo(new(big.Rat).Mul(amount, ly.q), l.q))
			}
			spread.Add(spread, share)
			next[i] = modelLayer{rat(ly.q), new(big.Rat).Add(ly.v, share)}
			if next[i].v.Sign() < 0 {
				return nil, "negative_value"
			}
			if !fits(next[i].v, m.s.minor) {
				return nil, "overflow"
			}
			total.Add(total, next[i].v)
		}
		l.layers, l.v = next, total
	} else {
		x := new(big.Rat).Mul(l.q, l.rate)
		x.Add(x, amount)
		if x.Sign() < 0 {
			return nil, "negative_value"
		}
		l.rate = m.rateRound(x.Quo(x, l.q))
		l.v = m.money(new(big.Rat).Mul(l.q, l.rate))
		if !fits(l.rate, m.s.rate()) || !fits(l.v, m.s.minor) {
			return nil, "overflow"
		}
	}
	change := new(big.Rat).Sub(l.v, old)
	l.changes.Add(l.changes, change)
	return change, ""
}

// machine drives the package and the model side by side.
type machine struct {
	ctx   context.Context
	db    *chain.DB
	it    Item
	model *model
	next  int
	done  []doneOp // successful operations, for replays and conflicts
}

type doneOp struct {
	run    func() (Result, error)
	other  func() (Result, error) // the same operation id with a different request
	result Result
}

var rapidLocations = []string{"A", "B"}

func (m *machine) id() string {
	m.next++
	return fmt.Sprintf("op-%d", m.next)
}

func (m *machine) quantity(t *rapid.T) decimal.Decimal {
	return decimal.MustNew(rapid.Int64Range(1, 2000).Draw(t, "quantity"), m.it.QuantityScale)
}

func (m *machine) cost(t *rapid.T, label string) *decimal.Decimal {
	places := rapid.Uint8Range(0, m.model.s.minor+2).Draw(t, label+" places")
	d := decimal.MustNew(rapid.Int64Range(0, 1_000_000).Draw(t, label), places)
	return &d
}

func toRat(d decimal.Decimal) *big.Rat { return ratOf(d.Units(), d.Scale()) }

// expectSame compares a leg with the model's location.
func (m *machine) expectSame(t *rapid.T, leg Leg, change *big.Rat) {
	if got := toRat(leg.ValueChange); got.Cmp(change) != 0 {
		t.Fatalf("%s: value change %s, model %s", leg.Location, leg.ValueChange, change.FloatString(int(m.model.s.minor)))
	}
}

// apply runs an operation and the model's expectation of it.
func (m *machine) apply(t *rapid.T, run, other func() (Result, error), expect func() ([]*big.Rat, string)) {
	before := tenantSnapshot(t, m.db, m.it.Tenant)
	res, err := run()
	changes, code := expect()
	if code != "" {
		if Code(err) != code || !errors.Is(err, chain.ErrInvalid) {
			t.Fatalf("error %v, model expects %s", err, code)
		}
		if tenantSnapshot(t, m.db, m.it.Tenant) != before {
			t.Fatalf("refused operation wrote")
		}
		return
	}
	if err != nil {
		t.Fatalf("operation failed: %v", err)
	}
	if len(res.Legs) != len(changes) {
		t.Fatalf("%d legs, model %d", len(res.Legs), len(changes))
	}
	for i, leg := range res.Legs {
		m.expectSame(t, leg, changes[i])
	}
	m.done = append(m.done, doneOp{run: run, other: other, result: res})
}

func (m *machine) receive(t *rapid.T) {
	loc := rapid.SampledFrom(rapidLocations).Draw(t, "location")
	r := ReceiveRequest{Tenant: m.it.Tenant, Item: m.it.ID, Location: loc, OperationID: m.id(), Quantity: m.quantity(t)}
	if rapid.Bool().Draw(t, "by value") {
		v := decimal.MustNew(rapid.Int64Range(0, 10_000_000).Draw(t, "value"), m.it.MinorUnit)
		r.Value = &v
	} else {
		r.UnitCost = m.cost(t, "unit cost")
	}
	other := r
	other.Quantity = decimal.MustNew(r.Quantity.Units()+1, r.Quantity.Scale())
	m.apply(t, func() (Result, error) { return Receive(m.ctx, m.db, r) }, func() (Result, error) { return Receive(m.ctx, m.db, other) },
		func() ([]*big.Rat, string) { return m.modelReceive(r) })
}

func (m *machine) modelReceive(r ReceiveRequest) ([]*big.Rat, string) {
	q := toRat(r.Quantity)
	var vin, cost *big.Rat
	if r.Value != nil {
		vin = toRat(*r.Value)
	} else {
		cost = toRat(*r.UnitCost)
		vin = m.model.money(new(big.Rat).Mul(q, cost))
	}
	if !fits(vin, m.model.s.minor) {
		return nil, "overflow"
	}
	l := m.model.at(r.Location)
	saved := l.clone()
	change, code := m.model.inflow(l, q, vin, cost)
	if code != "" {
		*l = saved
	}
	return []*big.Rat{change}, code
}

func (m *machine) issue(t *rapid.T) {
	loc := rapid.SampledFrom(rapidLocations).Draw(t, "location")
	r := IssueRequest{Tenant: m.it.Tenant, Item: m.it.ID, Location: loc, OperationID: m.id(), Quantity: m.quantity(t)}
	if rapid.Bool().Draw(t, "with estimate") {
		r.EstimateRate = m.cost(t, "estimate")
	}
	other := r
	other.Quantity = decimal.MustNew(r.Quantity.Units()+1, r.Quantity.Scale())
	m.apply(t, func() (Result, error) { return Issue(m.ctx, m.db, r) }, func() (Result, error) { return Issue(m.ctx, m.db, other) },
		func() ([]*big.Rat, string) { return m.modelIssue(r) })
}

func (m *machine) modelIssue(r IssueRequest) ([]*big.Rat, string) {
	var estimate *big.Rat
	if r.EstimateRate != nil {
		estimate = toRat(*r.EstimateRate)
	}
	l := m.model.at(r.Location)
	saved := l.clone()
	change, code := m.model.outflow(l, r.OperationID, toRat(r.Quantity), estimate)
	if code != "" {
		*l = saved
	}
	return []*big.Rat{change}, code
}

func (m *machine) transfer(t *rapid.T) {
	from := rapid.SampledFrom(rapidLocations).Draw(t, "from")
	to := rapidLocations[0]
	if from == to {
		to = rapidLocations[1]
	}
	r := TransferRequest{Tenant: m.it.Tenant, Item: m.it.ID, From: from, To: to, OperationID: m.id(), Quantity: m.quantity(t)}
	other := r
	other.From, other.To = r.To, r.From
	m.apply(t, func() (Result, error) { return Transfer(m.ctx, m.db, r) }, func() (Result, error) { return Transfer(m.ctx, m.db, other) },
		func() ([]*big.Rat, string) {
			// The model only learns of the transfer when the source leg is valid.
			source, target := m.model.at(from), m.model.at(to)
			savedSource, savedTarget := source.clone(), target.clone()
			change, code := m.model.outflow(source, r.OperationID, toRat(r.Quantity), nil)
			var in *big.Rat
			if code == "" {
				in, code = m.model.inflow(target, toRat(r.Quantity), new(big.Rat).Neg(change), nil)
			}
			if code != "" {
				*source, *target = savedSource, savedTarget
				return nil, code
			}
			return []*big.Rat{change, in}, ""
		})
}

func (m *machine) adjust(t *rapid.T) {
	loc := rapid.SampledFrom(rapidLocations).Draw(t, "location")
	amount := decimal.MustNew(rapid.Int64Range(-5_000_000, 5_000_000).Filter(func(v int64) bool { return v != 0 }).Draw(t, "amount"), m.it.MinorUnit)
	r := AdjustRequest{Tenant: m.it.Tenant, Item: m.it.ID, Location: loc, OperationID: m.id(), Amount: &amount}
	other := r
	other.Location = rapidLocations[0]
	if loc == other.Location {
		other.Location = rapidLocations[1]
	}
	other.Amount = nil
	other.UnitCost = m.cost(t, "other cost")
	m.apply(t, func() (Result, error) { return Adjust(m.ctx, m.db, r) }, nil,
		func() ([]*big.Rat, string) {
			l := m.model.at(loc)
			saved := l.clone()
			change, code := m.model.adjust(l, toRat(amount))
			if code != "" {
				*l = saved
			}
			return []*big.Rat{change}, code
		})
}

// replay retries a successful operation: same entries, nothing written.
func (m *machine) replay(t *rapid.T) {
	if len(m.done) == 0 {
		t.Skip("nothing to replay")
	}
	d := rapid.SampledFrom(m.done).Draw(t, "operation")
	before := tenantSnapshot(t, m.db, m.it.Tenant)
	res, err := d.run()
	if err != nil || !res.Replayed {
		t.Fatalf("replay: %+v %v", res, err)
	}
	for i, leg := range res.Legs {
		if leg.ValueEntry.Hash != d.result.Legs[i].ValueEntry.Hash || leg.QuantityEntry.Hash != d.result.Legs[i].QuantityEntry.Hash {
			t.Fatalf("replay returned other entries")
		}
	}
	if tenantSnapshot(t, m.db, m.it.Tenant) != before {
		t.Fatalf("replay wrote")
	}
}

// conflict reuses an operation id for a different request.
func (m *machine) conflict(t *rapid.T) {
	if len(m.done) == 0 {
		t.Skip("nothing to conflict with")
	}
	d := rapid.SampledFrom(m.done).Draw(t, "operation")
	if d.other == nil {
		t.Skip("no conflicting variant")
	}
	before := tenantSnapshot(t, m.db, m.it.Tenant)
	if _, err := d.other(); !errors.Is(err, chain.ErrIdempotencyConflict) {
		t.Fatalf("conflict: %v", err)
	}
	if tenantSnapshot(t, m.db, m.it.Tenant) != before {
		t.Fatalf("conflict wrote")
	}
}

// halfWritten appends one half of a new receipt directly, as a writer
// without transactions could leave it, and then retries the receipt.
func (m *machine) halfWritten(t *rapid.T) {
	loc := rapid.SampledFrom(rapidLocations).Draw(t, "location")
	r := ReceiveRequest{Tenant: m.it.Tenant, Item: m.it.ID, Location: loc, OperationID: m.id(), Quantity: m.quantity(t), UnitCost: m.cost(t, "unit cost")}
	var plan []chain.Request
	err := m.db.Update(m.ctx, func(tx *chain.Tx) error {
		plan = plan[:0]
		res, err := ReceiveTx(tx, r)
		if err != nil {
			return err
		}
		plan = append(plan, entryRequest(res.Legs[0].QuantityEntry), entryRequest(res.Legs[0].ValueEntry))
		return errRollback
	})
	if Code(err) == "overflow" {
		t.Skip("the receipt is out of range; the model's overflow rules are exercised by receive")
	}
	if !errors.Is(err, errRollback) {
		t.Fatalf("plan: %v", err)
	}
	half := rapid.IntRange(0, 1).Draw(t, "half")
	written, err := m.db.Append(m.ctx, plan[half])
	if err != nil {
		t.Fatal(err)
	}
	res, err := Receive(m.ctx, m.db, r)
	if err != nil || res.Replayed {
		t.Fatalf("completion: %+v %v", res, err)
	}
	if []chain.Entry{res.Legs[0].QuantityEntry, res.Legs[0].ValueEntry}[half].Hash != written.Entry.Hash {
		t.Fatalf("the written half was not reused")
	}
	changes, _ := m.modelReceive(r)
	m.expectSame(t, res.Legs[0], changes[0])
	m.done = append(m.done, doneOp{run: func() (Result, error) { return Receive(m.ctx, m.db, r) }, result: res})
}

func entryRequest(e chain.Entry) chain.Request {
	return chain.Request{Chain: e.Chain, IdempotencyKey: e.IdempotencyKey, Type: e.Type, Payload: e.Payload}
}

// invariants compare every location with the model.
func (m *machine) invariants(t *rapid.T) {
	for _, loc := range rapidLocations {
		want := m.model.at(loc)
		b, err := GetBalance(m.ctx, m.db, m.it.Tenant, m.it.ID, loc)
		if err != nil {
			t.Fatal(err)
		}
		q, v := toRat(b.Quantity), toRat(b.Value)
		if q.Cmp(want.q) != 0 || v.Cmp(want.v) != 0 {
			t.Fatalf("%s: %s / %s, model %s / %s", loc, b.Quantity, b.Value, want.q.RatString(), want.v.RatString())
		}
		if q.Sign() == 0 && v.Sign() != 0 {
			t.Fatalf("%s: value %s at quantity zero", loc, b.Value)
		}
		if want.changes.Cmp(v) != 0 {
			t.Fatalf("%s: Σ value changes %s, value %s", loc, want.changes.RatString(), b.Value)
		}
		if b.RateKnown != want.rateKnown || (b.RateKnown && toRat(b.Rate).Cmp(want.rate) != 0) {
			t.Fatalf("%s: rate %s, model %s", loc, b.Rate, want.rate.RatString())
		}
		layers, err := Layers(m.ctx, m.db, m.it.Tenant, m.it.ID, loc, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(layers) != len(want.layers) {
			t.Fatalf("%s: %d layers, model %d", loc, len(layers), len(want.layers))
		}
		for i, l := range layers {
			if l.Quantity.Sign() <= 0 || l.Value.Sign() < 0 {
				t.Fatalf("%s: negative layer %+v", loc, l)
			}
			if toRat(l.Quantity).Cmp(want.layers[i].q) != 0 || toRat(l.Value).Cmp(want.layers[i].v) != 0 {
				t.Fatalf("%s: layer %d %s/%s, model %s/%s", loc, i, l.Quantity, l.Value, want.layers[i].q.RatString(), want.layers[i].v.RatString())
			}
		}
	}
}

// stateMachineChecks is how many runs TestStateMachine makes on the
// embedded backend, and stateMachineChecksServer on a database server,
// unless -rapid.checks says otherwise: every step commits (and syncs), so
// the defaults keep the suite fast; run with -rapid.checks=1000 for a deeper
// search.
const (
	stateMachineChecks       = "25"
	stateMachineChecksServer = "8"
)

// setChecks sets -rapid.checks for the rest of t, unless it was given.
func setChecks(t *testing.T, checks string) {
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "rapid.checks" })
	f := flag.Lookup("rapid.checks")
	if f == nil || explicit {
		return
	}
	previous := f.Value.String()
	if err := f.Value.Set(checks); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Value.Set(previous) })
}

func TestStateMachine(t *testing.T) {
	for _, f := range storagetest.Factories(t) {
		t.Run(f.Name, func(t *testing.T) {
			if f.Name == "bolt" {
				setChecks(t, stateMachineChecks)
			} else {
				setChecks(t, stateMachineChecksServer)
			}
			// One ledger for every run, a new tenant per run: tenants never
			// see each other's chains or state, and opening a store per run
			// would dominate the time.
			db, err := chain.OpenBackend(f.Open(t), chain.Options{Clock: testClock()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			runs := 0
			rapid.Check(t, func(rt *rapid.T) {
				runs++
				it := Item{Tenant: fmt.Sprintf("tenant-%d", runs), ID: "SKU-R",
					Method:        rapid.SampledFrom([]Method{MovingAverage, FIFO}).Draw(rt, "method"),
					QuantityScale: rapid.Uint8Range(0, 3).Draw(rt, "quantity scale"),
					Currency:      "EUR", MinorUnit: rapid.Uint8Range(0, 3).Draw(rt, "minor unit"),
					AllowNegative: rapid.Bool().Draw(rt, "allow negative")}
				if _, err := DefineItem(context.Background(), db, it); err != nil {
					rt.Fatal(err)
				}
				m := &machine{ctx: context.Background(), db: db, it: it,
					model: &model{method: it.Method, s: it.scales(), allowNegative: it.AllowNegative, locations: map[string]*modelLocation{}}}
				rt.Repeat(map[string]func(*rapid.T){
					"receive":  m.receive,
					"issue":    m.issue,
					"transfer": m.transfer,
					"adjust":   m.adjust,
					"replay":   m.replay,
					"conflict": m.conflict,
					"half":     m.halfWritten,
					"":         m.invariants,
				})
				if runs%5 == 0 { // Check reads the whole ledger: every fifth run, and at the end
					failures, err := Check(context.Background(), db)
					if err != nil || len(failures) > 0 {
						rt.Fatalf("check: %v %v", failures, err)
					}
				}
			})
			mustCheck(t, db)
		})
	}
}
