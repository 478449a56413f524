package stockmovement

import (
	"context"
	"errors"
	"iter"
	"sort"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
)

// Balance is the quantity of an item at a location after a given entry.
type Balance struct {
	Tenant, Item, Location string
	Quantity               decimal.Decimal
	// Seq is the last entry of the location's chain that the balance
	// includes; 0 before the first movement.
	Seq uint64
	// TimeUnixNano is that entry's recording time; 0 when Seq is 0.
	TimeUnixNano int64
}

// GetBalance returns the current balance of an item at a location: one
// state read, whatever the length of the chain.
func GetBalance(ctx context.Context, db *chain.DB, tenant, item, location string) (Balance, error) {
	var b Balance
	err := db.View(ctx, func(tx *chain.Tx) error {
		var err error
		b, err = GetBalanceTx(tx, tenant, item, location)
		return err
	})
	return b, err
}

// GetBalanceTx is GetBalance inside a transaction; in a caller's Update it
// includes the movements that transaction has made so far.
func GetBalanceTx(tx *chain.Tx, tenant, itemID, location string) (Balance, error) {
	const op = "balance"
	if _, err := MovementChain(tenant, itemID, location); err != nil {
		return Balance{}, withOp(err, op)
	}
	item, err := lookupItem(tx, op, tenant, itemID)
	if err != nil {
		return Balance{}, err
	}
	state, err := readBalance(tx, tenant, itemID, location)
	if err != nil {
		return Balance{}, err
	}
	if state.seq == 0 { // no movement yet: the location must still exist
		if _, err := lookupItem(tx, op, tenant, itemID, location); err != nil {
			return Balance{}, err
		}
	}
	return Balance{Tenant: tenant, Item: itemID, Location: location,
		Quantity: decimal.MustNew(state.units, item.Scale), Seq: state.seq, TimeUnixNano: state.timeUnixNano}, nil
}

// BalanceAtSeq returns the balance after entry seq of the location's chain
// (zero for seq 0): the running quantity stored on that entry, one read.
// A seq beyond the chain's head is ErrSeqBeyondHead.
func BalanceAtSeq(ctx context.Context, db *chain.DB, tenant, itemID, location string, seq uint64) (Balance, error) {
	var b Balance
	err := db.View(ctx, func(tx *chain.Tx) error {
		item, name, err := pointInTime(tx, tenant, itemID, location)
		if err != nil {
			return err
		}
		b = Balance{Tenant: tenant, Item: itemID, Location: location, Quantity: decimal.MustNew(0, item.Scale)}
		if seq == 0 {
			return nil
		}
		head, err := tx.Head(name)
		if err != nil && !errors.Is(err, chain.ErrNotFound) {
			return err
		}
		if seq > head.Seq {
			return newError("balance", ErrSeqBeyondHead, "seq %d, chain %q ends at seq %d", seq, name, head.Seq)
		}
		b, err = balanceAt(tx, tenant, itemID, location, name, seq)
		return err
	})
	return b, err
}

// BalanceAtTime returns the balance as it was recorded at time at: after
// the last entry whose time is not later than at (zero before the first).
// Entry times never decrease within a chain, so this is a binary search of
// O(log n) entry reads.
func BalanceAtTime(ctx context.Context, db *chain.DB, tenant, itemID, location string, at time.Time) (Balance, error) {
	var b Balance
	err := db.View(ctx, func(tx *chain.Tx) error {
		item, name, err := pointInTime(tx, tenant, itemID, location)
		if err != nil {
			return err
		}
		head, err := tx.Head(name)
		if err != nil && !errors.Is(err, chain.ErrNotFound) {
			return err
		}
		limit := at.UnixNano()
		// sort.Search finds the first seq recorded after at; the one
		// before it is the answer.
		var searchErr error
		after := sort.Search(int(head.Seq), func(i int) bool {
			if searchErr != nil {
				return true
			}
			e, err := tx.Get(name, uint64(i)+1)
			if err != nil {
				searchErr = err
				return true
			}
			return e.TimeUnixNano > limit
		})
		if searchErr != nil {
			return searchErr
		}
		if after == 0 {
			b = Balance{Tenant: tenant, Item: itemID, Location: location, Quantity: decimal.MustNew(0, item.Scale)}
			return nil
		}
		b, err = balanceAt(tx, tenant, itemID, location, name, uint64(after))
		return err
	})
	return b, err
}

// pointInTime checks the names and returns the item and the chain.
func pointInTime(tx *chain.Tx, tenant, itemID, location string) (DefinedItem, string, error) {
	const op = "balance"
	name, err := MovementChain(tenant, itemID, location)
	if err != nil {
		return DefinedItem{}, "", withOp(err, op)
	}
	item, err := lookupItem(tx, op, tenant, itemID, location)
	return item, name, err
}

// balanceAt reads the running quantity stored on one entry.
func balanceAt(tx *chain.Tx, tenant, item, location, name string, seq uint64) (Balance, error) {
	e, err := tx.Get(name, seq)
	if err != nil {
		return Balance{}, err
	}
	if e.Type != MovementType {
		return Balance{}, newError("balance", ErrMalformed, "chain %q seq %d has type %q", name, seq, e.Type)
	}
	m, err := DecodeMovement(e.Payload)
	if err != nil {
		return Balance{}, err
	}
	return Balance{Tenant: tenant, Item: item, Location: location, Quantity: m.Balance,
		Seq: seq, TimeUnixNano: e.TimeUnixNano}, nil
}

// ItemTotal returns the quantity of an item over all the tenant's locations:
// one state read.
func ItemTotal(ctx context.Context, db *chain.DB, tenant, itemID string) (decimal.Decimal, error) {
	var total decimal.Decimal
	err := db.View(ctx, func(tx *chain.Tx) error {
		var err error
		total, err = ItemTotalTx(tx, tenant, itemID)
		return err
	})
	return total, err
}

// ItemTotalTx is ItemTotal inside a transaction.
func ItemTotalTx(tx *chain.Tx, tenant, itemID string) (decimal.Decimal, error) {
	item, err := lookupItem(tx, "total", tenant, itemID)
	if err != nil {
		return decimal.Decimal{}, err
	}
	units, err := readTotal(tx, tenant, itemID)
	if err != nil {
		return decimal.Decimal{}, err
	}
	return decimal.MustNew(units, item.Scale), nil
}

// ItemBalances returns the current balance of an item at every location
// that has had a movement of it, in location id order, up to ListLimitMax.
func ItemBalances(ctx context.Context, db *chain.DB, tenant, itemID string) ([]Balance, error) {
	var balances []Balance
	err := db.View(ctx, func(tx *chain.Tx) error {
		var err error
		balances, err = ItemBalancesTx(tx, tenant, itemID)
		return err
	})
	return balances, err
}

// ItemBalancesTx is ItemBalances inside a transaction.
func ItemBalancesTx(tx *chain.Tx, tenant, itemID string) ([]Balance, error) {
	item, err := lookupItem(tx, "balances", tenant, itemID)
	if err != nil {
		return nil, err
	}
	var balances []Balance
	start, end := statePrefix(tenant, stateBalance, itemID)
	for kv, err := range tx.StateScan(start, end, false) {
		if err != nil {
			return nil, err
		}
		state, err := decodeBalanceState(kv.Value)
		if err != nil {
			return nil, err
		}
		location := string(kv.Key[len(start):])
		balances = append(balances, Balance{Tenant: tenant, Item: itemID, Location: location,
			Quantity: decimal.MustNew(state.units, item.Scale), Seq: state.seq, TimeUnixNano: state.timeUnixNano})
		if len(balances) == ListLimitMax {
			break
		}
	}
	return balances, nil
}

// History yields the movements of an item at a location with seq >= fromSeq,
// in order. It reads in pages, holding no transaction open between them.
func History(ctx context.Context, db *chain.DB, tenant, item, location string, fromSeq uint64) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		name, err := MovementChain(tenant, item, location)
		if err != nil {
			yield(Entry{}, withOp(err, "history"))
			return
		}
		for e, err := range db.Entries(ctx, name, fromSeq) {
			if err != nil {
				yield(Entry{}, err)
				return
			}
			var m Movement
			if e.Type != MovementType {
				err = newError("history", ErrMalformed, "chain %q seq %d has type %q", name, e.Seq, e.Type)
			} else {
				m, err = DecodeMovement(e.Payload)
			}
			if !yield(entryOf(tenant, item, location, e, m), err) || err != nil {
				return
			}
		}
	}
}
