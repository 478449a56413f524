package client

import (
	"context"
	"fmt"

	"github.com/ledgerworks/ledger/api"
)

func bookRoute(book string) *route { return newRoute("/v1/fin/books").seg("book", book) }

// DefineAccount adds an account to a book's chart.
func (c *Client) DefineAccount(ctx context.Context, book string, req api.FinAccountRequest, opts ...CallOption) (api.FinAccount, error) {
	var out api.FinAccount
	err := c.post(ctx, bookRoute(book).lit("/accounts"), req, &out, opts)
	return out, err
}

// CloseAccount closes an account of a book to new postings.
func (c *Client) CloseAccount(ctx context.Context, book, code string, opts ...CallOption) (api.FinAccount, error) {
	var out api.FinAccount
	err := c.post(ctx, bookRoute(book).lit("/accounts").seg("code", code).lit("/close"), nil, &out, opts)
	return out, err
}

// Accounts lists a book's chart of accounts.
func (c *Client) Accounts(ctx context.Context, book string, opts ...CallOption) (api.FinAccountList, error) {
	var out api.FinAccountList
	err := c.get(ctx, bookRoute(book).lit("/accounts"), nil, &out, opts)
	return out, err
}

// DefineCurrency adds a currency and its minor-unit exponent to a book.
func (c *Client) DefineCurrency(ctx context.Context, book string, req api.FinCurrencyRequest, opts ...CallOption) (api.FinCurrency, error) {
	var out api.FinCurrency
	err := c.post(ctx, bookRoute(book).lit("/currencies"), req, &out, opts)
	return out, err
}

// Currencies lists a book's currencies.
func (c *Client) Currencies(ctx context.Context, book string, opts ...CallOption) (api.FinCurrencyList, error) {
	var out api.FinCurrencyList
	err := c.get(ctx, bookRoute(book).lit("/currencies"), nil, &out, opts)
	return out, err
}

// Post records a balanced posting in a book's journal; its journal key is
// derived from the call's Idempotency-Key.
func (c *Client) Post(ctx context.Context, book string, req api.FinPostingRequest, opts ...CallOption) (api.FinPosting, error) {
	var out api.FinPosting
	err := c.post(ctx, bookRoute(book).lit("/postings"), req, &out, opts)
	return out, err
}

// Posting reads the posting at seq of a book's journal.
func (c *Client) Posting(ctx context.Context, book string, seq uint64, opts ...CallOption) (api.FinPosting, error) {
	var out api.FinPosting
	err := c.get(ctx, bookRoute(book).lit("/postings").seg("seq", uintString(seq)), nil, &out, opts)
	return out, err
}

// PostingByKey reads the posting that holds key in a book's journal (the
// key a posting route derived from its Idempotency-Key, or FinPosting.Key).
func (c *Client) PostingByKey(ctx context.Context, book, key string, opts ...CallOption) (api.FinPosting, error) {
	var out api.FinPosting
	if key == "" {
		return out, fmt.Errorf("%w: posting key is empty", ErrInvalidArgument)
	}
	err := c.get(ctx, bookRoute(book).lit("/postings"), query{}.str("key", key).values(), &out, opts)
	return out, err
}

// ReversePosting records the reversal of a posting.
func (c *Client) ReversePosting(ctx context.Context, book string, req api.FinReversalRequest, opts ...CallOption) (api.FinPosting, error) {
	var out api.FinPosting
	err := c.post(ctx, bookRoute(book).lit("/reversals"), req, &out, opts)
	return out, err
}

// AccountBalances reads an account's current balance in every currency.
func (c *Client) AccountBalances(ctx context.Context, book, account string, opts ...CallOption) (api.FinBalanceList, error) {
	var out api.FinBalanceList
	err := c.get(ctx, bookRoute(book).lit("/balances").seg("account", account), nil, &out, opts)
	return out, err
}

// FinAt names a point in a journal's history: its entry Seq, or the end
// of effective date AsOf (YYYY-MM-DD); the current balance when both are
// zero.
type FinAt struct {
	Seq  uint64
	AsOf string
}

// AccountBalance reads an account's balance in one currency.
func (c *Client) AccountBalance(ctx context.Context, book, account, currency string, at FinAt, opts ...CallOption) (api.FinBalance, error) {
	var out api.FinBalance
	q := query{}.uint("at_seq", at.Seq).str("as_of", at.AsOf)
	err := c.get(ctx, bookRoute(book).lit("/balances").seg("account", account).seg("currency", currency), q.values(), &out, opts)
	return out, err
}

// TrialBalance reads a book's trial balance.
func (c *Client) TrialBalance(ctx context.Context, book string, opts ...CallOption) (api.FinTrialBalance, error) {
	var out api.FinTrialBalance
	err := c.get(ctx, bookRoute(book).lit("/trial-balance"), nil, &out, opts)
	return out, err
}
