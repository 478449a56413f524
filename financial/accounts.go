package financial

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ledgerworks/ledger/chain"
)

// AccountResult is the outcome of AddAccount or CloseAccount: the account
// as it now stands, the journal seq of the entry that made the change, and
// whether that entry already existed (a retry).
type AccountResult struct {
	Account  Account `json:"account"`
	Seq      uint64  `json:"seq"`
	Replayed bool    `json:"replayed"`
}

// CurrencyResult is the outcome of AddCurrency.
type CurrencyResult struct {
	Currency Currency `json:"currency"`
	Seq      uint64   `json:"seq"`
	Replayed bool     `json:"replayed"`
}

// AddAccount defines an account in its own transaction; see AddAccountTx.
func (b *Book) AddAccount(ctx context.Context, a Account) (AccountResult, error) {
	return update(ctx, b, func(tx *chain.Tx) (AccountResult, error) { return b.AddAccountTx(tx, a) })
}

// AddAccountTx appends the account's definition to the journal, under the
// idempotency key account:<code>. The same definition again is a replay;
// another definition of the code is a *chain.ConflictError: an account's
// definition never changes once written.
func (b *Book) AddAccountTx(tx *chain.Tx, a Account) (AccountResult, error) {
	a = Account{Code: a.Code, Name: a.Name, Type: a.Type, NormalSide: a.NormalSide}
	if err := a.normalize(); err != nil {
		return AccountResult{}, err
	}
	key, payload := keyAccount+a.Code, EncodeAccount(&a)
	e, found, err := b.lookupReplay(tx, key, TypeAccount, payload)
	if errors.Is(err, chain.ErrIdempotencyConflict) {
		return AccountResult{}, fmt.Errorf("financial: account %s is already defined differently: %w", a.Code, err)
	}
	if err != nil {
		return AccountResult{}, err
	}
	if found {
		current, err := b.AccountTx(tx, a.Code)
		return AccountResult{Account: current, Seq: e.Seq, Replayed: true}, err
	}
	e, err = b.appendEntry(tx, key, TypeAccount, payload)
	if err != nil {
		return AccountResult{}, err
	}
	a.DefinedSeq = e.Seq
	if err := tx.StatePut(b.accountKey(a.Code), encodeAccountState(&a)); err != nil {
		return AccountResult{}, err
	}
	return AccountResult{Account: a, Seq: e.Seq}, nil
}

// CloseAccount closes an account in its own transaction; see CloseAccountTx.
func (b *Book) CloseAccount(ctx context.Context, code string) (AccountResult, error) {
	return update(ctx, b, func(tx *chain.Tx) (AccountResult, error) { return b.CloseAccountTx(tx, code) })
}

// CloseAccountTx appends the closing of an account (key
// account.close:<code>). A closed account keeps its balances and history
// and refuses new postings, reversals included. Closing is final; closing
// again is a replay.
func (b *Book) CloseAccountTx(tx *chain.Tx, code string) (AccountResult, error) {
	if err := validateAccountCode(code); err != nil {
		return AccountResult{}, err
	}
	key, payload := keyAccountClose+code, EncodeAccountClose(code)
	e, found, err := b.lookupReplay(tx, key, TypeAccountClose, payload)
	if err != nil {
		return AccountResult{}, err
	}
	a, err := b.AccountTx(tx, code)
	if err != nil {
		return AccountResult{}, err
	}
	if found {
		return AccountResult{Account: a, Seq: e.Seq, Replayed: true}, nil
	}
	e, err = b.appendEntry(tx, key, TypeAccountClose, payload)
	if err != nil {
		return AccountResult{}, err
	}
	a.Closed, a.ClosedSeq = true, e.Seq
	if err := tx.StatePut(b.accountKey(code), encodeAccountState(&a)); err != nil {
		return AccountResult{}, err
	}
	return AccountResult{Account: a, Seq: e.Seq}, nil
}

// Account returns an account's current definition.
func (b *Book) Account(ctx context.Context, code string) (Account, error) {
	return view(ctx, b, func(tx *chain.Tx) (Account, error) { return b.AccountTx(tx, code) })
}

// AccountTx returns an account's current definition; an error matching
// ErrAccountNotFound and chain.ErrNotFound when the book has no such
// account.
func (b *Book) AccountTx(tx *chain.Tx, code string) (Account, error) {
	if err := validateAccountCode(code); err != nil {
		return Account{}, err
	}
	v, found, err := getState(tx, b.accountKey(code))
	if err != nil {
		return Account{}, err
	}
	if !found {
		return Account{}, notFound(ErrAccountNotFound, "account %s is not defined in book %s/%s", code, b.tenant, b.name)
	}
	return decodeAccountState(v)
}

// Accounts returns the chart of accounts in code order.
func (b *Book) Accounts(ctx context.Context) ([]Account, error) {
	return view(ctx, b, b.AccountsTx)
}

// AccountsTx returns the chart of accounts in code order.
func (b *Book) AccountsTx(tx *chain.Tx) ([]Account, error) {
	var accounts []Account
	prefix := b.key(sectionAccount)
	for kv, err := range tx.StateScan(prefix, prefixEnd(prefix), false) {
		if err != nil {
			return nil, err
		}
		a, err := decodeAccountState(kv.Value)
		if err != nil {
			return nil, err
		}
		accounts = append(accounts, a)
	}
	return accounts, nil
}

// AddCurrency defines a currency in its own transaction; see AddCurrencyTx.
func (b *Book) AddCurrency(ctx context.Context, c Currency) (CurrencyResult, error) {
	return update(ctx, b, func(tx *chain.Tx) (CurrencyResult, error) { return b.AddCurrencyTx(tx, c) })
}

// AddCurrencyTx appends a currency definition (key currency:<code>). The
// same definition again is a replay; another exponent for the code is a
// *chain.ConflictError.
func (b *Book) AddCurrencyTx(tx *chain.Tx, c Currency) (CurrencyResult, error) {
	c = Currency{Code: c.Code, Exponent: c.Exponent}
	if err := c.validate(); err != nil {
		return CurrencyResult{}, err
	}
	key, payload := keyCurrency+c.Code, EncodeCurrency(&c)
	e, found, err := b.lookupReplay(tx, key, TypeCurrency, payload)
	if errors.Is(err, chain.ErrIdempotencyConflict) {
		return CurrencyResult{}, fmt.Errorf("financial: currency %s is already defined differently: %w", c.Code, err)
	}
	if err != nil {
		return CurrencyResult{}, err
	}
	if found {
		c.DefinedSeq = e.Seq
		return CurrencyResult{Currency: c, Seq: e.Seq, Replayed: true}, nil
	}
	e, err = b.appendEntry(tx, key, TypeCurrency, payload)
	if err != nil {
		return CurrencyResult{}, err
	}
	c.DefinedSeq = e.Seq
	if err := tx.StatePut(b.currencyKey(c.Code), encodeCurrencyState(&c)); err != nil {
		return CurrencyResult{}, err
	}
	return CurrencyResult{Currency: c, Seq: e.Seq}, nil
}

// Currency returns a currency definition.
func (b *Book) Currency(ctx context.Context, code string) (Currency, error) {
	return view(ctx, b, func(tx *chain.Tx) (Currency, error) { return b.CurrencyTx(tx, code) })
}

// CurrencyTx returns a currency definition; an error matching
// ErrCurrencyNotFound and chain.ErrNotFound when the book has none.
func (b *Book) CurrencyTx(tx *chain.Tx, code string) (Currency, error) {
	if err := validateCurrencyCode(code); err != nil {
		return Currency{}, err
	}
	v, found, err := getState(tx, b.currencyKey(code))
	if err != nil {
		return Currency{}, err
	}
	if !found {
		return Currency{}, notFound(ErrCurrencyNotFound, "currency %s is not defined in book %s/%s", code, b.tenant, b.name)
	}
	return decodeCurrencyState(v)
}

// Currencies returns the book's currencies in code order.
func (b *Book) Currencies(ctx context.Context) ([]Currency, error) {
	return view(ctx, b, b.CurrenciesTx)
}

// CurrenciesTx returns the book's currencies in code order.
func (b *Book) CurrenciesTx(tx *chain.Tx) ([]Currency, error) {
	var currencies []Currency
	prefix := b.key(sectionCurrency)
	for kv, err := range tx.StateScan(prefix, prefixEnd(prefix), false) {
		if err != nil {
			return nil, err
		}
		c, err := decodeCurrencyState(kv.Value)
		if err != nil {
			return nil, err
		}
		currencies = append(currencies, c)
	}
	return currencies, nil
}

// Account state: defined seq u64, closed seq u64 (0 while open), then the
// fin.account/v1 encoding of the definition.
func encodeAccountState(a *Account) []byte {
	v := binary.BigEndian.AppendUint64(nil, a.DefinedSeq)
	v = binary.BigEndian.AppendUint64(v, a.ClosedSeq)
	return append(v, EncodeAccount(a)...)
}

func decodeAccountState(v []byte) (Account, error) {
	if len(v) < 16 {
		return Account{}, stateCorrupt("account state of %d bytes", len(v))
	}
	a, err := DecodeAccount(v[16:])
	if err != nil {
		return Account{}, err
	}
	a.DefinedSeq, a.ClosedSeq = binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:])
	a.Closed = a.ClosedSeq != 0
	return a, nil
}

// Currency state: defined seq u64, then the fin.currency/v1 encoding.
func encodeCurrencyState(c *Currency) []byte {
	return append(binary.BigEndian.AppendUint64(nil, c.DefinedSeq), EncodeCurrency(c)...)
}

func decodeCurrencyState(v []byte) (Currency, error) {
	if len(v) < 8 {
		return Currency{}, stateCorrupt("currency state of %d bytes", len(v))
	}
	c, err := DecodeCurrency(v[8:])
	if err != nil {
		return Currency{}, err
	}
	c.DefinedSeq = binary.BigEndian.Uint64(v)
	return c, nil
}

func stateCorrupt(format string, args ...any) error {
	return &Error{Err: ErrPayload, Class: chain.ErrCorrupt, Detail: "derived state: " + fmt.Sprintf(format, args...)}
}
