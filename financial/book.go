package financial

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"

	"github.com/ledgerworks/ledger/chain"
)

// Domain is the domain component of the package's chain ids and the first
// component of its state keys.
const Domain = "fin"

// journalName is the last component of a book's journal chain id.
const journalName = "journal"

// Prefixes of the journal's idempotency keys: one namespace per kind of
// entry, so that a caller's posting key can never collide with the key the
// package derives for an account, a currency or a reversal.
const (
	keyAccount      = "account:"
	keyAccountClose = "account.close:"
	keyCurrency     = "currency:"
	keyPosting      = "posting:"
	keyReversal     = "reversal:"
)

// Book is one tenant's set of books: a chart of accounts, currencies and a
// journal. Every entry of the book, definitions and postings alike, is in
// one chain, tenant/fin/book/journal, so the journal is totally ordered and
// hash-linked. A Book is a small immutable value, safe for concurrent use.
type Book struct {
	db      *chain.DB
	tenant  string
	name    string
	journal string
	prefix  string // of every state key of the book: fin/tenant/book/
}

// NewBook returns the book name of tenant in db. Tenant and name follow
// chain.ScopedName's rules (no '/', at most chain.NameComponentLengthMax
// bytes). db may be nil when only the …Tx methods are used.
func NewBook(db *chain.DB, tenant, name string) (*Book, error) {
	journal, err := chain.ScopedName(tenant, Domain, name, journalName)
	if err != nil {
		return nil, &Error{Err: ErrInvalidBook, Class: chain.ErrInvalid, Detail: err.Error(), Cause: err}
	}
	return &Book{db: db, tenant: tenant, name: name, journal: journal,
		prefix: Domain + "/" + tenant + "/" + name + "/"}, nil
}

// Tenant returns the book's tenant.
func (b *Book) Tenant() string { return b.tenant }

// Name returns the book's name.
func (b *Book) Name() string { return b.name }

// Journal returns the chain id of the book's journal.
func (b *Book) Journal() string { return b.journal }

// update runs fn in its own write transaction.
func update[T any](ctx context.Context, b *Book, fn func(tx *chain.Tx) (T, error)) (T, error) {
	var out T
	err := b.db.Update(ctx, func(tx *chain.Tx) error {
		var err error
		out, err = fn(tx)
		return err
	})
	return out, err
}

// view runs fn in a read transaction.
func view[T any](ctx context.Context, b *Book, fn func(tx *chain.Tx) (T, error)) (T, error) {
	var out T
	err := b.db.View(ctx, func(tx *chain.Tx) error {
		var err error
		out, err = fn(tx)
		return err
	})
	return out, err
}

// lookupReplay returns the journal entry that holds key. found is false for
// a new key; a different request under the key is a *chain.ConflictError.
// It runs before any business rule is checked, so that a retry of a
// request that was accepted is answered even if the rules would refuse it
// now (the account has been closed since).
func (b *Book) lookupReplay(tx *chain.Tx, key, typ string, payload []byte) (e chain.Entry, found bool, err error) {
	e, err = tx.Lookup(b.journal, key)
	if errors.Is(err, chain.ErrNotFound) {
		return chain.Entry{}, false, nil
	}
	if err != nil {
		return chain.Entry{}, false, err
	}
	if requested := chain.Fingerprint(typ, payload); e.Fingerprint() != requested {
		return e, true, &chain.ConflictError{Chain: b.journal, IdempotencyKey: key, ExistingSeq: e.Seq,
			Expected: e.Fingerprint(), Calculated: requested}
	}
	return e, true, nil
}

// appendEntry appends a new entry to the journal.
func (b *Book) appendEntry(tx *chain.Tx, key, typ string, payload []byte) (chain.Entry, error) {
	res, err := tx.Append(chain.Request{Chain: b.journal, IdempotencyKey: key, Type: typ, Payload: payload})
	if err != nil {
		return chain.Entry{}, err
	}
	if res.Replayed { // lookupReplay ran in this transaction: a bug, not an input
		panic("financial: journal entry replayed after lookup found no key")
	}
	return res.Entry, nil
}

// getState reads a state value and copies it; found is false when absent.
func getState(tx *chain.Tx, key []byte) (value []byte, found bool, err error) {
	v, err := tx.StateGet(key)
	if errors.Is(err, chain.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return append([]byte(nil), v...), true, nil
}

// State keys of a book, all below fin/tenant/book/. Codes contain no '/',
// so every section and every account/currency pair has its own prefix.
//
//	acct/<code>                         account state
//	cur/<code>                          currency state
//	bal/<account>/<currency>            current balance
//	seq/<account>/<currency>/<seq>      running balance after the posting
//	day/<account>/<currency>/<day><seq> the posting's net amount, by date
//	sum/<account>/<currency>/<level><node> totals of date ranges
//
// <seq> is a big-endian uint64, <day> a big-endian uint32 (Date.index),
// <level> a byte and <node> a big-endian uint32 (see balance.go).
const (
	sectionAccount  = "acct/"
	sectionCurrency = "cur/"
	sectionBalance  = "bal/"
	sectionSeq      = "seq/"
	sectionDay      = "day/"
	sectionSum      = "sum/"
)

func (b *Book) key(section string, parts ...string) []byte {
	k := make([]byte, 0, 64)
	k = append(k, b.prefix...)
	k = append(k, section...)
	for i, p := range parts {
		if i > 0 {
			k = append(k, '/')
		}
		k = append(k, p...)
	}
	return k
}

func (b *Book) accountKey(code string) []byte  { return b.key(sectionAccount, code) }
func (b *Book) currencyKey(code string) []byte { return b.key(sectionCurrency, code) }
func (b *Book) balanceKey(account, currency string) []byte {
	return b.key(sectionBalance, account, currency)
}

// pairPrefix is the prefix of a section's keys for one account and currency.
func (b *Book) pairPrefix(section, account, currency string) []byte {
	return append(b.key(section, account, currency), '/')
}

func (b *Book) seqKey(account, currency string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(b.pairPrefix(sectionSeq, account, currency), seq)
}

func (b *Book) dayKey(account, currency string, date Date, seq uint64) []byte {
	k := binary.BigEndian.AppendUint32(b.pairPrefix(sectionDay, account, currency), date.index())
	return binary.BigEndian.AppendUint64(k, seq)
}

func (b *Book) sumKey(account, currency string, level uint8, node uint32) []byte {
	k := append(b.pairPrefix(sectionSum, account, currency), level)
	return binary.BigEndian.AppendUint32(k, node)
}

// prefixEnd returns the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// splitPair splits "<account>/<currency>" (the rest of a bal/ key).
func splitPair(rest string) (account, currency string, ok bool) {
	account, currency, ok = strings.Cut(rest, "/")
	return account, currency, ok && !strings.Contains(currency, "/")
}
