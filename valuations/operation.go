package valuations

import (
	"context"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
)

// ReceiveRequest brings quantity in at a unit cost or for a total value.
type ReceiveRequest struct {
	Tenant, Item, Location string
	OperationID            string
	// Quantity is positive, at the item's quantity scale.
	Quantity decimal.Decimal
	// Exactly one of UnitCost (at most minor unit + RateExtraPlaces places)
	// and Value (the total, at the minor unit) is set; neither is negative.
	UnitCost *decimal.Decimal
	Value    *decimal.Decimal
}

// IssueRequest takes quantity out; its value is computed.
type IssueRequest struct {
	Tenant, Item, Location string
	OperationID            string
	Quantity               decimal.Decimal
	// EstimateRate values the part beyond the stock when the item allows
	// negative stock; the location's last known rate when nil.
	EstimateRate *decimal.Decimal
}

// AdjustRequest changes value without quantity: Amount is added to the
// stock value (landed cost, a correction; may be negative), or the stock is
// revalued at UnitCost. Exactly one is set.
type AdjustRequest struct {
	Tenant, Item, Location string
	OperationID            string
	Amount                 *decimal.Decimal
	UnitCost               *decimal.Decimal
}

// TransferRequest moves quantity between two locations of an item at the
// source's valuation: the source is valued like an issue, and the
// destination receives exactly the value the source gave up.
type TransferRequest struct {
	Tenant, Item string
	From, To     string
	OperationID  string
	Quantity     decimal.Decimal
	EstimateRate *decimal.Decimal
}

// ReverseRequest undoes an earlier operation of the location (for a
// transfer: its source location) by appending its opposite.
type ReverseRequest struct {
	Tenant, Item, Location string
	OperationID            string
	Reverses               string
}

// Result is the outcome of an operation.
type Result struct {
	OperationID string
	// Replayed is set when every entry of the operation already existed:
	// nothing was written and the original entries are returned.
	Replayed bool
	// Legs holds one leg per location: one, or two for a transfer and its
	// reversal (the location goods leave first).
	Legs []Leg
}

// ValueChange is the first leg's value change: what an issue cost or a
// receipt added.
func (r Result) ValueChange() decimal.Decimal { return r.Legs[0].ValueChange }

// Leg is what an operation did at one location.
type Leg struct {
	Location       string
	QuantityEntry  chain.Entry
	ValueEntry     chain.Entry
	QuantityChange decimal.Decimal
	ValueChange    decimal.Decimal
	// The position after the operation.
	Quantity  decimal.Decimal
	Value     decimal.Decimal
	Rate      decimal.Decimal
	RateKnown bool
	// Settlements lists the earlier negative-stock issues this inflow
	// settled.
	Settlements []Settlement
}

// Settlement is the correction of one issue's estimate by a later receipt.
type Settlement struct {
	OperationID string
	Quantity    decimal.Decimal
	// Estimated is what the issue carried for Quantity, Actual what it
	// costs at the receipt's value; Correction = Actual − Estimated is the
	// extra cost of that issue (negative: it was overvalued).
	Estimated  decimal.Decimal
	Actual     decimal.Decimal
	Correction decimal.Decimal
}

// Receive records a receipt in its own transaction.
func Receive(ctx context.Context, db *chain.DB, r ReceiveRequest) (Result, error) {
	return run(ctx, db, r.Tenant, r.Item, r.build)
}

// ReceiveTx records a receipt in the caller's transaction.
func ReceiveTx(tx *chain.Tx, r ReceiveRequest) (Result, error) {
	return runTx(tx, r.Tenant, r.Item, r.build)
}

// Issue records an issue in its own transaction.
func Issue(ctx context.Context, db *chain.DB, r IssueRequest) (Result, error) {
	return run(ctx, db, r.Tenant, r.Item, r.build)
}

// IssueTx records an issue in the caller's transaction.
func IssueTx(tx *chain.Tx, r IssueRequest) (Result, error) {
	return runTx(tx, r.Tenant, r.Item, r.build)
}

// Adjust records a value-only adjustment in its own transaction.
func Adjust(ctx context.Context, db *chain.DB, r AdjustRequest) (Result, error) {
	return run(ctx, db, r.Tenant, r.Item, r.build)
}

// AdjustTx records a value-only adjustment in the caller's transaction.
func AdjustTx(tx *chain.Tx, r AdjustRequest) (Result, error) {
	return runTx(tx, r.Tenant, r.Item, r.build)
}

// Transfer records a transfer in its own transaction.
func Transfer(ctx context.Context, db *chain.DB, r TransferRequest) (Result, error) {
	return run(ctx, db, r.Tenant, r.Item, r.build)
}

// TransferTx records a transfer in the caller's transaction.
func TransferTx(tx *chain.Tx, r TransferRequest) (Result, error) {
	return runTx(tx, r.Tenant, r.Item, r.build)
}

// Reverse records a reversal in its own transaction.
func Reverse(ctx context.Context, db *chain.DB, r ReverseRequest) (Result, error) {
	return run(ctx, db, r.Tenant, r.Item, r.build)
}

// ReverseTx records a reversal in the caller's transaction.
func ReverseTx(tx *chain.Tx, r ReverseRequest) (Result, error) {
	return runTx(tx, r.Tenant, r.Item, r.build)
}

// quantityText formats a quantity that must have the item's scale.
func quantityText(it Item, d decimal.Decimal) (string, error) {
	if d.Scale() != it.QuantityScale {
		return "", invalid(ErrScale, "quantity %s has %d places, item %q declares %d", d, d.Scale(), it.ID, it.QuantityScale)
	}
	if d.Sign() <= 0 {
		return "", invalid(ErrZeroQuantity, "quantity %s", d)
	}
	return d.String(), nil
}

// moneyText formats an amount that must be at the minor unit.
func moneyText(it Item, field string, d *decimal.Decimal) (string, error) {
	if d == nil {
		return "", nil
	}
	if d.Scale() != it.MinorUnit {
		return "", invalid(ErrScale, "%s %s has %d places, %s has %d", field, d, d.Scale(), it.Currency, it.MinorUnit)
	}
	return d.String(), nil
}

// rateText formats a rate at the rate scale; fewer places are exact.
func rateText(it Item, field string, d *decimal.Decimal) (string, error) {
	if d == nil {
		return "", nil
	}
	scale := it.scales().rate()
	if d.Scale() > scale {
		return "", invalid(ErrScale, "%s %s has %d places, at most %d", field, d, d.Scale(), scale)
	}
	if d.Sign() < 0 {
		return "", invalid(ErrNegativeAmount, "%s %s", field, d)
	}
	r, err := d.Rescale(scale, decimal.HalfEven)
	if err != nil {
		return "", overflow(field + " " + d.String())
	}
	return r.String(), nil
}

func (r ReceiveRequest) build(it Item) (request, error) {
	q := request{Kind: kindReceipt, Tenant: r.Tenant, Item: r.Item, Location: r.Location, Operation: r.OperationID}
	var err error
	if q.Quantity, err = quantityText(it, r.Quantity); err != nil {
		return q, err
	}
	if q.UnitCost, err = rateText(it, "unit cost", r.UnitCost); err != nil {
		return q, err
	}
	if r.Value != nil && r.Value.Sign() < 0 {
		return q, invalid(ErrNegativeAmount, "value %s", r.Value)
	}
	q.Value, err = moneyText(it, "value", r.Value)
	return q, err
}

func (r IssueRequest) build(it Item) (request, error) {
	q := request{Kind: kindIssue, Tenant: r.Tenant, Item: r.Item, Location: r.Location, Operation: r.OperationID}
	var err error
	if q.Quantity, err = quantityText(it, r.Quantity); err != nil {
		return q, err
	}
	q.UnitCost, err = rateText(it, "estimate rate", r.EstimateRate)
	return q, err
}

func (r AdjustRequest) build(it Item) (request, error) {
	q := request{Kind: kindAdjustment, Tenant: r.Tenant, Item: r.Item, Location: r.Location, Operation: r.OperationID}
	var err error
	if q.UnitCost, err = rateText(it, "unit cost", r.UnitCost); err != nil {
		return q, err
	}
	q.Value, err = moneyText(it, "amount", r.Amount)
	return q, err
}

func (r TransferRequest) build(it Item) (request, error) {
	q := request{Kind: kindTransfer, Tenant: r.Tenant, Item: r.Item, Location: r.From, ToLocation: r.To, Operation: r.OperationID}
	var err error
	if q.Quantity, err = quantityText(it, r.Quantity); err != nil {
		return q, err
	}
	q.UnitCost, err = rateText(it, "estimate rate", r.EstimateRate)
	return q, err
}

func (r ReverseRequest) build(Item) (request, error) {
	return request{Kind: kindReversal, Tenant: r.Tenant, Item: r.Item, Location: r.Location,
		Operation: r.OperationID, Reverses: r.Reverses}, nil
}

// run answers a replay from a read transaction and otherwise executes the
// operation in a write transaction.
func run(ctx context.Context, db *chain.DB, tenant, item string, build func(Item) (request, error)) (Result, error) {
	var res Result
	var done bool
	err := db.View(ctx, func(tx *chain.Tx) error {
		it, r, err := prepare(tx, tenant, item, build)
		if err != nil {
			return err
		}
		res, done, err = replay(tx, it, r)
		return err
	})
	if err != nil || done {
		return res, err
	}
	err = db.Update(ctx, func(tx *chain.Tx) error {
		it, r, err := prepare(tx, tenant, item, build)
		if err != nil {
			return err
		}
		res, err = execute(tx, it, r, 0)
		return err
	})
	return res, err
}

func runTx(tx *chain.Tx, tenant, item string, build func(Item) (request, error)) (Result, error) {
	it, r, err := prepare(tx, tenant, item, build)
	if err != nil {
		return Result{}, err
	}
	return execute(tx, it, r, 0)
}

// prepare loads the item and builds and checks the canonical request.
func prepare(tx *chain.Tx, tenant, item string, build func(Item) (request, error)) (Item, parsedRequest, error) {
	name, err := ItemChain(tenant, item)
	if err != nil {
		return Item{}, parsedRequest{}, invalid(ErrInvalidOperation, "%v", err)
	}
	// The item's chain is locked before its definition is read, as
	// DefineItem does: a change of method (allowed at zero stock) and an
	// operation of another process on the item are serialized. Its name is
	// a prefix of the location chains locked later, so the order ascends.
	if tx.Writable() {
		if _, err := headSeq(tx, name); err != nil {
			return Item{}, parsedRequest{}, err
		}
	}
	it, _, err := loadItem(tx, tenant, item)
	if err != nil {
		return Item{}, parsedRequest{}, err
	}
	r, err := build(it)
	if err != nil {
		return Item{}, parsedRequest{}, err
	}
	p, err := parseRequest(r, it.scales(), true)
	return it, p, err
}
