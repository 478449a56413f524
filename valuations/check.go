package valuations

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/ledgerworks/ledger/chain"
)

// Check rebuilds the derived state of every tenant's items from the chains
// and reports each difference as a chain.Failure with Reason
// chain.ReasonStateMismatch: for every location Σ quantity changes must equal
// the stored quantity, Σ value changes the stored value, and re-applying
// every value entry's recorded effect must give the value changes, balances
// and FIFO layers the entries and the state hold. A half-written operation
// shows up here until it is completed.
//
// It streams: chains are read in pages and only one location's open layers
// are held in memory at a time. The error is for operating failures only.
func Check(ctx context.Context, db *chain.DB) ([]chain.Failure, error) {
	c := &checker{ctx: ctx, db: db}
	err := c.walk()
	return c.failures, err
}

// walk visits every item and location of every tenant, then the state that
// belongs to none.
func (c *checker) walk() error {
	for h, err := range c.db.Chains(c.ctx, "") {
		if err != nil {
			return err
		}
		parts := chain.SplitScopedName(h.Chain)
		if len(parts) < 3 || parts[1] != Domain {
			continue
		}
		switch {
		case len(parts) == 3:
			err = c.item(parts[0], parts[2], h)
		case len(parts) == 5 && parts[4] == "value":
			err = c.location(parts[0], parts[2], parts[3])
		case len(parts) == 5 && parts[4] == "qty":
			valueChain, _ := ValueChain(parts[0], parts[2], parts[3])
			if _, headErr := c.db.Head(c.ctx, valueChain); isNotFound(headErr) {
				err = c.location(parts[0], parts[2], parts[3])
			}
		}
		if err != nil {
			return err
		}
	}
	return c.orphanState()
}

// checker collects failures. With rebuild set it is Rebuild (rebuild.go):
// each unit runs in a write transaction and the state the chains imply is
// written instead of compared; the failures it still collects are entries
// that break a rule, which no rebuild can remove.
type checker struct {
	ctx      context.Context
	db       *chain.DB
	failures []chain.Failure
	rebuild  *RebuildStats
}

func (c *checker) fail(name string, seq uint64, format string, args ...any) {
	if len(c.failures) < chain.FailuresMaxDefault {
		c.failures = append(c.failures, chain.Failure{Chain: name, Seq: seq, Reason: chain.ReasonStateMismatch,
			Detail: fmt.Sprintf(format, args...)})
	}
}

// item compares the newest definition entry with the stored definition;
// Rebuild writes it.
func (c *checker) item(tenant, id string, listed chain.Head) error {
	return c.unit(func(tx *chain.Tx) error {
		h, err := tx.Head(listed.Chain) // in a write transaction, locks the item as its writers do
		if err != nil {
			return err
		}
		e, err := tx.Get(h.Chain, h.Seq)
		if err != nil {
			return err
		}
		c.counted()
		if c.rebuild != nil {
			key := itemKey(tenant, id)
			if err := c.deleteRange(tx, key, append(bytes.Clone(key), 0)); err != nil {
				return err
			}
			return c.put(tx, key, append(binary.BigEndian.AppendUint64(nil, h.Seq), e.Payload...))
		}
		stored, err := tx.StateGet(itemKey(tenant, id))
		switch {
		case isNotFound(err):
			c.fail(h.Chain, h.Seq, "item %q has entries but no stored definition", id)
		case err != nil:
			return err
		case len(stored) < 8 || !bytes.Equal(stored[8:], e.Payload) || binary.BigEndian.Uint64(stored) != h.Seq:
			c.fail(h.Chain, h.Seq, "stored definition of item %q is not its newest entry", id)
		}
		return nil
	})
}

// rebuilt is a location's state as its chains say it should be.
type rebuilt struct {
	pos           position
	layers        memoryLayers
	quantitySum   int64
	valueSum      int64
	scales        scales
	scalesKnown   bool
	quantityCount uint64
	location      string
	markers       map[string]string // reversal markers: reversed operation → reversing operation
}

func (c *checker) location(tenant, item, loc string) error {
	quantityChain, err := QuantityChain(tenant, item, loc)
	if err != nil {
		return nil // not a name this package writes
	}
	valueChain, _ := ValueChain(tenant, item, loc)
	itemChain, _ := ItemChain(tenant, item)
	return c.unit(func(tx *chain.Tx) error {
		if c.rebuild != nil { // lock as an operation does: the item, then both chains in name order
			for _, name := range []string{itemChain, quantityChain, valueChain} {
				if _, err := headSeq(tx, name); err != nil {
					return err
				}
			}
		}
		r := &rebuilt{pos: newPosition(), location: loc, markers: map[string]string{}}
		for e, err := range tx.Entries(valueChain, 1) {
			if err != nil {
				return err
			}
			c.counted()
			c.valueEntry(r, &e)
		}
		for e, err := range tx.Entries(quantityChain, 1) {
			if err != nil {
				return err
			}
			c.counted()
			c.quantityEntry(r, &e)
		}
		if c.rebuild != nil {
			return c.writeLocation(tx, tenant, item, r)
		}
		return c.compare(tx, tenant, item, loc, quantityChain, valueChain, r)
	})
}

// valueEntry re-applies one value entry and compares what it records.
func (c *checker) valueEntry(r *rebuilt, e *chain.Entry) {
	d, err := decodeValue(e.Payload)
	if err != nil || e.Type != TypeValue {
		c.fail(e.Chain, e.Seq, "not a valuation value entry: %v", err)
		return
	}
	if req := d.payload.Request; req.Kind == kindReversal && req.Location == r.location {
		r.markers[req.Reverses] = req.Operation // written with the reversal, at its own location
	}
	if !r.scalesKnown {
		r.scales, r.scalesKnown = d.scales, true
	} else if d.scales != r.scales {
		c.fail(e.Chain, e.Seq, "scales %d/%d differ from the chain's %d/%d", d.scales.quantity, d.scales.minor, r.scales.quantity, r.scales.minor)
		return
	}
	s := r.scales
	sum, ok := addChecked(r.valueSum, d.change)
	if !ok {
		c.fail(e.Chain, e.Seq, "Σ value changes overflows")
	}
	r.valueSum = sum
	out, err := applyEffect(r.pos, d.method, s, &r.layers, d.effect, d.payload.Request.Operation, true)
	if err != nil {
		c.fail(e.Chain, e.Seq, "re-applying the recorded %s fails: %v", d.effect.kind, err)
		return
	}
	if d.effect.kind == effectInflow || d.effect.kind == effectInflowFront {
		if out.layerID != d.effect.layer {
			c.fail(e.Chain, e.Seq, "layer %d recorded, %d rebuilt", LayerNumber(d.effect.layer), LayerNumber(out.layerID))
		}
	}
	n := out.pos
	switch {
	case out.change != d.change:
		c.fail(e.Chain, e.Seq, "value change %s recorded, %s rebuilt", s.formatValue(d.change), s.formatValue(out.change))
	case n.Quantity != d.quantity || n.Value != d.value:
		c.fail(e.Chain, e.Seq, "balance %s / %s recorded, %s / %s rebuilt",
			s.formatQuantity(d.quantity), s.formatValue(d.value), s.formatQuantity(n.Quantity), s.formatValue(n.Value))
	case n.RateKnown != d.rateKnown || n.Rate != d.rate:
		c.fail(e.Chain, e.Seq, "rate %s recorded, %s rebuilt", s.formatRate(d.rate), s.formatRate(n.Rate))
	case !slices.Equal(out.settlements, d.settlements):
		c.fail(e.Chain, e.Seq, "settlements %v recorded, %v rebuilt", d.settlements, out.settlements)
	}
	r.layers.apply(&out.layers)
	n.ValueSeq = e.Seq
	r.pos = n
}

func (c *checker) quantityEntry(r *rebuilt, e *chain.Entry) {
	d, err := decodeQuantity(e.Payload)
	if err != nil || e.Type != TypeQuantity {
		c.fail(e.Chain, e.Seq, "not a valuation quantity entry: %v", err)
		return
	}
	sum, ok := addChecked(r.quantitySum, d.change)
	if !ok {
		c.fail(e.Chain, e.Seq, "Σ quantity changes overflows")
	}
	r.quantitySum = sum
	r.quantityCount = e.Seq
	if d.after != sum {
		c.fail(e.Chain, e.Seq, "quantity after %s recorded, Σ quantity changes is %s",
			p(d.after, d.scale), p(sum, d.scale))
	}
}

// position is the position the state should hold: the value chain's
// replay, including the quantity chain's last seq.
func (r *rebuilt) position() position {
	want := r.pos
	want.QuantitySeq = r.quantityCount
	return want
}

func p(units int64, scale uint8) string { return scales{quantity: scale}.formatQuantity(units) }

// compare checks the stored position, layers and reversal markers against
// the rebuild.
func (c *checker) compare(tx *chain.Tx, tenant, item, loc, quantityChain, valueChain string, r *rebuilt) error {
	if err := c.compareMarkers(tx, tenant, item, loc, valueChain, r.markers); err != nil {
		return err
	}
	l := location{name: loc, quantity: quantityChain, value: valueChain,
		positionAt: positionKey(tenant, item, loc), layers: layerPrefix(tenant, item, loc)}
	raw, err := tx.StateGet(l.positionAt)
	if isNotFound(err) {
		c.fail(valueChain, r.pos.ValueSeq, "location %q has entries but no stored position", loc)
		return nil
	}
	if err != nil {
		return err
	}
	stored, err := decodePosition(raw)
	if err != nil {
		c.fail(valueChain, r.pos.ValueSeq, "stored position: %v", err)
		return nil
	}
	s := r.scales
	if !r.scalesKnown {
		if it, _, err := loadItem(tx, tenant, item); err == nil {
			s = it.scales()
		}
	}
	want := r.position()
	if stored.Quantity != r.quantitySum {
		c.fail(quantityChain, r.quantityCount, "Σ :qty is %s, stored quantity %s", s.formatQuantity(r.quantitySum), s.formatQuantity(stored.Quantity))
	}
	if stored.Value != r.valueSum {
		c.fail(valueChain, want.ValueSeq, "Σ :value is %s, stored value %s", s.formatValue(r.valueSum), s.formatValue(stored.Value))
	}
	if stored.QuantitySeq != want.QuantitySeq || stored.ValueSeq != want.ValueSeq {
		c.fail(valueChain, want.ValueSeq, "state includes seqs %d/%d, chains end at %d/%d (a half-written operation?)",
			stored.QuantitySeq, stored.ValueSeq, want.QuantitySeq, want.ValueSeq)
	}
	if stored.Quantity != want.Quantity || stored.Value != want.Value || stored.Rate != want.Rate ||
		stored.RateKnown != want.RateKnown || stored.LayerLow != want.LayerLow || stored.LayerHigh != want.LayerHigh ||
		!slices.Equal(stored.Pending, want.Pending) {
		c.fail(valueChain, want.ValueSeq, "stored position %+v, rebuilt %+v", stored, want)
	}
	i := 0
	for ly, err := range (txLayers{tx, l.layers}).layers() {
		if err != nil {
			c.fail(valueChain, want.ValueSeq, "stored layer: %v", err)
			return nil
		}
		if i == len(r.layers.open) || r.layers.open[i] != ly {
			c.fail(valueChain, want.ValueSeq, "stored layer %+v is not the rebuilt layer %d", ly, i)
			return nil
		}
		i++
	}
	if i < len(r.layers.open) {
		c.fail(valueChain, want.ValueSeq, "rebuilt layer %+v is not stored", r.layers.open[i])
	}
	return nil
}

// compareMarkers checks the reversal markers of one location.
func (c *checker) compareMarkers(tx *chain.Tx, tenant, item, loc, valueChain string, markers map[string]string) error {
	prefix := reversalKey(tenant, item, loc, "")
	seen := 0
	for kv, err := range tx.StateScan(prefix, prefixEnd(prefix), false) {
		if err != nil {
			return err
		}
		reversed := string(kv.Key[len(prefix):])
		by, ok := markers[reversed]
		switch {
		case !ok:
			c.fail(valueChain, 0, "stored marker says %q was reversed by %q, no reversal of it is recorded", reversed, kv.Value)
		case by != string(kv.Value):
			c.fail(valueChain, 0, "stored marker says %q was reversed by %q, recorded by %q", reversed, kv.Value, by)
		default:
			seen++
		}
	}
	if seen < len(markers) {
		for _, reversed := range sortedKeys(markers) {
			if _, err := tx.StateGet(reversalKey(tenant, item, loc, reversed)); isNotFound(err) {
				c.fail(valueChain, 0, "the marker of %q reversed by %q is missing", reversed, markers[reversed])
			} else if err != nil {
				return err
			}
		}
	}
	return nil
}

// stateScanPage is how many state keys one read transaction of
// orphanState visits.
const stateScanPage = 1024

// orphanState reports stored state that belongs to no chain: items whose
// chain does not exist, positions, layers and markers of locations without
// chains, and keys this package does not write. Rebuild deletes them.
func (c *checker) orphanState() error {
	start := []byte(statePrefix)
	end := prefixEnd(start)
	for {
		var last []byte
		var strays [][]byte
		count := 0
		err := c.db.View(c.ctx, func(tx *chain.Tx) error {
			last, count, strays = nil, 0, nil
			heads := map[string]bool{} // chain → exists, for the layers of one location
			for kv, err := range tx.StateScan(start, end, false) {
				if err != nil {
					return err
				}
				if count++; count > stateScanPage {
					break
				}
				last = append(last[:0], kv.Key...)
				name, stray, err := strayKey(tx, kv.Key, heads)
				if err != nil {
					return err
				}
				if stray {
					c.stray(name, "state key %q has no chain", kv.Key)
					strays = append(strays, bytes.Clone(kv.Key))
				}
			}
			return nil
		})
		if err == nil && c.rebuild != nil && len(strays) > 0 {
			err = c.unit(func(tx *chain.Tx) error { return c.deleteStraysNow(tx, strays) })
		}
		if err != nil || count <= stateScanPage {
			return err
		}
		start = append(last, 0)
	}
}

// strayKey reports whether a state key belongs to no chain, and the chain
// it would belong to.
func strayKey(tx *chain.Tx, key []byte, heads map[string]bool) (string, bool, error) {
	parts := strings.SplitN(string(key), "/", 4)
	if len(parts) != 4 {
		return statePrefix, true, nil
	}
	tenant, kind, rest := parts[1], parts[2], parts[3]
	item, rest, _ := strings.Cut(rest, "/")
	var names []string
	switch kind {
	case "item":
		name, err := ItemChain(tenant, item)
		if err != nil || strings.Contains(rest, "/") || len(key) != len(itemKey(tenant, item)) {
			return statePrefix, true, nil
		}
		names = []string{name}
	case "pos", "layer", "rev":
		loc, tail, found := strings.Cut(rest, "/")
		value, err := ValueChain(tenant, item, loc)
		if err != nil || (kind == "pos") == found || kind == "layer" && len(tail) != 8 {
			return statePrefix, true, nil
		}
		quantity, _ := QuantityChain(tenant, item, loc)
		names = []string{quantity, value}
	default:
		return statePrefix, true, nil
	}
	for _, name := range names {
		exists, ok := heads[name]
		if !ok {
			_, err := tx.Head(name)
			if err != nil && !isNotFound(err) {
				return name, false, err
			}
			exists = err == nil
			heads[name] = exists
		}
		if exists {
			return name, false, nil
		}
	}
	return names[len(names)-1], true, nil
}
