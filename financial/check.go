package financial

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ledgerworks/ledger/chain"
)

// Check rebuilds the derived state of every book of every tenant from its
// journal and compares it with the stored state. It returns one
// chain.Failure with Reason chain.ReasonStateMismatch for each difference
// (at most FailuresMax), for each journal entry that breaks a rule the
// package enforces on writing, and for state of a book that has no journal.
// The error is for operating failures only.
//
// Each book is checked in one read transaction, streaming its journal with
// memory for its accounts, currencies and balances only; every index entry
// is compared as the journal or the state scan passes it.
func Check(ctx context.Context, db *chain.DB) ([]chain.Failure, error) {
	var failures []chain.Failure
	add := func(f chain.Failure) {
		if len(failures) < FailuresMax {
			failures = append(failures, f)
		}
	}
	books := map[string]bool{} // fin/tenant/book/ prefixes with a journal
	for h, err := range db.Chains(ctx, "") {
		if err != nil {
			return failures, err
		}
		parts := chain.SplitScopedName(h.Chain)
		if len(parts) != 4 || parts[1] != Domain || parts[3] != journalName {
			continue
		}
		b, err := NewBook(db, parts[0], parts[2])
		if err != nil {
			continue // not a name this package writes
		}
		books[b.prefix] = true
		if err := db.View(ctx, func(tx *chain.Tx) error { return newChecker(b, tx, add).run() }); err != nil {
			return failures, err
		}
	}
	if err := checkOrphans(ctx, db, books, add, nil); err != nil {
		return failures, err
	}
	return failures, nil
}

// Check rebuilds this book alone from its journal and compares it with the
// stored state, as the package's Check does for every book.
func (b *Book) Check(ctx context.Context) ([]chain.Failure, error) {
	var failures []chain.Failure
	add := func(f chain.Failure) {
		if len(failures) < FailuresMax {
			failures = append(failures, f)
		}
	}
	err := b.db.View(ctx, func(tx *chain.Tx) error { return newChecker(b, tx, add).run() })
	return failures, err
}

// checkOrphans reports state under fin/ of books without a journal. It
// visits one key per book and skips the rest of the book's keys. With r set
// it is Rebuild's: the stray state it finds is deleted, each book's or key's
// in a write transaction of its own.
func checkOrphans(ctx context.Context, db *chain.DB, books map[string]bool, add func(chain.Failure), r *rebuilder) error {
	start, end := []byte(Domain+"/"), prefixEnd([]byte(Domain+"/"))
	for start != nil {
		var next, stray []byte
		var book string
		err := db.View(ctx, func(tx *chain.Tx) error {
			next, stray = nil, nil
			for kv, err := range tx.StateScan(start, end, false) {
				if err != nil {
					return err
				}
				if book = bookPrefixOf(kv.Key); book == "" {
					stray, next = bytes.Clone(kv.Key), prefixEnd(kv.Key)
				} else {
					next = prefixEnd([]byte(book))
				}
				break
			}
			return nil
		})
		switch {
		case err != nil:
			return err
		case next == nil || book != "" && books[book]:
		case r != nil:
			err = r.unit(ctx, db, func(tx *chain.Tx) error { return r.deleteStray(tx, stray, book) })
		case book == "":
			add(chain.Failure{Reason: chain.ReasonStateMismatch, Detail: fmt.Sprintf("state key %q belongs to no book", stray)})
		default:
			add(chain.Failure{Chain: journalOf(book), Reason: chain.ReasonStateMismatch, Detail: "derived state of a book that has no journal"})
		}
		if err != nil {
			return err
		}
		start = next
	}
	return nil
}

// journalOf names the journal of a fin/tenant/book/ state prefix.
func journalOf(book string) string {
	parts := strings.Split(book, "/")
	return strings.Join([]string{parts[1], Domain, parts[2], journalName}, chain.NameSeparator)
}

// bookPrefixOf returns the fin/tenant/book/ prefix of a state key, or "".
func bookPrefixOf(key []byte) string {
	parts := bytes.SplitN(key, []byte("/"), 4)
	if len(parts) != 4 || len(parts[1]) == 0 || len(parts[2]) == 0 {
		return ""
	}
	return string(parts[0]) + "/" + string(parts[1]) + "/" + string(parts[2]) + "/"
}

// checker rebuilds one book.
type checker struct {
	b          *Book
	tx         *chain.Tx
	add        func(chain.Failure)
	accounts   map[string]*Account
	currencies map[string]*Currency
	pairs      map[string]*pairCheck // by account/currency
	seen       map[string]bool       // account and currency state keys found
	// rebuild is set when the checker is Rebuild (rebuild.go): the state
	// the journal implies is written instead of compared.
	rebuild *rebuilder
}

// pairCheck is the rebuilt state of one account in one currency and what
// the state scan found for it.
type pairCheck struct {
	state                  balanceState
	balanceFound           bool
	seqKeys, dayKeys, sums uint64 // index entries found
	sumsExpected           uint64 // tree nodes the day index implies
}

func newChecker(b *Book, tx *chain.Tx, add func(chain.Failure)) *checker {
	return &checker{b: b, tx: tx, add: add, accounts: map[string]*Account{}, currencies: map[string]*Currency{},
		pairs: map[string]*pairCheck{}, seen: map[string]bool{}}
}

func (c *checker) fail(seq uint64, format string, args ...any) {
	c.add(chain.Failure{Chain: c.b.journal, Seq: seq, Reason: chain.ReasonStateMismatch, Detail: fmt.Sprintf(format, args...)})
}

func (c *checker) run() error {
	if err := c.replay(); err != nil {
		return err
	}
	return c.scanState()
}

// replay replays the journal: definitions, rules, balances, and the seq and
// day index entries of every posting.
func (c *checker) replay() error {
	for e, err := range c.tx.Entries(c.b.journal, 1) {
		if err != nil {
			return err
		}
		if c.rebuild != nil {
			c.rebuild.stats.Entries++
		}
		if err := c.entry(&e); err != nil {
			return err
		}
	}
	return nil
}

// entry replays one journal entry.
func (c *checker) entry(e *chain.Entry) error {
	switch e.Type {
	case TypeAccount:
		a, err := DecodeAccount(e.Payload)
		if err != nil {
			c.fail(e.Seq, "%v", err)
			return nil
		}
		c.expectKey(e, keyAccount+a.Code)
		if c.accounts[a.Code] != nil {
			c.fail(e.Seq, "account %s defined again", a.Code)
			return nil
		}
		a.DefinedSeq = e.Seq
		c.accounts[a.Code] = &a
	case TypeAccountClose:
		code, err := DecodeAccountClose(e.Payload)
		if err != nil {
			c.fail(e.Seq, "%v", err)
			return nil
		}
		c.expectKey(e, keyAccountClose+code)
		a := c.accounts[code]
		if a == nil || a.Closed {
			c.fail(e.Seq, "closing account %s, which is not defined or already closed", code)
			return nil
		}
		a.Closed, a.ClosedSeq = true, e.Seq
	case TypeCurrency:
		cur, err := DecodeCurrency(e.Payload)
		if err != nil {
			c.fail(e.Seq, "%v", err)
			return nil
		}
		c.expectKey(e, keyCurrency+cur.Code)
		if c.currencies[cur.Code] != nil {
			c.fail(e.Seq, "currency %s defined again", cur.Code)
			return nil
		}
		cur.DefinedSeq = e.Seq
		c.currencies[cur.Code] = &cur
	case TypePosting:
		return c.posting(e)
	default:
		c.fail(e.Seq, "entry type %q is not a financial entry", e.Type)
	}
	return nil
}

func (c *checker) expectKey(e *chain.Entry, key string) {
	if e.IdempotencyKey != key {
		c.fail(e.Seq, "idempotency key %q, want %q", e.IdempotencyKey, key)
	}
}

// posting checks a posting's rules as they stood at its seq, adds it to the
// rebuilt balances and compares its index entries.
func (c *checker) posting(e *chain.Entry) error {
	p, err := DecodePosting(e.Payload)
	if err != nil {
		c.fail(e.Seq, "%v", err)
		return nil
	}
	if p.Reverses == 0 {
		if key, ok := strings.CutPrefix(e.IdempotencyKey, keyPosting); !ok || key == "" {
			c.fail(e.Seq, "posting key %q lacks the %q prefix", e.IdempotencyKey, keyPosting)
		}
	} else if err := c.reversal(e, &p); err != nil {
		return err
	}
	var changes []change
	for i, l := range p.Lines {
		c.checkLine(e.Seq, i+1, &l)
		ch := findChange(changes, l.Account, l.Currency)
		if ch == nil {
			changes = append(changes, change{account: l.Account, currency: l.Currency})
			ch = &changes[len(changes)-1]
		}
		ch.delta += l.signedAmount() // bounded: checked when written; overflow shows as a balance mismatch
	}
	for _, ch := range changes {
		pair := c.pair(ch.account, ch.currency)
		balance, ok := addInt64(pair.state.balance, ch.delta)
		if !ok {
			c.fail(e.Seq, "balance of %s in %s leaves the range of minor units", ch.account, ch.currency)
		}
		pair.state = balanceState{balance: balance, postings: pair.state.postings + 1, lastSeq: e.Seq}
		if err := c.expectState(e.Seq, c.b.seqKey(ch.account, ch.currency, e.Seq), encodeSeqValue(pair.state)); err != nil {
			return err
		}
		delta := binary.BigEndian.AppendUint64(nil, uint64(ch.delta))
		if err := c.expectState(e.Seq, c.b.dayKey(ch.account, ch.currency, p.Date, e.Seq), delta); err != nil {
			return err
		}
	}
	return nil
}

func (c *checker) checkLine(seq uint64, number int, l *Line) {
	a := c.accounts[l.Account]
	switch {
	case a == nil:
		c.fail(seq, "line %d: account %s is not defined", number, l.Account)
	case a.Closed:
		c.fail(seq, "line %d: account %s was closed at seq %d", number, l.Account, a.ClosedSeq)
	}
	cur := c.currencies[l.Currency]
	switch {
	case cur == nil:
		c.fail(seq, "line %d: currency %s is not defined", number, l.Currency)
	case cur.Exponent != l.Amount.Scale():
		c.fail(seq, "line %d: amount %s at scale %d, %s has exponent %d", number, l.Amount, l.Amount.Scale(), cur.Code, cur.Exponent)
	}
}

// reversal checks that a reversal mirrors an earlier, unreversed posting.
func (c *checker) reversal(e *chain.Entry, p *Posting) error {
	c.expectKey(e, keyReversal+strconv.FormatUint(p.Reverses, 10))
	if p.Reverses >= e.Seq {
		c.fail(e.Seq, "reverses seq %d, which is not earlier", p.Reverses)
		return nil
	}
	original, err := c.tx.Get(c.b.journal, p.Reverses)
	if errors.Is(err, chain.ErrNotFound) || errors.Is(err, chain.ErrCorrupt) {
		c.fail(e.Seq, "reverses seq %d, which cannot be read: %v", p.Reverses, err)
		return nil
	}
	if err != nil {
		return err
	}
	o, err := DecodePosting(original.Payload)
	if original.Type != TypePosting || err != nil || o.Reverses != 0 {
		c.fail(e.Seq, "reverses seq %d, which is not a reversible posting", p.Reverses)
		return nil
	}
	if o.Reference != p.Reference || !slices.Equal(o.reversedLines(), p.Lines) {
		c.fail(e.Seq, "the lines or reference differ from the opposite of seq %d", p.Reverses)
	}
	return nil
}

func (c *checker) pair(account, currency string) *pairCheck {
	k := account + "/" + currency
	p := c.pairs[k]
	if p == nil {
		p = &pairCheck{}
		c.pairs[k] = p
	}
	return p
}

// expectState compares one stored value with the rebuilt one; Rebuild
// writes the rebuilt one.
func (c *checker) expectState(seq uint64, key, want []byte) error {
	if c.rebuild != nil {
		return c.rebuild.put(c.tx, key, want)
	}
	got, found, err := getState(c.tx, key)
	if err != nil {
		return err
	}
	switch {
	case !found:
		c.fail(seq, "state %s is missing", c.keyName(key))
	case !bytes.Equal(got, want):
		c.fail(seq, "state %s is %x, rebuilt %x", c.keyName(key), got, want)
	}
	return nil
}
