package valuations

import (
	"context"
	"fmt"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
)

// Balance is an item's position at a location.
type Balance struct {
	Tenant, Item, Location string
	Method                 Method
	Quantity               decimal.Decimal
	// Value is the stock value: 0 at quantity 0, and minus the unsettled
	// estimates when the quantity is negative.
	Value decimal.Decimal
	// Rate is the moving-average rate, or for FIFO the rate of the latest
	// inflow (used to estimate an issue beyond the stock), at minor unit +
	// RateExtraPlaces places; RateKnown is false before the first inflow.
	Rate      decimal.Decimal
	RateKnown bool
	// QuantitySeq and ValueSeq are the seqs of the location's two chains the
	// balance includes.
	QuantitySeq, ValueSeq uint64
	// Pending lists the issues beyond the stock awaiting settlement.
	Pending []PendingIssue
}

// PendingIssue is the unsettled part of an issue that went below zero.
type PendingIssue struct {
	OperationID string
	Quantity    decimal.Decimal
	Estimate    decimal.Decimal
}

// Layer is an open FIFO layer, oldest first by ID.
type Layer struct {
	// ID is the layer's id in the state keyspace (val/TENANT/layer/ITEM/
	// LOCATION/<ID>, big-endian): 2^63 for a location's first layer.
	ID uint64
	// Number is ID as a person reads it: 1 for the location's first
	// receipt's layer, 2, 3, … for later ones; layers returned in front of
	// every other (reversed issues and transfers) count down from 0.
	// Layers are consumed in ascending Number.
	Number   int64
	Quantity decimal.Decimal
	Value    decimal.Decimal
}

// LayerNumber returns the Number of the layer with this id.
func LayerNumber(id uint64) int64 { return int64(id-layerOrigin) + 1 }

func balanceOf(it Item, loc string, p position) Balance {
	s := it.scales()
	b := Balance{Tenant: it.Tenant, Item: it.ID, Location: loc, Method: it.Method,
		Quantity: decimal.MustNew(p.Quantity, s.quantity), Value: decimal.MustNew(p.Value, s.minor),
		Rate: decimal.MustNew(p.Rate, s.rate()), RateKnown: p.RateKnown,
		QuantitySeq: p.QuantitySeq, ValueSeq: p.ValueSeq}
	for _, q := range p.Pending {
		b.Pending = append(b.Pending, PendingIssue{OperationID: q.Operation,
			Quantity: decimal.MustNew(q.Quantity, s.quantity), Estimate: decimal.MustNew(q.Estimate, s.minor)})
	}
	return b
}

// BalanceTx returns the current balance inside a transaction. A location
// that has seen nothing has quantity and value zero.
func BalanceTx(tx *chain.Tx, tenant, item, loc string) (Balance, error) {
	it, _, err := loadItem(tx, tenant, item)
	if err != nil {
		return Balance{}, err
	}
	l, err := locate(it, loc, "")
	if err != nil {
		return Balance{}, err
	}
	p, err := loadPosition(tx, l)
	if err != nil {
		return Balance{}, err
	}
	return balanceOf(it, loc, p), nil
}

// GetBalance returns the current balance of an item at a location.
func GetBalance(ctx context.Context, db *chain.DB, tenant, item, loc string) (Balance, error) {
	var b Balance
	err := db.View(ctx, func(tx *chain.Tx) error {
		var err error
		b, err = BalanceTx(tx, tenant, item, loc)
		return err
	})
	return b, err
}

// BalanceAt returns the balance as of the value chain's entry valueSeq (as
// that entry recorded it): quantity, value and rate after it. Seq 0 is the
// empty position. Pending issues are not listed.
func BalanceAt(ctx context.Context, db *chain.DB, tenant, item, loc string, valueSeq uint64) (Balance, error) {
	var b Balance
	err := db.View(ctx, func(tx *chain.Tx) error {
		it, _, err := loadItem(tx, tenant, item)
		if err != nil {
			return err
		}
		l, err := locate(it, loc, "")
		if err != nil {
			return err
		}
		if valueSeq == 0 {
			b = balanceOf(it, loc, newPosition())
			return nil
		}
		e, err := tx.Get(l.value, valueSeq)
		if isNotFound(err) {
			return notFound(ErrUnknownOperation, "chain %q has no seq %d", l.value, valueSeq)
		}
		if err != nil {
			return err
		}
		d, err := decodeValue(e.Payload)
		if err != nil {
			return fmt.Errorf("%w: chain %q seq %d: %w", chain.ErrCorrupt, l.value, valueSeq, err)
		}
		method := d.method
		b = balanceOf(it, loc, position{Quantity: d.quantity, Value: d.value, Rate: d.rate, RateKnown: d.rateKnown, ValueSeq: valueSeq})
		b.Method = method
		return nil
	})
	return b, err
}

// Balances lists the balances of an item at every location it has been at.
func Balances(ctx context.Context, db *chain.DB, tenant, item string) ([]Balance, error) {
	var list []Balance
	err := db.View(ctx, func(tx *chain.Tx) error {
		it, _, err := loadItem(tx, tenant, item)
		if err != nil {
			return err
		}
		prefix := positionPrefix(tenant, item)
		for kv, err := range tx.StateScan(prefix, prefixEnd(prefix), false) {
			if err != nil {
				return err
			}
			p, err := decodePosition(kv.Value)
			if err != nil {
				return err
			}
			list = append(list, balanceOf(it, string(kv.Key[len(prefix):]), p))
		}
		return nil
	})
	return list, err
}

// LayersMax bounds how many layers Layers returns at once.
const LayersMax = 100_000

// Layers returns up to limit open FIFO layers of a location (LayersMax when
// limit is zero), oldest first.
func Layers(ctx context.Context, db *chain.DB, tenant, item, loc string, limit int) ([]Layer, error) {
	if limit <= 0 || limit > LayersMax {
		limit = LayersMax
	}
	var list []Layer
	err := db.View(ctx, func(tx *chain.Tx) error {
		it, _, err := loadItem(tx, tenant, item)
		if err != nil {
			return err
		}
		l, err := locate(it, loc, "")
		if err != nil {
			return err
		}
		s := it.scales()
		for ly, err := range (txLayers{tx, l.layers}).layers() {
			if err != nil {
				return err
			}
			list = append(list, Layer{ID: ly.ID, Number: LayerNumber(ly.ID), Quantity: decimal.MustNew(ly.Quantity, s.quantity), Value: decimal.MustNew(ly.Value, s.minor)})
			if len(list) == limit {
				break
			}
		}
		return nil
	})
	return list, err
}
