package stockmovement

import (
	"context"
	"errors"
	"math"
	"strings"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
)

// ReceiveRequest brings a quantity of an item into a location.
type ReceiveRequest struct {
	Tenant, Item, Location string
	Quantity               decimal.Decimal // positive, at the item's scale
	Reference, Note        string
	IdempotencyKey         string // required; a retry with the same key replays
}

// IssueRequest takes a quantity of an item out of a location.
type IssueRequest struct {
	Tenant, Item, Location string
	Quantity               decimal.Decimal // positive, at the item's scale
	Reference, Note        string
	IdempotencyKey         string
}

// AdjustRequest corrects a location's balance by a signed quantity, for a
// reason (a stock count, breakage, …).
type AdjustRequest struct {
	Tenant, Item, Location string
	Quantity               decimal.Decimal // signed, non-zero, at the item's scale
	Reason                 string          // required
	Reference, Note        string
	IdempotencyKey         string
}

// TransferRequest moves a quantity of an item from one location to another: one
// entry on each location's chain, under IdempotencyKey+":out" and
// IdempotencyKey+":in", written in one transaction.
type TransferRequest struct {
	Tenant, Item    string
	From, To        string
	Quantity        decimal.Decimal // positive, at the item's scale
	Reference, Note string
	IdempotencyKey  string
}

// ReverseRequest cancels an earlier movement by appending its opposite to the same
// chain. Reversing either half of a transfer reverses the whole transfer
// (keys IdempotencyKey+":out" and ":in"). A movement is reversed at most once;
// a reversal cannot itself be reversed.
type ReverseRequest struct {
	Tenant          string
	Original        Ref // must be a movement chain of Tenant
	Reference, Note string
	IdempotencyKey  string
}

// update runs one operation in its own transaction. It first runs it in a
// read transaction, which stops at the first write: a retry is answered
// from there, as is a key conflict (keys are never removed, so a conflict
// seen in a snapshot stays one). Only a new movement takes a write
// transaction, and with it a share of a group commit and its fsync.
func update(ctx context.Context, db *chain.DB, fn func(tx *chain.Tx) (Result, error)) (Result, error) {
	var res Result
	err := db.View(ctx, func(tx *chain.Tx) error {
		var err error
		res, err = fn(tx)
		return err
	})
	if err == nil && res.Replayed {
		return res, nil
	}
	if errors.Is(err, chain.ErrIdempotencyConflict) {
		return Result{}, err
	}
	// Anything else is decided in the write transaction, refused input
	// included: stock may have arrived in between.
	err = db.Update(ctx, func(tx *chain.Tx) error {
		var err error
		res, err = fn(tx)
		return err
	})
	if err != nil {
		return Result{}, err
	}
	return res, nil
}

// Receive records a receipt in its own transaction.
func Receive(ctx context.Context, db *chain.DB, r ReceiveRequest) (Result, error) {
	return update(ctx, db, func(tx *chain.Tx) (Result, error) { return ReceiveTx(tx, r) })
}

// ReceiveTx records a receipt inside the caller's transaction.
func ReceiveTx(tx *chain.Tx, r ReceiveRequest) (Result, error) {
	return single(tx, "receive", KindReceipt, r.Tenant, r.Item, r.Location, r.Quantity, "",
		r.Reference, r.Note, r.IdempotencyKey)
}

// Issue records an issue in its own transaction.
func Issue(ctx context.Context, db *chain.DB, i IssueRequest) (Result, error) {
	return update(ctx, db, func(tx *chain.Tx) (Result, error) { return IssueTx(tx, i) })
}

// IssueTx records an issue inside the caller's transaction.
func IssueTx(tx *chain.Tx, i IssueRequest) (Result, error) {
	return single(tx, "issue", KindIssue, i.Tenant, i.Item, i.Location, i.Quantity, "",
		i.Reference, i.Note, i.IdempotencyKey)
}

// Adjust records an adjustment in its own transaction.
func Adjust(ctx context.Context, db *chain.DB, a AdjustRequest) (Result, error) {
	return update(ctx, db, func(tx *chain.Tx) (Result, error) { return AdjustTx(tx, a) })
}

// AdjustTx records an adjustment inside the caller's transaction.
func AdjustTx(tx *chain.Tx, a AdjustRequest) (Result, error) {
	if a.Reason == "" {
		return Result{}, newError("adjust", ErrMissingReason, "item %q at location %q", a.Item, a.Location)
	}
	return single(tx, "adjust", KindAdjustment, a.Tenant, a.Item, a.Location, a.Quantity, a.Reason,
		a.Reference, a.Note, a.IdempotencyKey)
}

// single checks and posts a receipt, issue or adjustment.
func single(tx *chain.Tx, op string, kind Kind, tenant, itemID, location string, quantity decimal.Decimal,
	reason, reference, note, key string) (Result, error) {
	if err := validateCommon(op, key, reference, note); err != nil {
		return Result{}, err
	}
	if err := validateText(op, "reason", reason, ReasonLengthMax); err != nil {
		return Result{}, err
	}
	chainName, err := MovementChain(tenant, itemID, location)
	if err != nil {
		return Result{}, withOp(err, op)
	}
	item, err := lookupItem(tx, op, tenant, itemID, location)
	if err != nil {
		return Result{}, err
	}
	change, err := checkQuantity(op, item, quantity, kind != KindAdjustment)
	if err != nil {
		return Result{}, err
	}
	if kind == KindIssue {
		change, _ = change.Neg() // positive and not MinInt64
	}
	l := line{location: location, chain: chainName, key: key, movement: Movement{Kind: kind, Quantity: change,
		Reference: reference, Note: note, Reason: reason}}
	return post(tx, op, tenant, item, []line{l})
}

// Transfer records a transfer in its own transaction.
func Transfer(ctx context.Context, db *chain.DB, t TransferRequest) (Result, error) {
	return update(ctx, db, func(tx *chain.Tx) (Result, error) { return TransferTx(tx, t) })
}

// TransferTx records a transfer inside the caller's transaction.
func TransferTx(tx *chain.Tx, t TransferRequest) (Result, error) {
	const op = "transfer"
	if err := validateCommon(op, t.IdempotencyKey, t.Reference, t.Note); err != nil {
		return Result{}, err
	}
	source, err := MovementChain(t.Tenant, t.Item, t.From)
	if err != nil {
		return Result{}, withOp(err, op)
	}
	target, err := MovementChain(t.Tenant, t.Item, t.To)
	if err != nil {
		return Result{}, withOp(err, op)
	}
	if t.From == t.To {
		return Result{}, newError(op, ErrSameLocation, "location %q", t.From)
	}
	item, err := lookupItem(tx, op, t.Tenant, t.Item, t.From, t.To)
	if err != nil {
		return Result{}, err
	}
	in, err := checkQuantity(op, item, t.Quantity, true)
	if err != nil {
		return Result{}, err
	}
	out, _ := in.Neg()
	lines := []line{
		{location: t.From, chain: source, key: t.IdempotencyKey + keySuffixOut, movement: Movement{
			Kind: KindTransferOut, Quantity: out, Reference: t.Reference, Note: t.Note, Counterpart: t.To}},
		{location: t.To, chain: target, key: t.IdempotencyKey + keySuffixIn, movement: Movement{
			Kind: KindTransferIn, Quantity: in, Reference: t.Reference, Note: t.Note, Counterpart: t.From}},
	}
	return post(tx, op, t.Tenant, item, lines)
}

// Reverse records a reversal in its own transaction.
func Reverse(ctx context.Context, db *chain.DB, r ReverseRequest) (Result, error) {
	return update(ctx, db, func(tx *chain.Tx) (Result, error) { return ReverseTx(tx, r) })
}

// ReverseTx records a reversal inside the caller's transaction.
func ReverseTx(tx *chain.Tx, r ReverseRequest) (Result, error) {
	const op = "reverse"
	if err := validateID(r.Tenant); err != nil {
		return Result{}, withOp(err, op)
	}
	if err := validateCommon(op, r.IdempotencyKey, r.Reference, r.Note); err != nil {
		return Result{}, err
	}
	tenant, itemID, location, ok := ParseMovementChain(r.Original.Chain)
	if !ok || r.Original.Seq == 0 {
		return Result{}, newError(op, ErrInvalidReference, "chain %q seq %d", r.Original.Chain, r.Original.Seq)
	}
	if tenant != r.Tenant {
		return Result{}, newError(op, ErrCrossTenant, "chain %q is not of tenant %q", r.Original.Chain, r.Tenant)
	}
	item, err := lookupItem(tx, op, tenant, itemID)
	if err != nil {
		return Result{}, err
	}
	original, err := readMovement(tx, op, r.Original)
	if err != nil {
		return Result{}, err
	}
	halves := []half{{location: location, entry: original}}
	if original.Kind == KindTransferOut || original.Kind == KindTransferIn {
		// Both chains are locked, in order, before the counterpart's key is
		// looked up: a look-up in a writable transaction locks its chain
		// too, and out of order it could wait on a writer that waits on us.
		otherChain, err := MovementChain(tenant, itemID, original.Counterpart)
		if err != nil {
			return Result{}, withOp(err, op)
		}
		if err := lockHeads(tx, tenant, itemID, original.Chain, otherChain); err != nil {
			return Result{}, err
		}
		other, err := counterpart(tx, tenant, itemID, location, original)
		if err != nil {
			return Result{}, err
		}
		halves = append(halves, half{location: original.Counterpart, entry: other})
		if original.Kind == KindTransferIn {
			halves[0], halves[1] = halves[1], halves[0]
		}
	}
	lines := make([]line, len(halves))
	for i, h := range halves {
		key := r.IdempotencyKey
		if len(halves) == 2 {
			key += [...]string{keySuffixOut, keySuffixIn}[i]
		}
		opposite, _ := h.entry.Quantity.Neg() // stored quantities are never MinInt64
		lines[i] = line{location: h.location, chain: h.entry.Chain, key: key, movement: Movement{
			Kind: KindReversal, Quantity: opposite, Reference: r.Reference, Note: r.Note,
			Counterpart: h.entry.Counterpart, OriginalChain: h.entry.Chain, OriginalSeq: h.entry.Seq}}
	}
	return post(tx, op, tenant, item, lines)
}

// half is one entry a reversal reverses.
type half struct {
	location string
	entry    movementAt
}

// movementAt is a decoded movement with its place in the ledger.
type movementAt struct {
	Chain string
	Seq   uint64
	Key   string
	Movement
}

// readMovement reads the entry a reversal names and checks that it can be
// reversed.
func readMovement(tx *chain.Tx, op string, ref Ref) (movementAt, error) {
	e, err := tx.Get(ref.Chain, ref.Seq)
	if errors.Is(err, chain.ErrNotFound) {
		return movementAt{}, newError(op, ErrMovementNotFound, "chain %q seq %d", ref.Chain, ref.Seq)
	}
	if err != nil {
		return movementAt{}, err
	}
	if e.Type != MovementType {
		return movementAt{}, newError(op, ErrNotReversible, "chain %q seq %d has type %q", ref.Chain, ref.Seq, e.Type)
	}
	m, err := DecodeMovement(e.Payload)
	if err != nil {
		return movementAt{}, err
	}
	if m.Kind == KindReversal {
		return movementAt{}, newError(op, ErrNotReversible, "chain %q seq %d is itself a reversal", ref.Chain, ref.Seq)
	}
	return movementAt{Chain: ref.Chain, Seq: ref.Seq, Key: e.IdempotencyKey, Movement: m}, nil
}

// counterpart finds the other half of a transfer through its key: the halves
// of transfer K are K:out at the source and K:in at the target.
func counterpart(tx *chain.Tx, tenant, item, location string, m movementAt) (movementAt, error) {
	suffix, otherSuffix, otherKind := keySuffixOut, keySuffixIn, KindTransferIn
	if m.Kind == KindTransferIn {
		suffix, otherSuffix, otherKind = keySuffixIn, keySuffixOut, KindTransferOut
	}
	incomplete := func(why string) error {
		return newError("reverse", ErrIncompleteTransfer, "chain %q seq %d: %s", m.Chain, m.Seq, why)
	}
	base, ok := strings.CutSuffix(m.Key, suffix)
	if !ok {
		return movementAt{}, incomplete("key " + m.Key + " lacks " + suffix)
	}
	otherChain, err := MovementChain(tenant, item, m.Counterpart)
	if err != nil {
		return movementAt{}, err
	}
	e, err := tx.Lookup(otherChain, base+otherSuffix)
	if errors.Is(err, chain.ErrNotFound) {
		return movementAt{}, incomplete("no entry under " + base + otherSuffix + " in " + otherChain)
	}
	if err != nil {
		return movementAt{}, err
	}
	other, err := DecodeMovement(e.Payload)
	if err != nil || e.Type != MovementType {
		return movementAt{}, incomplete("counterpart is not a movement")
	}
	opposite, _ := other.Quantity.Neg()
	if other.Kind != otherKind || other.Counterpart != location || opposite != m.Quantity {
		return movementAt{}, incomplete("counterpart does not match")
	}
	return movementAt{Chain: otherChain, Seq: e.Seq, Key: e.IdempotencyKey, Movement: other}, nil
}

// validateCommon checks the key, reference and note every movement has.
func validateCommon(op, key, reference, note string) error {
	if err := validateKey(op, key); err != nil {
		return err
	}
	if err := validateText(op, "reference", reference, ReferenceLengthMax); err != nil {
		return err
	}
	return validateText(op, "note", note, NoteLengthMax)
}

// lookupItem returns the item's definition and checks that the locations
// are defined.
func lookupItem(tx *chain.Tx, op, tenant, itemID string, locations ...string) (DefinedItem, error) {
	item, err := GetItemTx(tx, tenant, itemID)
	if err != nil {
		return DefinedItem{}, withOp(err, op)
	}
	for _, location := range locations {
		if _, err := GetLocationTx(tx, tenant, location); err != nil {
			return DefinedItem{}, withOp(err, op)
		}
	}
	return item, nil
}

// checkQuantity checks a quantity against the item's scale. positive
// requires a quantity above zero; otherwise any non-zero quantity whose
// negation exists is accepted.
func checkQuantity(op string, item DefinedItem, q decimal.Decimal, positive bool) (decimal.Decimal, error) {
	switch {
	case q.Scale() != item.Scale:
		return decimal.Decimal{}, newError(op, ErrScaleMismatch, "quantity %s has scale %d, item %q has scale %d",
			q, q.Scale(), item.ID, item.Scale)
	case q.IsZero():
		return decimal.Decimal{}, newError(op, ErrZeroQuantity, "item %q", item.ID)
	case positive && q.Sign() < 0:
		return decimal.Decimal{}, newError(op, ErrNegativeQuantity, "quantity %s", q)
	case q.Units() == math.MinInt64:
		return decimal.Decimal{}, newError(op, ErrOverflow, "quantity %s has no opposite", q)
	}
	return q, nil
}

// withOp names the operation in an error of this package.
func withOp(err error, op string) error {
	var e *Error
	if errors.As(err, &e) {
		copied := *e
		copied.Op = op
		return &copied
	}
	return err
}
