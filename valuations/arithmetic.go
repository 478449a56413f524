package valuations

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
)

// scales are the item's declared scales; every amount of one location uses
// them.
type scales struct {
	quantity uint8 // places of a quantity
	minor    uint8 // places of the currency's minor unit
}

// rate returns the places of a rate: the minor unit plus RateExtraPlaces.
func (s scales) rate() uint8 { return s.minor + RateExtraPlaces }

// divisor is 10^(quantity+RateExtraPlaces): quantity units × rate units /
// divisor = value in minor units.
func (s scales) divisor() int64 { return power10(s.quantity + RateExtraPlaces) }

func (s scales) formatQuantity(units int64) string {
	return decimal.MustNew(units, s.quantity).String()
}
func (s scales) formatValue(units int64) string { return decimal.MustNew(units, s.minor).String() }
func (s scales) formatRate(units int64) string  { return decimal.MustNew(units, s.rate()).String() }

func power10(n uint8) int64 {
	p := int64(1)
	for range n {
		p *= 10
	}
	return p
}

func overflow(what string) error { return invalid(ErrOverflow, "%s is out of range", what) }

func add(a, b int64, what string) (int64, error) {
	s, ok := addChecked(a, b)
	if !ok {
		return 0, overflow(what)
	}
	return s, nil
}

func addChecked(a, b int64) (int64, bool) {
	s := a + b
	return s, (a^s)&(b^s) >= 0
}

func sub(a, b int64, what string) (int64, error) {
	if b == math.MinInt64 {
		return 0, overflow(what)
	}
	return add(a, -b, what)
}

// valueAt is round(quantity × rate) in minor units, half to even.
func valueAt(s scales, quantity, rate int64) (int64, error) {
	v, err := decimal.MulDiv(quantity, rate, s.divisor(), decimal.HalfEven)
	if err != nil {
		return 0, overflow(fmt.Sprintf("value of %s at rate %s", s.formatQuantity(quantity), s.formatRate(rate)))
	}
	return v, nil
}

// rateOf is value / quantity at the rate scale, half to even.
func rateOf(s scales, value, quantity int64) (int64, error) {
	r, err := decimal.MulDiv(value, s.divisor(), quantity, decimal.HalfEven)
	if err != nil {
		return 0, overflow(fmt.Sprintf("rate of %s for %s", s.formatValue(value), s.formatQuantity(quantity)))
	}
	return r, nil
}

// take is the value removed when t of a layer (quantity, value) is taken:
// all of value when t == quantity, else round(value·t/quantity).
func take(quantity, value, t int64) int64 {
	if t == quantity {
		return value
	}
	v, err := decimal.MulDiv(value, t, quantity, decimal.HalfEven)
	if err != nil { // |v| <= |value| because t < quantity
		panic(fmt.Sprintf("valuations: take %d of (%d, %d): %v", t, quantity, value, err))
	}
	return v
}

// uint128 is an unsigned 128-bit intermediate for the moving-average rate:
// Q·rate + incoming can exceed int64 although the new rate does not.
type uint128 struct{ hi, lo uint64 }

func multiply128(a, b int64) uint128 {
	hi, lo := bits.Mul64(uint64(a), uint64(b)) // callers pass non-negative values
	return uint128{hi, lo}
}

func (x uint128) add(y uint128) (uint128, bool) {
	lo, carry := bits.Add64(x.lo, y.lo, 0)
	hi, carry := bits.Add64(x.hi, y.hi, carry)
	return uint128{hi, lo}, carry == 0
}

// sub returns x-y, or false when y > x.
func (x uint128) sub(y uint128) (uint128, bool) {
	lo, borrow := bits.Sub64(x.lo, y.lo, 0)
	hi, borrow := bits.Sub64(x.hi, y.hi, borrow)
	return uint128{hi, lo}, borrow == 0
}

// divideRound returns x/d rounded half to even, or false when it is not an
// int64.
func (x uint128) divideRound(d uint64) (int64, bool) {
	if x.hi >= d {
		return 0, false
	}
	q, r := bits.Div64(x.hi, x.lo, d)
	if other := d - r; r > other || r == other && q%2 == 1 {
		q++
	}
	if q > math.MaxInt64 {
		return 0, false
	}
	return int64(q), true
}

// settlementAmounts is how much of one earlier issue's estimate a receipt
// replaced by its own cost.
type settlementAmounts struct {
	operation string
	quantity  int64 // covered quantity
	estimated int64 // value the issue carried for it
	actual    int64 // value the receipt gives it
}

// outcome is what one primitive does to a location.
type outcome struct {
	pos         position
	change      int64 // new stock value − old stock value
	layers      layerChanges
	layerID     uint64 // the layer created or removed; 0 when none
	estimate    int64  // rate a shortfall was valued at
	estimated   bool   // there was a shortfall
	settlements []settlementAmounts
}

// inflowInput is a quantity coming in with its value: a receipt, the
// destination of a transfer, the return of an issue.
type inflowInput struct {
	quantity  int64
	value     int64 // in minor units
	rate      int64 // exact unit cost, when rateGiven
	rateGiven bool
	front     bool // FIFO: the new layer is consumed first (a returned issue)
}

// inflow adds stock. It first settles negative stock: each pending issue,
// oldest first, is covered by a share of the incoming (quantity, value),
// taken like a FIFO layer, and the difference to its estimate is recorded.
// What remains becomes a FIFO layer, or joins the moving average:
// rate' = (Q·rate + incoming)/(Q + q), or the incoming rate when Q ≤ 0.
func inflow(p position, method Method, s scales, in inflowInput) (outcome, error) {
	out := outcome{pos: p}
	n := &out.pos
	n.Pending = slices.Clone(p.Pending)
	restQuantity, restValue := in.quantity, in.value
	for len(n.Pending) > 0 && restQuantity > 0 {
		first := &n.Pending[0]
		t := min(first.Quantity, restQuantity)
		st := settlementAmounts{operation: first.Operation, quantity: t,
			estimated: take(first.Quantity, first.Estimate, t), actual: take(restQuantity, restValue, t)}
		out.settlements = append(out.settlements, st)
		first.Quantity -= t
		first.Estimate -= st.estimated
		restQuantity -= t
		restValue -= st.actual
		if first.Quantity == 0 {
			n.Pending = n.Pending[1:]
		}
	}
	if len(n.Pending) == 0 {
		n.Pending = nil
	}
	var err error
	if n.Quantity, err = add(p.Quantity, in.quantity, "quantity"); err != nil {
		return outcome{}, err
	}
	incomingRate := in.rate
	if !in.rateGiven {
		if incomingRate, err = rateOf(s, in.value, in.quantity); err != nil {
			return outcome{}, err
		}
	}
	newRate := incomingRate
	if restQuantity == 0 {
		n.Value = -sumEstimates(n.Pending)
	} else if method == FIFO {
		base := int64(0)
		if p.Quantity > 0 {
			base = p.Value
		}
		if n.Value, err = add(base, restValue, "stock value"); err != nil {
			return outcome{}, err
		}
		id := n.LayerHigh
		if in.front && n.LayerLow > 0 {
			n.LayerLow--
			id = n.LayerLow
		} else {
			n.LayerHigh++
		}
		out.layerID = id
		out.layers.puts = append(out.layers.puts, layer{ID: id, Quantity: restQuantity, Value: restValue})
	} else {
		if p.Quantity > 0 {
			incoming := multiply128(in.value, s.divisor())
			if in.rateGiven {
				incoming = multiply128(in.quantity, in.rate)
			}
			total, ok := multiply128(p.Quantity, p.Rate).add(incoming)
			if ok {
				newRate, ok = total.divideRound(uint64(n.Quantity))
			}
			if !ok {
				return outcome{}, overflow("moving-average rate")
			}
		}
		if n.Value, err = valueAt(s, n.Quantity, newRate); err != nil {
			return outcome{}, err
		}
	}
	n.Rate, n.RateKnown = newRate, true
	if out.change, err = sub(n.Value, p.Value, "value change"); err != nil {
		return outcome{}, err
	}
	return out, nil
}

func sumEstimates(list []pending) int64 {
	var sum int64
	for _, q := range list {
		sum += q.Estimate // bounded: each estimate came out of an int64 stock value
	}
	return sum
}

// outflowInput is a quantity going out at the location's valuation: an
// issue or the source of a transfer.
type outflowInput struct {
	operation     string
	quantity      int64
	rate          int64 // estimate for a shortfall, when rateGiven
	rateGiven     bool
	allowNegative bool
}

// outflow removes stock: FIFO takes the oldest layers, moving average values
// the rest at round(Q'·rate) and leaves the rate alone. Beyond the stock
// (when allowed) the shortfall is valued at the caller's rate or the last
// known one and waits for the next inflow to settle it.
func outflow(p position, method Method, s scales, store layerStore, in outflowInput) (outcome, error) {
	out := outcome{pos: p}
	n := &out.pos
	n.Pending = slices.Clone(p.Pending)
	available := max(p.Quantity, 0)
	fromStock := min(in.quantity, available)
	shortfall := in.quantity - fromStock
	if shortfall > 0 && !in.allowNegative {
		return outcome{}, invalid(ErrInsufficientStock, "issuing %s of %s leaves a shortfall of %s",
			s.formatQuantity(in.quantity), s.formatQuantity(p.Quantity), s.formatQuantity(shortfall))
	}
	var err error
	if n.Quantity, err = sub(p.Quantity, in.quantity, "quantity"); err != nil {
		return outcome{}, err
	}
	var stockValue int64 // value of what stays at or above zero
	if method == FIFO {
		removed, err := consume(store, fromStock, &out.layers)
		if err != nil {
			return outcome{}, err
		}
		if p.Quantity > 0 {
			stockValue = p.Value - removed
		}
	} else if rest := available - fromStock; rest > 0 {
		if stockValue, err = valueAt(s, rest, p.Rate); err != nil {
			return outcome{}, err
		}
	}
	n.Value = stockValue
	if shortfall > 0 {
		rate := in.rate
		if !in.rateGiven {
			if !p.RateKnown {
				return outcome{}, invalid(ErrNoRate, "a shortfall of %s needs an estimate rate", s.formatQuantity(shortfall))
			}
			rate = p.Rate
		}
		estimate, err := valueAt(s, shortfall, rate)
		if err != nil {
			return outcome{}, err
		}
		if len(n.Pending) >= PendingIssuesMax {
			return outcome{}, invalid(ErrPendingLimit, "%d issues already await settlement", len(n.Pending))
		}
		n.Pending = append(n.Pending, pending{Operation: in.operation, Quantity: shortfall, Estimate: estimate})
		total := int64(0)
		for _, q := range n.Pending {
			if total, err = add(total, q.Estimate, "negative stock value"); err != nil {
				return outcome{}, err
			}
		}
		n.Value = -total
		out.estimate, out.estimated = rate, true
	}
	if out.change, err = sub(n.Value, p.Value, "value change"); err != nil {
		return outcome{}, err
	}
	return out, nil
}

// consume takes quantity from the oldest layers and returns the value taken.
// It reads only the layers it consumes.
func consume(store layerStore, quantity int64, changes *layerChanges) (int64, error) {
	var removed int64
	left := quantity
	for l, err := range store.layers() {
		if left == 0 {
			break
		}
		if err != nil {
			return 0, err
		}
		t := min(l.Quantity, left)
		v := take(l.Quantity, l.Value, t)
		if t == l.Quantity {
			changes.deletes = append(changes.deletes, l.ID)
		} else {
			changes.puts = append(changes.puts, layer{ID: l.ID, Quantity: l.Quantity - t, Value: l.Value - v})
		}
		removed += v
		left -= t
	}
	if left != 0 {
		return 0, fmt.Errorf("%w: FIFO layers hold less than the stock quantity", chain.ErrCorrupt)
	}
	return removed, nil
}

// removeInflow undoes an earlier inflow of (quantity, value): the reversal
// of a receipt or of a transfer's destination. FIFO removes the inflow's own
// layer, which must be untouched; moving average takes the value out of the
// rate: rate' = (Q·rate − value)/(Q − q).
func removeInflow(p position, method Method, s scales, store layerStore, quantity, value int64, layerID uint64) (outcome, error) {
	out := outcome{pos: p}
	n := &out.pos
	if method == FIFO {
		l, ok, err := store.layer(layerID)
		if err != nil {
			return outcome{}, err
		}
		if !ok || l.Quantity != quantity || l.Value != value {
			return outcome{}, invalid(ErrNotReversible, "its FIFO layer %d (%s, %s) has been consumed",
				LayerNumber(layerID), s.formatQuantity(quantity), s.formatValue(value))
		}
	}
	if p.Quantity < quantity {
		return outcome{}, invalid(ErrInsufficientStock, "removing %s of %s leaves a shortfall of %s",
			s.formatQuantity(quantity), s.formatQuantity(p.Quantity), s.formatQuantity(quantity-max(p.Quantity, 0)))
	}
	n.Quantity = p.Quantity - quantity
	var err error
	switch {
	case method == FIFO:
		out.layers.deletes = append(out.layers.deletes, layerID)
		out.layerID = layerID
		n.Value = p.Value - value
	case n.Quantity == 0:
		n.Value = 0
	default:
		rest, ok := multiply128(p.Quantity, p.Rate).sub(multiply128(value, s.divisor()))
		if !ok {
			return outcome{}, invalid(ErrNegativeValue, "removing %s from a stock valued %s",
				s.formatValue(value), s.formatValue(p.Value))
		}
		if n.Rate, ok = rest.divideRound(uint64(n.Quantity)); !ok {
			return outcome{}, overflow("moving-average rate")
		}
		if n.Value, err = valueAt(s, n.Quantity, n.Rate); err != nil {
			return outcome{}, err
		}
	}
	if out.change, err = sub(n.Value, p.Value, "value change"); err != nil {
		return outcome{}, err
	}
	return out, nil
}

// revalueInput is a value-only adjustment: an amount added to the stock
// value (landed cost, a correction), or a new unit cost (revaluation).
type revalueInput struct {
	amount    int64
	rate      int64
	rateGiven bool // rate is the new unit cost; amount is unused
}

// revalue changes value without quantity. Moving average: rate' =
// (Q·rate + amount)/Q or the new unit cost, value' = round(Q·rate'). FIFO:
// the amount is spread over the open layers by quantity (each layer
// round(amount·q/Q), the newest takes the remainder, so the stock value moves
// by exactly the amount), or every layer is revalued at round(q·unit cost).
func revalue(p position, method Method, s scales, store layerStore, in revalueInput) (outcome, error) {
	if p.Quantity <= 0 {
		return outcome{}, invalid(ErrNoStock, "the quantity is %s", s.formatQuantity(p.Quantity))
	}
	out := outcome{pos: p}
	n := &out.pos
	var err error
	if method == FIFO {
		if n.Value, err = revalueLayers(s, store, p.Quantity, in, &out.layers); err != nil {
			return outcome{}, err
		}
		if in.rateGiven {
			n.Rate, n.RateKnown = in.rate, true
		}
	} else {
		n.Rate = in.rate
		if !in.rateGiven {
			stock := multiply128(p.Quantity, p.Rate)
			delta := multiply128(magnitude(in.amount), s.divisor())
			total, ok := stock.add(delta)
			if in.amount < 0 {
				total, ok = stock.sub(delta)
				if !ok {
					return outcome{}, invalid(ErrNegativeValue, "an adjustment of %s to a stock valued %s",
						s.formatValue(in.amount), s.formatValue(p.Value))
				}
			}
			if ok {
				n.Rate, ok = total.divideRound(uint64(p.Quantity))
			}
			if !ok {
				return outcome{}, overflow("moving-average rate")
			}
		}
		n.RateKnown = true
		if n.Value, err = valueAt(s, p.Quantity, n.Rate); err != nil {
			return outcome{}, err
		}
	}
	if out.change, err = sub(n.Value, p.Value, "value change"); err != nil {
		return outcome{}, err
	}
	return out, nil
}

func magnitude(v int64) int64 {
	if v < 0 {
		return -v // callers never pass math.MinInt64: amounts are validated
	}
	return v
}

func revalueLayers(s scales, store layerStore, quantity int64, in revalueInput, changes *layerChanges) (int64, error) {
	var all []layer
	for l, err := range store.layers() {
		if err != nil {
			return 0, err
		}
		all = append(all, l)
	}
	var total, spread int64
	var err error
	for i, l := range all {
		next := l
		if in.rateGiven {
			if next.Value, err = valueAt(s, l.Quantity, in.rate); err != nil {
				return 0, err
			}
		} else {
			share := in.amount - spread
			if i < len(all)-1 {
				if share, err = decimal.MulDiv(in.amount, l.Quantity, quantity, decimal.HalfEven); err != nil {
					return 0, overflow("adjustment share")
				}
			}
			spread += share
			if next.Value, err = add(l.Value, share, "layer value"); err != nil {
				return 0, err
			}
			if next.Value < 0 {
				return 0, invalid(ErrNegativeValue, "layer %d would be valued %s", LayerNumber(l.ID), s.formatValue(next.Value))
			}
		}
		if total, err = add(total, next.Value, "stock value"); err != nil {
			return 0, err
		}
		changes.puts = append(changes.puts, next)
	}
	return total, nil
}

var errNotFound = chain.ErrNotFound

func isNotFound(err error) bool { return errors.Is(err, errNotFound) }
