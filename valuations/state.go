package valuations

import (
	"encoding/binary"
	"fmt"
	"iter"

	"github.com/ledgerworks/ledger/chain"
)

// State keys. Tenant, item and location are chain-name components, which
// never contain "/", so each prefix below names exactly one tenant, item and
// location and no key of one can be a prefix of another's:
//
//	val/<tenant>/item/<item>                     current definition
//	val/<tenant>/pos/<item>/<location>           position record
//	val/<tenant>/layer/<item>/<location>/<id>    one FIFO layer, id big-endian
//	val/<tenant>/rev/<item>/<location>/<op>      reversal marker of op
//
// FIFO layers are one key each, ordered by id, so that an issue reads and
// rewrites only the layers it consumes: its cost does not grow with the
// number of open layers.
const statePrefix = Domain + "/"

func itemKey(tenant, item string) []byte {
	return []byte(statePrefix + tenant + "/item/" + item)
}

func itemPrefix(tenant string) []byte { return []byte(statePrefix + tenant + "/item/") }

func positionKey(tenant, item, location string) []byte {
	return []byte(statePrefix + tenant + "/pos/" + item + "/" + location)
}

func positionPrefix(tenant, item string) []byte {
	return []byte(statePrefix + tenant + "/pos/" + item + "/")
}

func layerPrefix(tenant, item, location string) []byte {
	return []byte(statePrefix + tenant + "/layer/" + item + "/" + location + "/")
}

func layerKey(prefix []byte, id uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), id)
}

func reversalKey(tenant, item, location, operation string) []byte {
	return []byte(statePrefix + tenant + "/rev/" + item + "/" + location + "/" + operation)
}

// prefixEnd is the first key after every key that starts with prefix; the
// prefixes above end in "/", so incrementing the last byte is enough.
func prefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	end[len(end)-1]++
	return end
}

// layerOrigin is the id of the first layer of a location. Ids grow upward
// for receipts and downward for returns put at the front, so both fit.
const layerOrigin = uint64(1) << 63

// position is the derived state of one item at one location.
type position struct {
	Quantity  int64 // units at the item's quantity scale
	Value     int64 // minor units of the currency
	Rate      int64 // units at minor unit + RateExtraPlaces, per whole item unit
	RateKnown bool  // Rate has been set by an inflow or a revaluation
	// QuantitySeq and ValueSeq are the last entries of the two chains that
	// this state includes; an entry beyond them was written without its
	// state (a half-written operation) and is completed before anything else.
	QuantitySeq uint64
	ValueSeq    uint64
	// Open FIFO layers have ids in [LayerLow, LayerHigh), gaps allowed.
	LayerLow  uint64
	LayerHigh uint64
	// Pending lists the issues that took stock below zero, oldest first,
	// with what is still unsettled of each. Non-empty exactly when
	// Quantity < 0.
	Pending []pending
}

// pending is the unsettled part of one issue beyond the stock.
type pending struct {
	Operation string
	Quantity  int64 // still uncovered, > 0
	Estimate  int64 // value still carried at the estimate, >= 0
}

func newPosition() position { return position{LayerLow: layerOrigin, LayerHigh: layerOrigin} }

// layer is one FIFO layer: quantity and value still open.
type layer struct {
	ID       uint64
	Quantity int64
	Value    int64
}

const positionVersion = 1

// encodePosition writes the record in a fixed little format: explicit sizes,
// big-endian, a version byte first.
func encodePosition(p *position) []byte {
	b := make([]byte, 0, 64+len(p.Pending)*40)
	b = append(b, positionVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(p.Quantity))
	b = binary.BigEndian.AppendUint64(b, uint64(p.Value))
	b = binary.BigEndian.AppendUint64(b, uint64(p.Rate))
	known := byte(0)
	if p.RateKnown {
		known = 1
	}
	b = append(b, known)
	b = binary.BigEndian.AppendUint64(b, p.QuantitySeq)
	b = binary.BigEndian.AppendUint64(b, p.ValueSeq)
	b = binary.BigEndian.AppendUint64(b, p.LayerLow)
	b = binary.BigEndian.AppendUint64(b, p.LayerHigh)
	b = binary.BigEndian.AppendUint16(b, uint16(len(p.Pending)))
	for _, q := range p.Pending {
		b = binary.BigEndian.AppendUint16(b, uint16(len(q.Operation)))
		b = append(b, q.Operation...)
		b = binary.BigEndian.AppendUint64(b, uint64(q.Quantity))
		b = binary.BigEndian.AppendUint64(b, uint64(q.Estimate))
	}
	return b
}

// stateReader reads fixed-size fields and remembers the first shortage.
type stateReader struct {
	data []byte
	ok   bool
}

func (r *stateReader) take(n int) []byte {
	if !r.ok || len(r.data) < n {
		r.ok = false
		return make([]byte, n)
	}
	v := r.data[:n]
	r.data = r.data[n:]
	return v
}

func (r *stateReader) u64() uint64 { return binary.BigEndian.Uint64(r.take(8)) }
func (r *stateReader) u16() uint16 { return binary.BigEndian.Uint16(r.take(2)) }
func (r *stateReader) u8() uint8   { return r.take(1)[0] }

func decodePosition(data []byte) (position, error) {
	r := stateReader{data: data, ok: true}
	var p position
	if v := r.u8(); v != positionVersion {
		return p, fmt.Errorf("%w: position record version %d", chain.ErrCorrupt, v)
	}
	p.Quantity = int64(r.u64())
	p.Value = int64(r.u64())
	p.Rate = int64(r.u64())
	known := r.u8()
	p.RateKnown = known == 1
	p.QuantitySeq = r.u64()
	p.ValueSeq = r.u64()
	p.LayerLow = r.u64()
	p.LayerHigh = r.u64()
	count := int(r.u16())
	if count > PendingIssuesMax {
		return p, fmt.Errorf("%w: position record lists %d pending issues", chain.ErrCorrupt, count)
	}
	for range count {
		op := string(r.take(int(r.u16())))
		p.Pending = append(p.Pending, pending{Operation: op, Quantity: int64(r.u64()), Estimate: int64(r.u64())})
	}
	if !r.ok || len(r.data) != 0 || known > 1 {
		return p, fmt.Errorf("%w: position record of %d bytes is malformed", chain.ErrCorrupt, len(data))
	}
	return p, nil
}

func encodeLayer(l layer) []byte {
	b := make([]byte, 0, 16)
	b = binary.BigEndian.AppendUint64(b, uint64(l.Quantity))
	return binary.BigEndian.AppendUint64(b, uint64(l.Value))
}

func decodeLayer(prefix, key, value []byte) (layer, error) {
	if len(key) != len(prefix)+8 || len(value) != 16 {
		return layer{}, fmt.Errorf("%w: layer record %q is malformed", chain.ErrCorrupt, key)
	}
	return layer{
		ID:       binary.BigEndian.Uint64(key[len(prefix):]),
		Quantity: int64(binary.BigEndian.Uint64(value)),
		Value:    int64(binary.BigEndian.Uint64(value[8:])),
	}, nil
}

// layerStore is where the arithmetic reads FIFO layers: the transaction's
// state, or memory when Check rebuilds a location from its chains.
type layerStore interface {
	// layers yields the open layers, oldest first.
	layers() iter.Seq2[layer, error]
	// layer returns one layer by id.
	layer(id uint64) (layer, bool, error)
}

// txLayers reads layers from a transaction's state.
type txLayers struct {
	tx     *chain.Tx
	prefix []byte
}

func (s txLayers) layers() iter.Seq2[layer, error] {
	return func(yield func(layer, error) bool) {
		for kv, err := range s.tx.StateScan(s.prefix, prefixEnd(s.prefix), false) {
			if err != nil {
				yield(layer{}, err)
				return
			}
			l, err := decodeLayer(s.prefix, kv.Key, kv.Value)
			if !yield(l, err) || err != nil {
				return
			}
		}
	}
}

func (s txLayers) layer(id uint64) (layer, bool, error) {
	key := layerKey(s.prefix, id)
	v, err := s.tx.StateGet(key)
	if isNotFound(err) {
		return layer{}, false, nil
	}
	if err != nil {
		return layer{}, false, err
	}
	l, err := decodeLayer(s.prefix, key, v)
	return l, err == nil, err
}

// memoryLayers holds layers ordered by id.
type memoryLayers struct{ open []layer }

func (m *memoryLayers) layers() iter.Seq2[layer, error] {
	return func(yield func(layer, error) bool) {
		for _, l := range m.open {
			if !yield(l, nil) {
				return
			}
		}
	}
}

func (m *memoryLayers) find(id uint64) (int, bool) {
	lo, hi := 0, len(m.open)
	for lo < hi {
		mid := (lo + hi) / 2
		if m.open[mid].ID < id {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, lo < len(m.open) && m.open[lo].ID == id
}

func (m *memoryLayers) layer(id uint64) (layer, bool, error) {
	i, ok := m.find(id)
	if !ok {
		return layer{}, false, nil
	}
	return m.open[i], true, nil
}

func (m *memoryLayers) apply(c *layerChanges) {
	for _, id := range c.deletes {
		if i, ok := m.find(id); ok {
			m.open = append(m.open[:i], m.open[i+1:]...)
		}
	}
	for _, l := range c.puts {
		i, ok := m.find(l.ID)
		if ok {
			m.open[i] = l
			continue
		}
		m.open = append(m.open, layer{})
		copy(m.open[i+1:], m.open[i:])
		m.open[i] = l
	}
}

// layerChanges are the layer writes an operation makes, applied only once
// the whole operation has been computed without error.
type layerChanges struct {
	puts    []layer
	deletes []uint64
}

func (c *layerChanges) write(tx *chain.Tx, prefix []byte) error {
	for _, id := range c.deletes {
		if err := tx.StateDelete(layerKey(prefix, id)); err != nil {
			return err
		}
	}
	for _, l := range c.puts {
		if err := tx.StatePut(layerKey(prefix, l.ID), encodeLayer(l)); err != nil {
			return err
		}
	}
	return nil
}
