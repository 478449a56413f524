package valuations

import (
	"errors"
	"fmt"
	"slices"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
)

// location names the chains and state of one item at one location.
type location struct {
	name       string
	role       string // "", legSource or legDestination
	quantity   string // chain
	value      string // chain
	positionAt []byte // state key
	layers     []byte // state key prefix
}

func locate(it Item, name, role string) (location, error) {
	q, err := QuantityChain(it.Tenant, it.ID, name)
	if err != nil {
		return location{}, invalid(ErrInvalidOperation, "%v", err)
	}
	v, err := ValueChain(it.Tenant, it.ID, name)
	if err != nil {
		return location{}, invalid(ErrInvalidOperation, "%v", err)
	}
	return location{name: name, role: role, quantity: q, value: v,
		positionAt: positionKey(it.Tenant, it.ID, name), layers: layerPrefix(it.Tenant, it.ID, name)}, nil
}

func loadPosition(tx *chain.Tx, loc location) (position, error) {
	v, err := tx.StateGet(loc.positionAt)
	if isNotFound(err) {
		return newPosition(), nil
	}
	if err != nil {
		return position{}, err
	}
	return decodePosition(v)
}

func headSeq(tx *chain.Tx, name string) (uint64, error) {
	h, err := tx.Head(name)
	if err != nil && !isNotFound(err) {
		return 0, err
	}
	return h.Seq, nil
}

// reversalPlan is what a reversal undoes, per location.
type reversalPlan struct {
	effects []effect
	marker  []byte
}

// resolve returns the locations an operation writes to, and for a reversal
// the effects that undo the original. Everything it reads is immutable (the
// original's entries), so a retry resolves the same way.
func resolve(tx *chain.Tx, it Item, r parsedRequest) ([]location, *reversalPlan, error) {
	first, err := locate(it, r.Location, "")
	if err != nil {
		return nil, nil, err
	}
	switch r.Kind {
	case kindTransfer:
		first.role = legSource
		second, err := locate(it, r.ToLocation, legDestination)
		return []location{first, second}, nil, err
	case kindReversal:
		return resolveReversal(tx, it, r, first)
	}
	return []location{first}, nil, nil
}

func lookupOriginal(tx *chain.Tx, loc location, operation string) (decodedValue, error) {
	e, err := tx.Lookup(loc.value, ValueKey(operation))
	if isNotFound(err) {
		return decodedValue{}, notFound(ErrUnknownOperation, "location %q has no operation %q", loc.name, operation)
	}
	if err != nil {
		return decodedValue{}, err
	}
	d, err := decodeValue(e.Payload)
	if err != nil {
		return decodedValue{}, fmt.Errorf("%w: chain %q seq %d: %w", chain.ErrCorrupt, loc.value, e.Seq, err)
	}
	return d, nil
}

func resolveReversal(tx *chain.Tx, it Item, r parsedRequest, loc location) ([]location, *reversalPlan, error) {
	d, err := lookupOriginal(tx, loc, r.Reverses)
	if err != nil {
		return nil, nil, err
	}
	original := d.payload.Request
	notReversible := func(why string) error {
		return invalid(ErrNotReversible, "%s %q %s", original.Kind, r.Reverses, why)
	}
	plan := &reversalPlan{marker: reversalKey(it.Tenant, it.ID, loc.name, r.Reverses)}
	switch original.Kind {
	case kindReceipt:
		if len(d.settlements) > 0 {
			return nil, nil, notReversible("settled negative stock")
		}
		plan.effects = []effect{{kind: effectRemoveInflow, quantity: d.effect.quantity, value: d.effect.value, layer: d.effect.layer}}
		return []location{loc}, plan, nil
	case kindIssue:
		if d.quantity < 0 {
			return nil, nil, notReversible("took the stock below zero")
		}
		plan.effects = []effect{{kind: effectInflowFront, quantity: d.effect.quantity, value: -d.change}}
		return []location{loc}, plan, nil
	case kindAdjustment:
		if d.change == 0 {
			return nil, nil, notReversible("changed nothing")
		}
		plan.effects = []effect{{kind: effectRevalue, value: -d.change}}
		return []location{loc}, plan, nil
	case kindTransfer:
		if d.payload.Leg != legSource {
			return nil, nil, invalid(ErrInvalidOperation, "reverse transfer %q at its source location %q", r.Reverses, original.Location)
		}
		if d.quantity < 0 {
			return nil, nil, notReversible("took the source below zero")
		}
		back, err := locate(it, original.ToLocation, legSource)
		if err != nil {
			return nil, nil, err
		}
		arrived, err := lookupOriginal(tx, back, r.Reverses)
		if err != nil {
			return nil, nil, err
		}
		if len(arrived.settlements) > 0 {
			return nil, nil, notReversible("settled negative stock at its destination")
		}
		loc.role = legDestination
		plan.effects = []effect{
			{kind: effectRemoveInflow, quantity: arrived.effect.quantity, value: arrived.effect.value, layer: arrived.effect.layer},
			{kind: effectInflowFront, quantity: arrived.effect.quantity, value: arrived.effect.value},
		}
		return []location{back, loc}, plan, nil
	}
	return nil, nil, notReversible("is a reversal itself")
}

// found is an existing entry of the operation, or nil.
type found struct {
	quantity, value *chain.Entry
}

// lookup finds the operation's existing entries and refuses a different
// request under the same operation id.
func lookup(tx *chain.Tx, locs []location, r parsedRequest) ([]found, error) {
	out := make([]found, len(locs))
	for i, loc := range locs {
		for _, half := range []struct {
			chain, key string
			into       **chain.Entry
		}{{loc.quantity, QuantityKey(r.Operation), &out[i].quantity}, {loc.value, ValueKey(r.Operation), &out[i].value}} {
			e, err := tx.Lookup(half.chain, half.key)
			if isNotFound(err) {
				continue
			}
			if err != nil {
				return nil, err
			}
			held, role, err := requestOf(e)
			if err != nil || held != r.request || role != loc.role {
				return nil, &ConflictError{OperationID: r.Operation, Chain: half.chain, Key: half.key, ExistingSeq: e.Seq}
			}
			*half.into = &e
		}
	}
	return out, nil
}

// requestOf returns the request and leg an entry of this package records.
func requestOf(e chain.Entry) (request, string, error) {
	switch e.Type {
	case TypeQuantity:
		d, err := decodeQuantity(e.Payload)
		return d.payload.Request, d.payload.Leg, err
	case TypeValue:
		d, err := decodeValue(e.Payload)
		return d.payload.Request, d.payload.Leg, err
	}
	return request{}, "", payloadError("entry type %q", e.Type)
}

// replay returns the result of an operation whose entries all exist and are
// in the state, reading only; done is false when it has to be executed.
func replay(tx *chain.Tx, it Item, r parsedRequest) (Result, bool, error) {
	locs, _, err := resolve(tx, it, r)
	if err != nil {
		return Result{}, false, err
	}
	entries, err := lookup(tx, locs, r)
	if err != nil {
		return Result{}, false, err
	}
	for i, loc := range locs {
		if entries[i].quantity == nil || entries[i].value == nil {
			return Result{}, false, nil
		}
		pos, err := loadPosition(tx, loc)
		if err != nil {
			return Result{}, false, err
		}
		if entries[i].quantity.Seq > pos.QuantitySeq || entries[i].value.Seq > pos.ValueSeq {
			return Result{}, false, nil
		}
	}
	res, err := result(r.Operation, locs, entries, true)
	return res, err == nil, err
}

// execute runs one operation in tx: it completes half-written operations
// found on its chains, replays or refuses an operation id that exists, and
// otherwise computes every leg before writing anything.
func execute(tx *chain.Tx, it Item, r parsedRequest, depth int) (Result, error) {
	locs, reversal, err := resolve(tx, it, r)
	if err != nil {
		return Result{}, err
	}
	if err := lockHeads(tx, locs); err != nil {
		return Result{}, err
	}
	for _, loc := range locs {
		if err := settle(tx, it, loc, r.Operation, depth); err != nil {
			return Result{}, err
		}
	}
	entries, err := lookup(tx, locs, r)
	if err != nil {
		return Result{}, err
	}
	positions := make([]position, len(locs))
	complete, applied := true, false
	for i, loc := range locs {
		if positions[i], err = loadPosition(tx, loc); err != nil {
			return Result{}, err
		}
		for _, half := range []struct {
			e       *chain.Entry
			applied uint64
			chain   string
		}{{entries[i].quantity, positions[i].QuantitySeq, loc.quantity}, {entries[i].value, positions[i].ValueSeq, loc.value}} {
			switch {
			case half.e == nil:
				complete = false
			case half.e.Seq <= half.applied:
				applied = true
			case half.e.Seq != half.applied+1:
				return Result{}, &IncompleteError{Chain: half.chain, Seq: half.e.Seq,
					Reason: fmt.Sprintf("operation %q is not the next entry to apply", r.Operation)}
			}
		}
	}
	if complete && applied {
		return result(r.Operation, locs, entries, true)
	}
	if applied {
		return Result{}, &IncompleteError{Chain: locs[0].value, Reason: fmt.Sprintf("operation %q is applied but incomplete", r.Operation)}
	}
	legs, err := plan(tx, it, r, locs, positions, reversal)
	if err != nil {
		return Result{}, err
	}
	for i := range legs {
		if err := legs[i].write(tx, it, r, &entries[i]); err != nil {
			return Result{}, err
		}
	}
	if reversal != nil {
		if err := tx.StatePut(reversal.marker, []byte(r.Operation)); err != nil {
			return Result{}, err
		}
	}
	res := Result{OperationID: r.Operation}
	for i := range legs {
		res.Legs = append(res.Legs, legs[i].leg(it, *entries[i].quantity, *entries[i].value))
	}
	return res, nil
}

// leg is the caller's view of a written leg, built from the plan; it equals
// what buildLeg decodes from the entries.
func (l *plannedLeg) leg(it Item, quantityEntry, valueEntry chain.Entry) Leg {
	s := it.scales()
	n := l.out.pos
	leg := Leg{Location: l.loc.name, QuantityEntry: quantityEntry, ValueEntry: valueEntry,
		QuantityChange: decimal.MustNew(n.Quantity-l.before.Quantity, s.quantity), ValueChange: decimal.MustNew(l.out.change, s.minor),
		Quantity: decimal.MustNew(n.Quantity, s.quantity), Value: decimal.MustNew(n.Value, s.minor), RateKnown: n.RateKnown}
	if n.RateKnown {
		leg.Rate = decimal.MustNew(n.Rate, s.rate())
	} else {
		leg.Rate = decimal.MustNew(0, s.rate())
	}
	for _, st := range l.out.settlements {
		leg.Settlements = append(leg.Settlements, Settlement{OperationID: st.operation,
			Quantity: decimal.MustNew(st.quantity, s.quantity), Estimated: decimal.MustNew(st.estimated, s.minor),
			Actual: decimal.MustNew(st.actual, s.minor), Correction: decimal.MustNew(st.actual-st.estimated, s.minor)})
	}
	return leg
}

// lockHeads reads (and so, in a write transaction, locks) the heads of
// every chain the operation writes, in one global order, so that two
// transfers in opposite directions cannot lock each other out on a backend
// with row locks.
func lockHeads(tx *chain.Tx, locs []location) error {
	if !tx.Writable() {
		return nil
	}
	names := make([]string, 0, 2*len(locs))
	for _, loc := range locs {
		names = append(names, loc.quantity, loc.value)
	}
	slices.Sort(names)
	for _, name := range names {
		if _, err := headSeq(tx, name); err != nil {
			return err
		}
	}
	return nil
}

// settle brings the location's state up to its chains' heads: an entry
// beyond the state was left by a writer that wrote one half of an operation
// without the other (and without the state). Both halves carry the request,
// so the operation is executed again: its existing half replays, the
// missing half is written, the state is applied. An entry of the operation
// current is left to the caller.
func settle(tx *chain.Tx, it Item, loc location, current string, depth int) error {
	for count := 0; ; count++ {
		// Heads first: in a write transaction reading a head locks it, so the
		// position read after it cannot be older than the heads.
		quantityHead, err := headSeq(tx, loc.quantity)
		if err != nil {
			return err
		}
		valueHead, err := headSeq(tx, loc.value)
		if err != nil {
			return err
		}
		pos, err := loadPosition(tx, loc)
		if err != nil {
			return err
		}
		if quantityHead == pos.QuantitySeq && valueHead == pos.ValueSeq {
			return nil
		}
		if quantityHead < pos.QuantitySeq || valueHead < pos.ValueSeq {
			return &IncompleteError{Chain: loc.value, Seq: valueHead, Reason: "the state is ahead of the chains"}
		}
		var next *request
		var at chain.Entry
		for _, c := range []struct {
			name       string
			head, seen uint64
		}{{loc.quantity, quantityHead, pos.QuantitySeq}, {loc.value, valueHead, pos.ValueSeq}} {
			if c.head == c.seen {
				continue
			}
			e, err := tx.Get(c.name, c.seen+1)
			if err != nil {
				return err
			}
			r, _, err := requestOf(e)
			if err != nil || r.Tenant != it.Tenant || r.Item != it.ID {
				return &IncompleteError{Chain: c.name, Seq: e.Seq, Reason: "not a valuation entry of this item", Err: err}
			}
			if next != nil && *next != r {
				return &IncompleteError{Chain: c.name, Seq: e.Seq,
					Reason: fmt.Sprintf("half-written operations %q and %q interleave", next.Operation, r.Operation)}
			}
			next, at = &r, e
		}
		if next.Operation == current {
			return nil
		}
		if count >= completionCountMax || depth >= completionDepthMax {
			return &IncompleteError{Chain: at.Chain, Seq: at.Seq, Reason: "too many half-written operations to complete"}
		}
		p, err := parseRequest(*next, it.scales(), true)
		if err == nil {
			_, err = execute(tx, it, p, depth+1)
		}
		if err != nil {
			var incomplete *IncompleteError
			if errors.As(err, &incomplete) {
				return err
			}
			return &IncompleteError{Chain: at.Chain, Seq: at.Seq,
				Reason: fmt.Sprintf("completing half-written operation %q", next.Operation), Err: err}
		}
	}
}

// plannedLeg is one location's part of an operation, fully computed.
type plannedLeg struct {
	loc    location
	before position
	effect effect
	out    outcome
}

func plan(tx *chain.Tx, it Item, r parsedRequest, locs []location, positions []position, reversal *reversalPlan) ([]plannedLeg, error) {
	s := it.scales()
	legs := make([]plannedLeg, len(locs))
	for i := range locs {
		legs[i].loc, legs[i].before = locs[i], positions[i]
	}
	switch r.Kind {
	case kindReceipt:
		value := r.value
		if r.hasUnitCost {
			var err error
			if value, err = valueAt(s, r.quantity, r.unitCost); err != nil {
				return nil, err
			}
		}
		legs[0].effect = effect{kind: effectInflow, quantity: r.quantity, value: value, rate: r.unitCost, rateGiven: r.hasUnitCost}
	case kindIssue, kindTransfer:
		legs[0].effect = effect{kind: effectOutflow, quantity: r.quantity, rate: r.unitCost, rateGiven: r.hasUnitCost}
	case kindAdjustment:
		legs[0].effect = effect{kind: effectRevalue, value: r.value, rate: r.unitCost, rateGiven: r.hasUnitCost}
	case kindReversal:
		if by, err := tx.StateGet(reversal.marker); err == nil {
			return nil, invalid(ErrAlreadyReversed, "operation %q was reversed by %q", r.Reverses, by)
		} else if !isNotFound(err) {
			return nil, err
		}
		for i := range legs {
			legs[i].effect = reversal.effects[i]
		}
	}
	for i := range legs {
		if r.Kind == kindTransfer && i == 1 {
			legs[1].effect = effect{kind: effectInflow, quantity: r.quantity, value: -legs[0].out.change}
		}
		out, err := applyEffect(legs[i].before, it.Method, s, txLayers{tx, legs[i].loc.layers}, legs[i].effect, r.Operation, it.AllowNegative)
		if err != nil {
			if len(legs) > 1 {
				return nil, fmt.Errorf("at location %q: %w", legs[i].loc.name, err)
			}
			return nil, err
		}
		legs[i].out = out
		legs[i].effect = recorded(legs[i].effect, out)
	}
	return legs, nil
}

// applyEffect applies one recorded primitive: the single place where an
// operation and Check's rebuild compute a location's next state.
func applyEffect(p position, method Method, s scales, store layerStore, e effect, operation string, allowNegative bool) (outcome, error) {
	switch e.kind {
	case effectInflow, effectInflowFront:
		return inflow(p, method, s, inflowInput{quantity: e.quantity, value: e.value, rate: e.rate,
			rateGiven: e.rateGiven, front: e.kind == effectInflowFront})
	case effectOutflow:
		return outflow(p, method, s, store, outflowInput{operation: operation, quantity: e.quantity,
			rate: e.rate, rateGiven: e.rateGiven, allowNegative: allowNegative})
	case effectRemoveInflow:
		return removeInflow(p, method, s, store, e.quantity, e.value, e.layer)
	case effectRevalue:
		return revalue(p, method, s, store, revalueInput{amount: e.value, rate: e.rate, rateGiven: e.rateGiven})
	}
	panic("valuations: unknown effect " + e.kind)
}

// recorded is the effect as the value entry records it: with the layer an
// inflow created and the rate a shortfall was valued at (and no rate when
// there was no shortfall), so that re-applying it needs nothing else.
func recorded(e effect, out outcome) effect {
	switch e.kind {
	case effectInflow, effectInflowFront:
		e.layer = out.layerID
	case effectOutflow:
		e.rate, e.rateGiven = out.estimate, out.estimated
	}
	return e
}

func (l *plannedLeg) payloads(it Item, r parsedRequest) (quantity, value []byte) {
	s := it.scales()
	n := l.out.pos
	q := quantityPayload{Request: r.request, Leg: l.loc.role,
		QuantityChange: s.formatQuantity(n.Quantity - l.before.Quantity), QuantityAfter: s.formatQuantity(n.Quantity)}
	v := valuePayload{Request: r.request, Leg: l.loc.role, Method: it.Method.String(), Effect: encodeEffect(l.effect, s),
		ValueChange: s.formatValue(l.out.change), QuantityAfter: s.formatQuantity(n.Quantity), ValueAfter: s.formatValue(n.Value)}
	if n.RateKnown {
		v.RateAfter = s.formatRate(n.Rate)
	}
	for _, st := range l.out.settlements {
		v.Settlements = append(v.Settlements, settlementRecord{Operation: st.operation,
			Quantity: s.formatQuantity(st.quantity), Estimated: s.formatValue(st.estimated),
			Actual: s.formatValue(st.actual), Correction: s.formatValue(st.actual - st.estimated)})
	}
	return mustMarshal(q), mustMarshal(v)
}

// write appends both entries (an existing half replays) and stores the state.
func (l *plannedLeg) write(tx *chain.Tx, it Item, r parsedRequest, into *found) error {
	quantityPayload, valuePayload := l.payloads(it, r)
	halves := []struct {
		chain, key, typ string
		payload         []byte
		expected        uint64
		into            **chain.Entry
		seq             *uint64
	}{
		{l.loc.quantity, QuantityKey(r.Operation), TypeQuantity, quantityPayload, l.before.QuantitySeq + 1, &into.quantity, &l.out.pos.QuantitySeq},
		{l.loc.value, ValueKey(r.Operation), TypeValue, valuePayload, l.before.ValueSeq + 1, &into.value, &l.out.pos.ValueSeq},
	}
	for _, h := range halves {
		res, err := tx.Append(chain.Request{Chain: h.chain, IdempotencyKey: h.key, Type: h.typ, Payload: h.payload})
		if errors.Is(err, chain.ErrIdempotencyConflict) {
			return &IncompleteError{Chain: h.chain, Seq: h.expected,
				Reason: fmt.Sprintf("the existing half of operation %q differs from its recomputation", r.Operation)}
		}
		if err != nil {
			return err
		}
		if res.Entry.Seq != h.expected {
			return &IncompleteError{Chain: h.chain, Seq: res.Entry.Seq, Reason: fmt.Sprintf("expected seq %d", h.expected)}
		}
		e := res.Entry
		*h.into, *h.seq = &e, e.Seq
	}
	if err := tx.StatePut(l.loc.positionAt, encodePosition(&l.out.pos)); err != nil {
		return err
	}
	return l.out.layers.write(tx, l.loc.layers)
}

// result builds the caller's view from the entries themselves, so that a
// replay and the first execution return the same thing.
func result(operation string, locs []location, entries []found, replayed bool) (Result, error) {
	res := Result{OperationID: operation, Replayed: replayed}
	for i, loc := range locs {
		leg, err := buildLeg(loc.name, *entries[i].quantity, *entries[i].value)
		if err != nil {
			return Result{}, err
		}
		res.Legs = append(res.Legs, leg)
	}
	return res, nil
}

func buildLeg(name string, quantityEntry, valueEntry chain.Entry) (Leg, error) {
	q, err := decodeQuantity(quantityEntry.Payload)
	if err != nil {
		return Leg{}, fmt.Errorf("%w: chain %q seq %d: %w", chain.ErrCorrupt, quantityEntry.Chain, quantityEntry.Seq, err)
	}
	v, err := decodeValue(valueEntry.Payload)
	if err != nil {
		return Leg{}, fmt.Errorf("%w: chain %q seq %d: %w", chain.ErrCorrupt, valueEntry.Chain, valueEntry.Seq, err)
	}
	s := v.scales
	leg := Leg{Location: name, QuantityEntry: quantityEntry, ValueEntry: valueEntry,
		QuantityChange: decimal.MustNew(q.change, s.quantity), ValueChange: decimal.MustNew(v.change, s.minor),
		Quantity: decimal.MustNew(v.quantity, s.quantity), Value: decimal.MustNew(v.value, s.minor),
		Rate: decimal.MustNew(v.rate, s.rate()), RateKnown: v.rateKnown}
	for _, st := range v.settlements {
		leg.Settlements = append(leg.Settlements, Settlement{OperationID: st.operation,
			Quantity: decimal.MustNew(st.quantity, s.quantity), Estimated: decimal.MustNew(st.estimated, s.minor),
			Actual: decimal.MustNew(st.actual, s.minor), Correction: decimal.MustNew(st.actual-st.estimated, s.minor)})
	}
	return leg, nil
}
