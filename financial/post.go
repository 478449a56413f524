package financial

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
)

// PostingResult is a posting as the journal holds it.
type PostingResult struct {
	Seq          uint64     `json:"seq"`
	TimeUnixNano int64      `json:"time_unix_nano"`
	Hash         chain.Hash `json:"-"`
	Posting      Posting    `json:"posting"`
	// Replayed is set when the posting already existed (a retry).
	Replayed bool `json:"replayed"`
}

// Post records a posting in its own transaction; see PostTx.
func (b *Book) Post(ctx context.Context, p Posting) (PostingResult, error) {
	return update(ctx, b, func(tx *chain.Tx) (PostingResult, error) { return b.PostTx(tx, p) })
}

// PostTx appends a posting to the book's journal and updates the balances
// of its accounts in tx, so a caller can record it atomically with entries
// of other chains.
//
// The posting needs a key, a date within DateMin..DateMax, LinesMin to
// LinesMax lines with positive amounts at their currency's exponent,
// debits equal to credits in every currency, and defined, open accounts
// and defined currencies of this book. A posting whose key the journal
// already holds is returned unchanged with Replayed set if it is the same
// posting, and refused with a *chain.ConflictError otherwise; the rules are
// not checked again for a replay. Every refusal writes nothing.
func (b *Book) PostTx(tx *chain.Tx, p Posting) (PostingResult, error) {
	if p.Reverses != 0 {
		return PostingResult{}, invalid(ErrInvalidPosting, "reverses is set only by Reverse")
	}
	if err := p.validateShape(true); err != nil {
		return PostingResult{}, err
	}
	res, err := b.write(tx, keyPosting+p.Key, &p)
	var conflict *chain.ConflictError
	if errors.As(err, &conflict) {
		return PostingResult{}, fmt.Errorf("financial: posting key %q is held by seq %d with another posting: %w",
			p.Key, conflict.ExistingSeq, err)
	}
	return res, err
}

// Reversal asks for the reversal of a posting, named by its journal seq or
// its key (exactly one of the two).
type Reversal struct {
	Seq  uint64
	Key  string
	Date Date // effective date of the reversal
	Memo string
}

// Reverse reverses a posting in its own transaction; see ReverseTx.
func (b *Book) Reverse(ctx context.Context, r Reversal) (PostingResult, error) {
	return update(ctx, b, func(tx *chain.Tx) (PostingResult, error) { return b.ReverseTx(tx, r) })
}

// ReverseTx appends the opposite of a posting: the same lines with the
// sides swapped, the original's reference, r's date and memo, and Reverses
// set to the original's seq. A posting is reversed at most once: its
// reversal is stored under the key reversal:<seq>, so asking again with the
// same date and memo returns the reversal (Replayed) and asking with others
// is a *chain.ConflictError. A reversal cannot itself be reversed
// (ErrNotReversible), and its accounts must still be open.
func (b *Book) ReverseTx(tx *chain.Tx, r Reversal) (PostingResult, error) {
	if (r.Seq == 0) == (r.Key == "") {
		return PostingResult{}, invalid(ErrInvalidPosting, "name the posting to reverse by seq or by key, not both or neither")
	}
	original, err := b.findPosting(tx, r.Seq, r.Key)
	if err != nil {
		return PostingResult{}, err
	}
	if original.Posting.Reverses != 0 {
		return PostingResult{}, invalid(ErrNotReversible, "seq %d is the reversal of seq %d", original.Seq, original.Posting.Reverses)
	}
	p := Posting{Date: r.Date, Memo: r.Memo, Reference: original.Posting.Reference,
		Lines: original.Posting.reversedLines(), Reverses: original.Seq}
	if err := p.validateShape(false); err != nil {
		return PostingResult{}, err
	}
	res, err := b.write(tx, keyReversal+strconv.FormatUint(original.Seq, 10), &p)
	var conflict *chain.ConflictError
	if errors.As(err, &conflict) {
		return PostingResult{}, fmt.Errorf("financial: seq %d is already reversed by seq %d with another date or memo: %w",
			original.Seq, conflict.ExistingSeq, err)
	}
	return res, err
}

// write appends a validated posting under the journal key and updates the
// balances, or replays the posting the key already holds.
func (b *Book) write(tx *chain.Tx, key string, p *Posting) (PostingResult, error) {
	payload := EncodePosting(p)
	e, found, err := b.lookupReplay(tx, key, TypePosting, payload)
	if err != nil {
		return PostingResult{}, err
	}
	if found {
		return postingResult(&e, true)
	}
	changes, err := b.plan(tx, p)
	if err != nil {
		return PostingResult{}, err
	}
	e, err = b.appendEntry(tx, key, TypePosting, payload)
	if err != nil {
		return PostingResult{}, err
	}
	if err := b.apply(tx, changes, e.Seq, p.Date); err != nil {
		return PostingResult{}, err
	}
	return PostingResult{Seq: e.Seq, TimeUnixNano: e.TimeUnixNano, Hash: e.Hash, Posting: *p}, nil
}

// change is a posting's net effect on one account in one currency.
type change struct {
	account, currency string
	delta             int64
	before            balanceState
}

// plan checks a posting against the book (accounts defined and open,
// currencies defined, exponents, balances in range) and returns its net
// effect per account and currency, reading only.
func (b *Book) plan(tx *chain.Tx, p *Posting) ([]change, error) {
	var changes []change
	exponents := map[string]uint8{}
	for i, l := range p.Lines {
		if err := b.checkLine(tx, i+1, &l, exponents); err != nil {
			return nil, err
		}
		c := findChange(changes, l.Account, l.Currency)
		if c == nil {
			changes = append(changes, change{account: l.Account, currency: l.Currency})
			c = &changes[len(changes)-1]
		}
		delta, ok := addInt64(c.delta, l.signedAmount())
		if !ok {
			return nil, &Error{Err: ErrOverflow, Class: chain.ErrInvalid, Line: i + 1, Cause: decimal.ErrOverflow,
				Detail: fmt.Sprintf("the lines on account %s in %s exceed the range of minor units", l.Account, l.Currency)}
		}
		c.delta = delta
	}
	for i := range changes {
		c := &changes[i]
		before, err := b.readBalance(tx, c.account, c.currency)
		if err != nil {
			return nil, err
		}
		if _, ok := addInt64(before.balance, c.delta); !ok {
			return nil, &Error{Err: ErrOverflow, Class: chain.ErrInvalid, Cause: decimal.ErrOverflow,
				Detail: fmt.Sprintf("account %s balance %d + %d minor units of %s leaves the range of minor units",
					c.account, before.balance, c.delta, c.currency)}
		}
		c.before = before
	}
	return changes, nil
}

// checkLine checks a line's account and currency against the book.
// exponents caches the currencies (and accounts, as present keys) already
// read for this posting.
func (b *Book) checkLine(tx *chain.Tx, number int, l *Line, exponents map[string]uint8) error {
	if _, ok := exponents["account:"+l.Account]; !ok {
		a, err := b.AccountTx(tx, l.Account)
		if errors.Is(err, ErrAccountNotFound) {
			return lineInvalid(number, ErrAccountNotFound, "account %s is not defined in book %s/%s", l.Account, b.tenant, b.name)
		}
		if err != nil {
			return err
		}
		if a.Closed {
			return lineInvalid(number, ErrAccountClosed, "account %s was closed at seq %d", a.Code, a.ClosedSeq)
		}
		exponents["account:"+l.Account] = 0
	}
	exponent, ok := exponents[l.Currency]
	if !ok {
		c, err := b.CurrencyTx(tx, l.Currency)
		if errors.Is(err, ErrCurrencyNotFound) {
			return lineInvalid(number, ErrCurrencyNotFound, "currency %s is not defined in book %s/%s", l.Currency, b.tenant, b.name)
		}
		if err != nil {
			return err
		}
		exponent = c.Exponent
		exponents[l.Currency] = exponent
	}
	if l.Amount.Scale() != exponent {
		return lineInvalid(number, ErrExponent, "amount %s has %d decimals, %s has exponent %d",
			l.Amount, l.Amount.Scale(), l.Currency, exponent)
	}
	return nil
}

func findChange(changes []change, account, currency string) *change {
	for i := range changes {
		if changes[i].account == account && changes[i].currency == currency {
			return &changes[i]
		}
	}
	return nil
}

// apply writes the derived state of a posting appended at seq.
func (b *Book) apply(tx *chain.Tx, changes []change, seq uint64, date Date) error {
	for _, c := range changes {
		after := balanceState{balance: c.before.balance + c.delta, postings: c.before.postings + 1, lastSeq: seq}
		if err := tx.StatePut(b.balanceKey(c.account, c.currency), after.encode()); err != nil {
			return err
		}
		if err := tx.StatePut(b.seqKey(c.account, c.currency, seq), encodeSeqValue(after)); err != nil {
			return err
		}
		delta := binary.BigEndian.AppendUint64(nil, uint64(c.delta))
		if err := tx.StatePut(b.dayKey(c.account, c.currency, date, seq), delta); err != nil {
			return err
		}
		if err := b.addToTree(tx, c.account, c.currency, date, c.delta); err != nil {
			return err
		}
	}
	return nil
}

// Posting returns the posting at a journal seq; see PostingTx.
func (b *Book) Posting(ctx context.Context, seq uint64) (PostingResult, error) {
	return view(ctx, b, func(tx *chain.Tx) (PostingResult, error) { return b.findPosting(tx, seq, "") })
}

// PostingTx returns the posting at a journal seq; an error matching
// ErrPostingNotFound and chain.ErrNotFound when there is none, or when the
// entry there defines an account or a currency.
func (b *Book) PostingTx(tx *chain.Tx, seq uint64) (PostingResult, error) {
	return b.findPosting(tx, seq, "")
}

// PostingByKey returns the posting recorded under an idempotency key.
func (b *Book) PostingByKey(ctx context.Context, key string) (PostingResult, error) {
	return view(ctx, b, func(tx *chain.Tx) (PostingResult, error) { return b.findPosting(tx, 0, key) })
}

// PostingByKeyTx returns the posting recorded under an idempotency key.
func (b *Book) PostingByKeyTx(tx *chain.Tx, key string) (PostingResult, error) {
	return b.findPosting(tx, 0, key)
}

func (b *Book) findPosting(tx *chain.Tx, seq uint64, key string) (PostingResult, error) {
	var e chain.Entry
	var err error
	if key != "" {
		if err := validateText(ErrInvalidPosting, "idempotency key", key, 1, PostingKeyLengthMax); err != nil {
			return PostingResult{}, err
		}
		e, err = tx.Lookup(b.journal, keyPosting+key)
	} else {
		e, err = tx.Get(b.journal, seq)
	}
	if errors.Is(err, chain.ErrNotFound) {
		return PostingResult{}, b.postingNotFound(seq, key)
	}
	if err != nil {
		return PostingResult{}, err
	}
	if e.Type != TypePosting {
		return PostingResult{}, b.postingNotFound(seq, key)
	}
	return postingResult(&e, false)
}

func (b *Book) postingNotFound(seq uint64, key string) error {
	if key != "" {
		return notFound(ErrPostingNotFound, "book %s/%s has no posting with key %q", b.tenant, b.name, key)
	}
	return notFound(ErrPostingNotFound, "book %s/%s has no posting at seq %d", b.tenant, b.name, seq)
}

func postingResult(e *chain.Entry, replayed bool) (PostingResult, error) {
	p, err := DecodePosting(e.Payload)
	if err != nil {
		return PostingResult{}, err
	}
	p.Key, _ = strings.CutPrefix(e.IdempotencyKey, keyPosting)
	if p.Reverses != 0 {
		p.Key = ""
	}
	return PostingResult{Seq: e.Seq, TimeUnixNano: e.TimeUnixNano, Hash: e.Hash, Posting: p, Replayed: replayed}, nil
}
