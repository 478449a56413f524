package stockmovement

import (
	"context"
	"encoding/binary"
	"errors"

	"github.com/ledgerworks/ledger/chain"
)

// DefinedItem is an item definition as recorded in the catalog chain.
type DefinedItem struct {
	Item
	// Seq is the catalog chain entry that holds this definition.
	Seq uint64
	// Unchanged is set when the definition was already current, so nothing
	// was written.
	Unchanged bool
}

// DefinedLocation is a location definition as recorded in the catalog chain.
type DefinedLocation struct {
	Location
	Seq       uint64
	Unchanged bool
}

// DefineItem records an item definition, or a change to one, in the
// tenant's catalog chain. Defining an item exactly as it is already defined
// writes nothing (so retries are harmless); any other change appends a new
// entry. The scale can never change (ErrScaleChange).
func DefineItem(ctx context.Context, db *chain.DB, tenant string, it Item) (DefinedItem, error) {
	var res DefinedItem
	err := db.Update(ctx, func(tx *chain.Tx) error {
		var err error
		res, err = DefineItemTx(tx, tenant, it)
		return err
	})
	return res, err
}

// DefineItemTx is DefineItem inside the caller's transaction.
func DefineItemTx(tx *chain.Tx, tenant string, it Item) (DefinedItem, error) {
	if err := validateID(tenant); err != nil {
		return DefinedItem{}, err
	}
	if err := ValidateItem(it); err != nil {
		return DefinedItem{}, err
	}
	if err := lockCatalog(tx, tenant); err != nil {
		return DefinedItem{}, err
	}
	current, err := GetItemTx(tx, tenant, it.ID)
	switch {
	case errors.Is(err, ErrItemNotFound):
	case err != nil:
		return DefinedItem{}, err
	case current.Scale != it.Scale:
		return DefinedItem{}, newError("define item", ErrScaleChange,
			"item %q has scale %d, not %d", it.ID, current.Scale, it.Scale)
	case current.Item == it:
		current.Unchanged = true
		return current, nil
	}
	payload := EncodeItem(it)
	seq, err := appendCatalog(tx, tenant, ItemType, payload, stateKey(tenant, stateItem, it.ID))
	if err != nil {
		return DefinedItem{}, err
	}
	return DefinedItem{Item: it, Seq: seq}, nil
}

// DefineLocation records a location definition, or a change to its name, in
// the tenant's catalog chain; an unchanged definition writes nothing.
func DefineLocation(ctx context.Context, db *chain.DB, tenant string, l Location) (DefinedLocation, error) {
	var res DefinedLocation
	err := db.Update(ctx, func(tx *chain.Tx) error {
		var err error
		res, err = DefineLocationTx(tx, tenant, l)
		return err
	})
	return res, err
}

// DefineLocationTx is DefineLocation inside the caller's transaction.
func DefineLocationTx(tx *chain.Tx, tenant string, l Location) (DefinedLocation, error) {
	if err := validateID(tenant); err != nil {
		return DefinedLocation{}, err
	}
	if err := ValidateLocation(l); err != nil {
		return DefinedLocation{}, err
	}
	if err := lockCatalog(tx, tenant); err != nil {
		return DefinedLocation{}, err
	}
	current, err := GetLocationTx(tx, tenant, l.ID)
	switch {
	case errors.Is(err, ErrLocationNotFound):
	case err != nil:
		return DefinedLocation{}, err
	case current.Location == l:
		current.Unchanged = true
		return current, nil
	}
	seq, err := appendCatalog(tx, tenant, LocationType, EncodeLocation(l), stateKey(tenant, stateLocation, l.ID))
	if err != nil {
		return DefinedLocation{}, err
	}
	return DefinedLocation{Location: l, Seq: seq}, nil
}

// lockCatalog locks the tenant's catalog chain before a definition reads the
// current one, so that two processes defining the same item on a shared
// backend cannot both find it undefined (or both find the old scale) and
// both append: the second waits, then reads the first's definition.
func lockCatalog(tx *chain.Tx, tenant string) error {
	if !tx.Writable() {
		return nil
	}
	catalog, err := CatalogChain(tenant)
	if err != nil {
		return err
	}
	if _, err := tx.Head(catalog); err != nil && !errors.Is(err, chain.ErrNotFound) {
		return err
	}
	return nil
}

// appendCatalog appends a definition to the catalog chain and makes it the
// current one in state: seq (8 bytes) followed by the payload.
func appendCatalog(tx *chain.Tx, tenant, typ string, payload, key []byte) (uint64, error) {
	catalog, err := CatalogChain(tenant)
	if err != nil {
		return 0, err
	}
	res, err := tx.Append(chain.Request{Chain: catalog, Type: typ, Payload: payload})
	if err != nil {
		return 0, err
	}
	value := binary.BigEndian.AppendUint64(nil, res.Entry.Seq)
	if err := tx.StatePut(key, append(value, payload...)); err != nil {
		return 0, err
	}
	return res.Entry.Seq, nil
}

// GetItem returns the tenant's current definition of an item.
func GetItem(ctx context.Context, db *chain.DB, tenant, id string) (DefinedItem, error) {
	var res DefinedItem
	err := db.View(ctx, func(tx *chain.Tx) error {
		var err error
		res, err = GetItemTx(tx, tenant, id)
		return err
	})
	return res, err
}

// GetItemTx is GetItem inside a transaction.
func GetItemTx(tx *chain.Tx, tenant, id string) (DefinedItem, error) {
	if err := validateIDs(tenant, id); err != nil {
		return DefinedItem{}, err
	}
	value, err := tx.StateGet(stateKey(tenant, stateItem, id))
	if errors.Is(err, chain.ErrNotFound) {
		return DefinedItem{}, newError("item", ErrItemNotFound, "tenant %q item %q", tenant, id)
	}
	if err != nil {
		return DefinedItem{}, err
	}
	return decodeItemState(value)
}

func decodeItemState(value []byte) (DefinedItem, error) {
	if len(value) < 8 {
		return DefinedItem{}, malformed("item state of %d bytes", len(value))
	}
	it, err := DecodeItem(value[8:])
	if err != nil {
		return DefinedItem{}, err
	}
	return DefinedItem{Item: it, Seq: binary.BigEndian.Uint64(value)}, nil
}

// GetLocation returns the tenant's current definition of a location.
func GetLocation(ctx context.Context, db *chain.DB, tenant, id string) (DefinedLocation, error) {
	var res DefinedLocation
	err := db.View(ctx, func(tx *chain.Tx) error {
		var err error
		res, err = GetLocationTx(tx, tenant, id)
		return err
	})
	return res, err
}

// GetLocationTx is GetLocation inside a transaction.
func GetLocationTx(tx *chain.Tx, tenant, id string) (DefinedLocation, error) {
	if err := validateIDs(tenant, id); err != nil {
		return DefinedLocation{}, err
	}
	value, err := tx.StateGet(stateKey(tenant, stateLocation, id))
	if errors.Is(err, chain.ErrNotFound) {
		return DefinedLocation{}, newError("location", ErrLocationNotFound, "tenant %q location %q", tenant, id)
	}
	if err != nil {
		return DefinedLocation{}, err
	}
	return decodeLocationState(value)
}

func decodeLocationState(value []byte) (DefinedLocation, error) {
	if len(value) < 8 {
		return DefinedLocation{}, malformed("location state of %d bytes", len(value))
	}
	l, err := DecodeLocation(value[8:])
	if err != nil {
		return DefinedLocation{}, err
	}
	return DefinedLocation{Location: l, Seq: binary.BigEndian.Uint64(value)}, nil
}

// ListLimitMax bounds how many items or locations one list call returns.
const ListLimitMax = 10_000

// Items returns up to limit of the tenant's items (ListLimitMax when limit
// is zero or larger) in id byte order, starting after the id after ("" for
// the first page).
func Items(ctx context.Context, db *chain.DB, tenant, after string, limit int) ([]DefinedItem, error) {
	var items []DefinedItem
	err := listState(ctx, db, tenant, stateItem, after, limit, func(value []byte) error {
		it, err := decodeItemState(value)
		items = append(items, it)
		return err
	})
	return items, err
}

// Locations returns up to limit of the tenant's locations in id byte order,
// starting after the id after.
func Locations(ctx context.Context, db *chain.DB, tenant, after string, limit int) ([]DefinedLocation, error) {
	var locations []DefinedLocation
	err := listState(ctx, db, tenant, stateLocation, after, limit, func(value []byte) error {
		l, err := decodeLocationState(value)
		locations = append(locations, l)
		return err
	})
	return locations, err
}

func listState(ctx context.Context, db *chain.DB, tenant, kind, after string, limit int, add func([]byte) error) error {
	if err := validateID(tenant); err != nil {
		return err
	}
	if limit <= 0 || limit > ListLimitMax {
		limit = ListLimitMax
	}
	start, end := statePrefix(tenant, kind)
	if after != "" {
		start = append(stateKey(tenant, kind, after), 0)
	}
	return db.View(ctx, func(tx *chain.Tx) error {
		count := 0
		for kv, err := range tx.StateScan(start, end, false) {
			if err != nil {
				return err
			}
			if err := add(kv.Value); err != nil {
				return err
			}
			if count++; count == limit {
				break
			}
		}
		return nil
	})
}
