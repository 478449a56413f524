// Package pgcolumn hands values to pgx as statement parameters, and slices
// as PostgreSQL arrays, without an allocation for each value.
//
// pgx takes parameters, and the elements of an array parameter, as
// interface values: a string, a time.Time, an int64 above 255 or a byte
// slice put in an interface value is copied to the heap, one allocation
// each, for every element of every array the ledger sends (a group's
// entries, a batch's claims). A pointer in an interface value costs
// nothing. The types here give pgx a pointer to each value, of a type that
// hands pgx the value through pgtype's valuer interfaces (TextValuer,
// Int64Valuer, BytesValuer, TimestamptzValuer), so the bytes on the wire
// are the ones the plain Go values give.
//
// Pass a value as a parameter by its address (&v, v a Text); pass a slice
// as an array by converting it (TextArray(s)). Neither copies the values:
// they must not change until the statement is sent.
package pgcolumn

import (
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// Text is a text value, never NULL.
type Text string

// TextValue implements pgtype.TextValuer.
func (t *Text) TextValue() (pgtype.Text, error) {
	return pgtype.Text{String: string(*t), Valid: true}, nil
}

// NullText is a text value, NULL when empty.
type NullText string

// TextValue implements pgtype.TextValuer.
func (t *NullText) TextValue() (pgtype.Text, error) {
	return pgtype.Text{String: string(*t), Valid: *t != ""}, nil
}

// Int64 is a bigint value.
type Int64 int64

// Int64Value implements pgtype.Int64Valuer.
func (n *Int64) Int64Value() (pgtype.Int8, error) {
	return pgtype.Int8{Int64: int64(*n), Valid: true}, nil
}

// Bytes is a bytea value, NULL when nil.
type Bytes []byte

// BytesValue implements pgtype.BytesValuer.
func (b *Bytes) BytesValue() ([]byte, error) { return *b, nil }

// Time is a timestamptz value.
type Time time.Time

// TimestamptzValue implements pgtype.TimestamptzValuer.
func (t *Time) TimestamptzValue() (pgtype.Timestamptz, error) {
	return pgtype.Timestamptz{Time: time.Time(*t), Valid: true}, nil
}

// dimensions is the shape of a one-dimensional array of n elements, as
// pgtype.FlatArray gives it; nil (a NULL array) for a nil slice.
func dimensions(isNil bool, n int) []pgtype.ArrayDimension {
	if isNil {
		return nil
	}
	return []pgtype.ArrayDimension{{Length: int32(n), LowerBound: 1}}
}

// TextArray is a text[] of Text elements.
type TextArray []string

// Dimensions implements pgtype.ArrayGetter.
func (a TextArray) Dimensions() []pgtype.ArrayDimension { return dimensions(a == nil, len(a)) }

// Index implements pgtype.ArrayGetter.
func (a TextArray) Index(i int) any { return (*Text)(&a[i]) }

// IndexType implements pgtype.ArrayGetter.
func (a TextArray) IndexType() any { return (*Text)(nil) }

// NullTextArray is a text[] of NullText elements: an empty string is NULL.
type NullTextArray []string

// Dimensions implements pgtype.ArrayGetter.
func (a NullTextArray) Dimensions() []pgtype.ArrayDimension { return dimensions(a == nil, len(a)) }

// Index implements pgtype.ArrayGetter.
func (a NullTextArray) Index(i int) any { return (*NullText)(&a[i]) }

// IndexType implements pgtype.ArrayGetter.
func (a NullTextArray) IndexType() any { return (*NullText)(nil) }

// Int64Array is a bigint[].
type Int64Array []int64

// Dimensions implements pgtype.ArrayGetter.
func (a Int64Array) Dimensions() []pgtype.ArrayDimension { return dimensions(a == nil, len(a)) }

// Index implements pgtype.ArrayGetter.
func (a Int64Array) Index(i int) any { return (*Int64)(&a[i]) }

// IndexType implements pgtype.ArrayGetter.
func (a Int64Array) IndexType() any { return (*Int64)(nil) }

// BytesArray is a bytea[]: a nil element is NULL.
type BytesArray [][]byte

// Dimensions implements pgtype.ArrayGetter.
func (a BytesArray) Dimensions() []pgtype.ArrayDimension { return dimensions(a == nil, len(a)) }

// Index implements pgtype.ArrayGetter.
func (a BytesArray) Index(i int) any { return (*Bytes)(&a[i]) }

// IndexType implements pgtype.ArrayGetter.
func (a BytesArray) IndexType() any { return (*Bytes)(nil) }

// TimeArray is a timestamptz[].
type TimeArray []time.Time

// Dimensions implements pgtype.ArrayGetter.
func (a TimeArray) Dimensions() []pgtype.ArrayDimension { return dimensions(a == nil, len(a)) }

// Index implements pgtype.ArrayGetter.
func (a TimeArray) Index(i int) any { return (*Time)(&a[i]) }

// IndexType implements pgtype.ArrayGetter.
func (a TimeArray) IndexType() any { return (*Time)(nil) }
