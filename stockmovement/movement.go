package stockmovement

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
)

// Ref names one entry of a chain.
type Ref struct {
	Chain string
	Seq   uint64
}

// Entry is a movement as recorded: where, when, under which key, and what.
type Entry struct {
	Tenant         string
	Item           string
	Location       string
	Chain          string
	Seq            uint64
	TimeUnixNano   int64
	IdempotencyKey string
	Movement
}

// Ref returns the chain and seq of the entry.
func (e Entry) Ref() Ref { return Ref{Chain: e.Chain, Seq: e.Seq} }

// Result is the outcome of one movement operation.
type Result struct {
	// Entries holds one entry, or two for a transfer and for the reversal
	// of a transfer: the source location's first.
	Entries []Entry
	// Replayed is set when the operation's idempotency key was already
	// used for the same request: Entries are the original ones and nothing
	// was written.
	Replayed bool
}

// errNeedsWrite stops an operation run in a read transaction once it is
// known not to be a replay (see update). It matches chain.ErrReadOnly.
var errNeedsWrite = fmt.Errorf("stockmovement: %w: the movement is not recorded yet", chain.ErrReadOnly)

// line is one entry an operation is about to write.
type line struct {
	location string
	chain    string
	key      string
	movement Movement // Balance is filled in by post
}

// post writes the lines of one operation atomically, or finds that the
// operation was recorded before. All lines are of one item. It checks, in
// order: replays and key conflicts, reversal markers, balance overflow and
// negative stock; only then does it write. Every check reads before any
// write, so a refused operation leaves the transaction untouched.
func post(tx *chain.Tx, op, tenant string, item DefinedItem, lines []line) (Result, error) {
	names := make([]string, len(lines))
	for i, l := range lines {
		names[i] = l.chain
	}
	if err := lockHeads(tx, tenant, item.ID, names...); err != nil {
		return Result{}, err
	}
	if res, replayed, err := replay(tx, tenant, item, lines); err != nil || replayed {
		return res, err
	}
	if !tx.Writable() {
		return Result{}, errNeedsWrite
	}
	scale := item.Scale
	balances := make([]balanceState, len(lines))
	changes := make([]decimal.Decimal, len(lines))
	for i, l := range lines {
		if l.movement.Kind == KindReversal {
			_, err := tx.StateGet(reversedKey(tenant, item.ID, l.location, l.movement.OriginalSeq))
			if err == nil {
				return Result{}, newError(op, ErrAlreadyReversed, "chain %q seq %d", l.chain, l.movement.OriginalSeq)
			}
			if !errors.Is(err, chain.ErrNotFound) {
				return Result{}, err
			}
		}
		current, err := readBalance(tx, tenant, item.ID, l.location)
		if err != nil {
			return Result{}, err
		}
		next, err := decimal.MustNew(current.units, scale).Add(l.movement.Quantity)
		if err != nil {
			return Result{}, newError(op, ErrOverflow, "item %q at location %q: balance %s %+d units",
				item.ID, l.location, decimal.MustNew(current.units, scale), l.movement.Quantity.Units())
		}
		if l.movement.Quantity.Sign() < 0 && next.Sign() < 0 && !item.AllowNegative {
			shortfall, err := next.Neg()
			if err != nil { // next is MinInt64: the shortfall has no int64 units
				return Result{}, newError(op, ErrOverflow, "item %q at location %q: balance %s %+d units",
					item.ID, l.location, decimal.MustNew(current.units, scale), l.movement.Quantity.Units())
			}
			return Result{}, &InsufficientStockError{Op: op, Tenant: tenant, Item: item.ID, Location: l.location,
				Balance: decimal.MustNew(current.units, scale), Change: l.movement.Quantity, Shortfall: shortfall}
		}
		balances[i] = balanceState{units: next.Units()}
		changes[i] = l.movement.Quantity
	}
	total, err := readTotal(tx, tenant, item.ID)
	if err != nil {
		return Result{}, err
	}
	net, err := decimal.Sum(scale, changes...)
	if err == nil {
		net, err = decimal.MustNew(total, scale).Add(net)
	}
	if err != nil {
		return Result{}, newError(op, ErrOverflow, "total of item %q: %s", item.ID, decimal.MustNew(total, scale))
	}
	return write(tx, tenant, item, lines, balances, net.Units())
}

// write appends the lines and updates balances, markers and the item total.
func write(tx *chain.Tx, tenant string, item DefinedItem, lines []line, balances []balanceState, total int64) (Result, error) {
	res := Result{Entries: make([]Entry, len(lines))}
	for i, l := range lines {
		l.movement.Balance = decimal.MustNew(balances[i].units, item.Scale)
		appended, err := tx.Append(chain.Request{Chain: l.chain, IdempotencyKey: l.key,
			Type: MovementType, Payload: EncodeMovement(l.movement)})
		if err != nil {
			return Result{}, err
		}
		if appended.Replayed { // replay looked the key up in this transaction
			panic(fmt.Sprintf("stockmovement: key %q of chain %q replayed after lookup", l.key, l.chain))
		}
		balances[i].seq, balances[i].timeUnixNano = appended.Entry.Seq, appended.Entry.TimeUnixNano
		if err := tx.StatePut(stateKey(tenant, stateBalance, item.ID, l.location), balances[i].encode()); err != nil {
			return Result{}, err
		}
		if l.movement.Kind == KindReversal {
			marker := reversedKey(tenant, item.ID, l.location, l.movement.OriginalSeq)
			if err := tx.StatePut(marker, binary.BigEndian.AppendUint64(nil, appended.Entry.Seq)); err != nil {
				return Result{}, err
			}
		}
		res.Entries[i] = entryOf(tenant, item.ID, l.location, appended.Entry, l.movement)
	}
	value := binary.BigEndian.AppendUint64(nil, uint64(total))
	if err := tx.StatePut(stateKey(tenant, stateTotal, item.ID), value); err != nil {
		return Result{}, err
	}
	return res, nil
}

// replay looks the lines' keys up. It reports replayed when every line's
// key holds the same request, and a *chain.ConflictError when a key holds
// another one. In a writable transaction post has locked the heads first,
// so a concurrent writer of the same key (on a shared backend) is seen, not
// raced.
func replay(tx *chain.Tx, tenant string, item DefinedItem, lines []line) (Result, bool, error) {
	res := Result{Entries: make([]Entry, len(lines)), Replayed: true}
	found := 0
	for i, l := range lines {
		existing, err := tx.Lookup(l.chain, l.key)
		if errors.Is(err, chain.ErrNotFound) {
			continue
		}
		if err != nil {
			return Result{}, false, err
		}
		// Encoded only now: most appends find no key, and encoding costs.
		request := l.movement
		request.Balance = decimal.MustNew(0, item.Scale)
		requested := requestPart(EncodeMovement(request))
		if existing.Type != MovementType || len(existing.Payload) < balanceSize ||
			!bytes.Equal(requestPart(existing.Payload), requested) {
			stored := existing.Payload
			if existing.Type == MovementType && len(stored) >= balanceSize {
				stored = requestPart(stored)
			}
			return Result{}, false, &chain.ConflictError{Chain: l.chain, IdempotencyKey: l.key,
				ExistingSeq: existing.Seq, Expected: chain.Fingerprint(existing.Type, stored),
				Calculated: chain.Fingerprint(MovementType, requested)}
		}
		m, err := DecodeMovement(existing.Payload)
		if err != nil {
			return Result{}, false, fmt.Errorf("chain %q seq %d: %w", l.chain, existing.Seq, err)
		}
		res.Entries[i] = entryOf(tenant, item.ID, l.location, existing, m)
		found++
	}
	switch found {
	case 0:
		return Result{}, false, nil
	case len(lines):
		return res, true, nil
	}
	return Result{}, false, newError("replay", ErrIncompleteTransfer,
		"only %d of %d entries under key %q exist", found, len(lines), lines[0].key)
}

func entryOf(tenant, item, location string, e chain.Entry, m Movement) Entry {
	return Entry{Tenant: tenant, Item: item, Location: location, Chain: e.Chain, Seq: e.Seq,
		TimeUnixNano: e.TimeUnixNano, IdempotencyKey: e.IdempotencyKey, Movement: m}
}

// balanceState is the stored balance of one item at one location: the
// running quantity and the seq of the entry it is the balance after.
type balanceState struct {
	units        int64
	seq          uint64
	timeUnixNano int64 // of entry seq
}

// balanceStateSize: i64 units, u64 seq, i64 time, big-endian.
const balanceStateSize = 24

func (b balanceState) encode() []byte {
	v := binary.BigEndian.AppendUint64(make([]byte, 0, balanceStateSize), uint64(b.units))
	v = binary.BigEndian.AppendUint64(v, b.seq)
	return binary.BigEndian.AppendUint64(v, uint64(b.timeUnixNano))
}

func decodeBalanceState(v []byte) (balanceState, error) {
	if len(v) != balanceStateSize {
		return balanceState{}, malformed("balance state of %d bytes", len(v))
	}
	return balanceState{units: int64(binary.BigEndian.Uint64(v)), seq: binary.BigEndian.Uint64(v[8:]),
		timeUnixNano: int64(binary.BigEndian.Uint64(v[16:]))}, nil
}

// readBalance returns the stored balance; zero at seq 0 when there is none.
func readBalance(tx *chain.Tx, tenant, item, location string) (balanceState, error) {
	v, err := tx.StateGet(stateKey(tenant, stateBalance, item, location))
	if errors.Is(err, chain.ErrNotFound) {
		return balanceState{}, nil
	}
	if err != nil {
		return balanceState{}, err
	}
	return decodeBalanceState(v)
}

// readTotal returns the stored total of an item over all locations.
func readTotal(tx *chain.Tx, tenant, item string) (int64, error) {
	v, err := tx.StateGet(stateKey(tenant, stateTotal, item))
	if errors.Is(err, chain.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, malformed("total state of %d bytes", len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// lockHeads locks, in a writable transaction, what a movement of the item
// computes from before it reads any of it: first the item's lock chain
// (ItemLockChain), which guards the item total shared by all its
// locations, then the movement chains, in ascending name order. The lock
// chain's name is a prefix of every movement chain of the item, so the
// whole sequence ascends, and no two writers can wait on each other in a
// cycle. On a shared backend (PostgreSQL) a head read in a writable
// transaction holds the head's row until the transaction ends, so the
// balances, markers and total read afterwards stay current until commit;
// bbolt has one writer at a time and needs none of it. A read transaction
// locks nothing.
func lockHeads(tx *chain.Tx, tenant, item string, chains ...string) error {
	if !tx.Writable() {
		return nil
	}
	itemLock, err := ItemLockChain(tenant, item)
	if err != nil {
		return err
	}
	names := append([]string{itemLock}, chains...)
	slices.Sort(names)
	for i, name := range names {
		if i > 0 && name == names[i-1] {
			continue
		}
		if _, err := tx.Head(name); err != nil && !errors.Is(err, chain.ErrNotFound) {
			return err
		}
	}
	return nil
}
