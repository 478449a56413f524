package valuations

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/ledgerworks/ledger/chain"
)

// Method is a valuation method.
type Method uint8

// Valuation methods.
const (
	// MovingAverage values stock at round(Q·rate) with one rate per
	// location, recomputed on every receipt.
	MovingAverage Method = 1
	// FIFO values stock as the sum of its layers; issues take the oldest.
	FIFO Method = 2
)

// String returns "moving_average" or "fifo", the names used in payloads.
func (m Method) String() string {
	switch m {
	case MovingAverage:
		return "moving_average"
	case FIFO:
		return "fifo"
	}
	return fmt.Sprintf("Method(%d)", uint8(m))
}

// ParseMethod parses "moving_average" (also "ma") or "fifo".
func ParseMethod(s string) (Method, error) {
	switch s {
	case "moving_average", "ma":
		return MovingAverage, nil
	case "fifo":
		return FIFO, nil
	}
	return 0, invalid(ErrInvalidItem, "unknown valuation method %q (moving_average or fifo)", s)
}

// Item is the valuation definition of an item within a tenant.
type Item struct {
	Tenant string
	ID     string
	Method Method
	// QuantityScale is the number of decimal places of quantities.
	QuantityScale uint8
	// Currency is an ISO 4217 code; MinorUnit its exponent (2 for EUR,
	// 0 for JPY, 3 for BHD).
	Currency  string
	MinorUnit uint8
	// AllowNegative lets issues go beyond the stock; the shortfall is valued
	// at an estimate and settled by the next receipt.
	AllowNegative bool
}

func (it Item) scales() scales { return scales{quantity: it.QuantityScale, minor: it.MinorUnit} }

// validate checks the fields and returns the item's chain.
func (it Item) validate() (string, error) {
	name, err := ItemChain(it.Tenant, it.ID)
	if err != nil {
		return "", invalid(ErrInvalidItem, "%v", err)
	}
	switch {
	case it.Method != MovingAverage && it.Method != FIFO:
		return "", invalid(ErrInvalidItem, "unknown valuation method %d", it.Method)
	case it.QuantityScale > QuantityScaleMax:
		return "", invalid(ErrInvalidItem, "quantity scale %d exceeds %d", it.QuantityScale, QuantityScaleMax)
	case it.MinorUnit > MinorUnitMax:
		return "", invalid(ErrInvalidItem, "minor unit %d exceeds %d", it.MinorUnit, MinorUnitMax)
	case !validCurrency(it.Currency):
		return "", invalid(ErrInvalidItem, "currency %q is not three letters A-Z", it.Currency)
	}
	return name, nil
}

func validCurrency(s string) bool {
	if len(s) != CurrencyLength {
		return false
	}
	for i := range len(s) {
		if s[i] < 'A' || s[i] > 'Z' {
			return false
		}
	}
	return true
}

// ItemResult is the outcome of DefineItem.
type ItemResult struct {
	Item  Item
	Entry chain.Entry
	// Unchanged is set when the definition was already current; nothing
	// was written and Entry is the entry that recorded it.
	Unchanged bool
}

// DefineItem records an item's definition, or a change of it. The quantity
// scale, currency and minor unit never change once defined; the method
// changes only while every location of the item holds quantity zero.
// Defining what is already current writes nothing.
func DefineItem(ctx context.Context, db *chain.DB, item Item) (ItemResult, error) {
	var res ItemResult
	err := db.Update(ctx, func(tx *chain.Tx) error {
		var err error
		res, err = DefineItemTx(tx, item)
		return err
	})
	return res, err
}

// DefineItemTx is DefineItem inside the caller's transaction.
func DefineItemTx(tx *chain.Tx, item Item) (ItemResult, error) {
	name, err := item.validate()
	if err != nil {
		return ItemResult{}, err
	}
	// The definition chain is locked before the current definition is
	// read: two processes defining the item on a shared backend cannot
	// both find it undefined, or both judge a change against the old one.
	if tx.Writable() {
		if _, err := headSeq(tx, name); err != nil {
			return ItemResult{}, err
		}
	}
	current, seq, err := loadItem(tx, item.Tenant, item.ID)
	switch {
	case isNotFound(err):
	case err != nil:
		return ItemResult{}, err
	case current == item:
		e, err := tx.Get(name, seq)
		return ItemResult{Item: item, Entry: e, Unchanged: true}, err
	case current.QuantityScale != item.QuantityScale || current.Currency != item.Currency || current.MinorUnit != item.MinorUnit:
		return ItemResult{}, invalid(ErrInvalidItem, "item %q: quantity scale, currency and minor unit cannot change (%d %s %d → %d %s %d)",
			item.ID, current.QuantityScale, current.Currency, current.MinorUnit, item.QuantityScale, item.Currency, item.MinorUnit)
	case current.Method != item.Method:
		if err := requireZeroQuantity(tx, item); err != nil {
			return ItemResult{}, err
		}
	}
	payload := encodeItem(item)
	res, err := tx.Append(chain.Request{Chain: name, Type: TypeItem, Payload: payload})
	if err != nil {
		return ItemResult{}, err
	}
	record := binary.BigEndian.AppendUint64(nil, res.Entry.Seq)
	if err := tx.StatePut(itemKey(item.Tenant, item.ID), append(record, payload...)); err != nil {
		return ItemResult{}, err
	}
	return ItemResult{Item: item, Entry: res.Entry}, nil
}

func requireZeroQuantity(tx *chain.Tx, item Item) error {
	prefix := positionPrefix(item.Tenant, item.ID)
	for kv, err := range tx.StateScan(prefix, prefixEnd(prefix), false) {
		if err != nil {
			return err
		}
		p, err := decodePosition(kv.Value)
		if err != nil {
			return err
		}
		if p.Quantity != 0 {
			return invalid(ErrMethodChange, "item %q holds %s at location %q",
				item.ID, item.scales().formatQuantity(p.Quantity), kv.Key[len(prefix):])
		}
	}
	return nil
}

// loadItem returns the current definition and the seq of its entry.
func loadItem(tx *chain.Tx, tenant, id string) (Item, uint64, error) {
	v, err := tx.StateGet(itemKey(tenant, id))
	if isNotFound(err) {
		return Item{}, 0, notFound(ErrUnknownItem, "tenant %q has no item %q", tenant, id)
	}
	if err != nil {
		return Item{}, 0, err
	}
	if len(v) < 8 {
		return Item{}, 0, fmt.Errorf("%w: item record of %d bytes", chain.ErrCorrupt, len(v))
	}
	it, err := decodeItem(v[8:])
	if err != nil {
		return Item{}, 0, fmt.Errorf("%w: item record: %w", chain.ErrCorrupt, err)
	}
	return it, binary.BigEndian.Uint64(v), nil
}

// GetItem returns an item's current definition.
func GetItem(ctx context.Context, db *chain.DB, tenant, id string) (Item, error) {
	var it Item
	err := db.View(ctx, func(tx *chain.Tx) error {
		var err error
		it, _, err = loadItem(tx, tenant, id)
		return err
	})
	return it, err
}

// ItemsMax bounds how many items Items returns at once.
const ItemsMax = 10_000

// Items lists a tenant's items in id order, starting after the id after
// (all when empty), at most limit of them (ItemsMax when limit is zero).
func Items(ctx context.Context, db *chain.DB, tenant, after string, limit int) ([]Item, error) {
	if limit <= 0 || limit > ItemsMax {
		limit = ItemsMax
	}
	prefix := itemPrefix(tenant)
	start := prefix
	if after != "" {
		start = append(append([]byte(nil), prefix...), after+"\x00"...)
	}
	var items []Item
	err := db.View(ctx, func(tx *chain.Tx) error {
		for kv, err := range tx.StateScan(start, prefixEnd(prefix), false) {
			if err != nil {
				return err
			}
			if len(kv.Value) < 8 {
				return fmt.Errorf("%w: item record %q", chain.ErrCorrupt, kv.Key)
			}
			it, err := decodeItem(kv.Value[8:])
			if err != nil {
				return fmt.Errorf("%w: item record %q: %w", chain.ErrCorrupt, kv.Key, err)
			}
			if items = append(items, it); len(items) == limit {
				break
			}
		}
		return nil
	})
	return items, err
}
