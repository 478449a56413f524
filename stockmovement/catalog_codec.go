package stockmovement

import (
	"encoding/binary"
	"fmt"

	"github.com/ledgerworks/ledger/decimal"
)

// Payload types of the catalog chain.
const (
	ItemType     = "stock.item/v1"
	LocationType = "stock.location/v1"
)

// Item is a tenant's definition of a stock item.
type Item struct {
	ID   string
	Name string // display name; may be empty
	// Scale is the number of decimal places of the item's quantities: 0 for
	// pieces, 3 for kilograms to the gram. It cannot change once defined.
	Scale uint8
	// AllowNegative lets movements leave a negative balance.
	AllowNegative bool
}

// Location is a tenant's definition of a place that holds stock.
type Location struct {
	ID   string
	Name string // display name; may be empty
}

// itemFlagAllowNegative is the only flag of stock.item/v1; other bits are
// refused so that a later version can use them.
const itemFlagAllowNegative = 1

// Layout of stock.item/v1: str id, str name, u8 scale, u8 flags.
// Layout of stock.location/v1: str id, str name.
// str is a u16 big-endian byte length followed by UTF-8 bytes.
const catalogSizeMax = 2 + IDLengthMax + 2 + NameLengthMax + 2

// EncodeItem returns the canonical bytes of an item definition. It panics
// on an invalid definition (see ValidateItem).
func EncodeItem(it Item) []byte {
	if err := ValidateItem(it); err != nil {
		panic(fmt.Sprintf("stockmovement: encoding an invalid item: %v", err))
	}
	b := appendText(nil, it.ID)
	b = appendText(b, it.Name)
	flags := byte(0)
	if it.AllowNegative {
		flags |= itemFlagAllowNegative
	}
	return append(b, it.Scale, flags)
}

// DecodeItem parses a stock.item/v1 payload strictly. Errors match
// ErrMalformed.
func DecodeItem(data []byte) (Item, error) {
	if len(data) > catalogSizeMax {
		return Item{}, malformed("item of %d bytes exceeds %d", len(data), catalogSizeMax)
	}
	r := reader{data: data}
	it := Item{ID: r.text(), Name: r.text(), Scale: r.readByte()}
	flags := r.readByte()
	if r.err != "" {
		return Item{}, malformed("item: %s", r.err)
	}
	if len(r.data) != 0 {
		return Item{}, malformed("item: %d bytes after the last field", len(r.data))
	}
	if flags&^itemFlagAllowNegative != 0 {
		return Item{}, malformed("item: unknown flags %#x", flags)
	}
	it.AllowNegative = flags&itemFlagAllowNegative != 0
	if err := ValidateItem(it); err != nil {
		return Item{}, malformed("item: %v", err)
	}
	return it, nil
}

// ValidateItem checks an item definition's id, name and scale.
func ValidateItem(it Item) error {
	if err := validateID(it.ID); err != nil {
		return err
	}
	if err := validateText("define item", "name", it.Name, NameLengthMax); err != nil {
		return err
	}
	if it.Scale > decimal.ScaleMax {
		return newError("define item", ErrInvalidScale, "scale %d exceeds %d", it.Scale, decimal.ScaleMax)
	}
	return nil
}

// EncodeLocation returns the canonical bytes of a location definition. It
// panics on an invalid definition (see ValidateLocation).
func EncodeLocation(l Location) []byte {
	if err := ValidateLocation(l); err != nil {
		panic(fmt.Sprintf("stockmovement: encoding an invalid location: %v", err))
	}
	return appendText(appendText(nil, l.ID), l.Name)
}

// DecodeLocation parses a stock.location/v1 payload strictly. Errors match
// ErrMalformed.
func DecodeLocation(data []byte) (Location, error) {
	if len(data) > catalogSizeMax {
		return Location{}, malformed("location of %d bytes exceeds %d", len(data), catalogSizeMax)
	}
	r := reader{data: data}
	l := Location{ID: r.text(), Name: r.text()}
	if r.err != "" {
		return Location{}, malformed("location: %s", r.err)
	}
	if len(r.data) != 0 {
		return Location{}, malformed("location: %d bytes after the last field", len(r.data))
	}
	if err := ValidateLocation(l); err != nil {
		return Location{}, malformed("location: %v", err)
	}
	return l, nil
}

// ValidateLocation checks a location definition's id and name.
func ValidateLocation(l Location) error {
	if err := validateID(l.ID); err != nil {
		return err
	}
	return validateText("define location", "name", l.Name, NameLengthMax)
}

func appendText(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}
