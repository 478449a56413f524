package valuations

import "github.com/ledgerworks/ledger/chain"

// Limits, checked on entry.
const (
	// RateExtraPlaces is how many decimal places a rate keeps beyond the
	// currency's minor unit. A moving-average rate is rounded half to even
	// at this precision on every receipt, never at the minor unit.
	RateExtraPlaces = 9

	// QuantityScaleMax is the largest quantity scale an item may declare.
	// Stock value is round(Q·rate) computed as MulDiv(Q, rate,
	// 10^(quantityScale+RateExtraPlaces)), and that divisor must fit in an
	// int64.
	QuantityScaleMax = 9

	// MinorUnitMax is the largest currency exponent (digits after the
	// decimal point of the minor unit). A rate then has at most
	// MinorUnitMax+RateExtraPlaces = 15 places.
	MinorUnitMax = 6

	// OperationIDLengthMax bounds an operation id, in bytes. With the
	// ":value" suffix the key stays far below chain.IdempotencyKeyLengthMax.
	OperationIDLengthMax = 128

	// CurrencyLength is the length of an ISO 4217 code such as "EUR".
	CurrencyLength = 3

	// PendingIssuesMax bounds the issues awaiting settlement at one
	// location (negative stock); each is kept in the location's state record.
	PendingIssuesMax = 256

	// completionDepthMax bounds how many half-written operations one call
	// completes, nested, before it gives up with ErrIncomplete.
	completionDepthMax = 4

	// completionCountMax bounds how many half-written operations one
	// location may ask to complete within one call.
	completionCountMax = 16
)

// Payload types written by this package.
const (
	TypeItem     = "val.item/v1"
	TypeQuantity = "val.qty/v1"
	TypeValue    = "val.value/v1"
)

// Domain is the second component of every chain id of this package.
const Domain = "val"

// Key suffixes of the two entries of an operation.
const (
	QuantityKeySuffix = ":qty"
	ValueKeySuffix    = ":value"
)

// ItemChain returns the chain holding the item's definitions.
func ItemChain(tenant, item string) (string, error) {
	return chain.ScopedName(tenant, Domain, item)
}

// QuantityChain returns the chain of the item's quantity entries at a location.
func QuantityChain(tenant, item, location string) (string, error) {
	return chain.ScopedName(tenant, Domain, item, location, "qty")
}

// ValueChain returns the chain of the item's value entries at a location.
func ValueChain(tenant, item, location string) (string, error) {
	return chain.ScopedName(tenant, Domain, item, location, "value")
}

// QuantityKey is the idempotency key of an operation's quantity entry.
func QuantityKey(operationID string) string { return operationID + QuantityKeySuffix }

// ValueKey is the idempotency key of an operation's value entry.
func ValueKey(operationID string) string { return operationID + ValueKeySuffix }
