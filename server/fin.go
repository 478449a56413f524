package server

import (
	"net/http"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/financial"
	"github.com/ledgerworks/ledger/internal/wire"
)

func (s *Server) finRoutes() []*Route {
	const tag = "financial"
	const book = "/v1/fin/books/{book}"
	return []*Route{
		{Method: http.MethodPost, Path: book + "/accounts", ID: "fin.accounts.define", Tag: tag, Scope: scopeWrite, Guarded: true,
			Summary: "Define an account (a journal entry; the definition never changes)", Request: api.FinAccountRequest{},
			Response: api.FinAccount{}, Status: http.StatusOK, write: finAddAccount},
		{Method: http.MethodPost, Path: book + "/accounts/{code}/close", ID: "fin.accounts.close", Tag: tag, Scope: scopeWrite,
			Guarded: true, Summary: "Close an account: it keeps its balances and takes no new postings",
			Response: api.FinAccount{}, Status: http.StatusOK, write: finCloseAccount},
		{Method: http.MethodGet, Path: book + "/accounts", ID: "fin.accounts.list", Tag: tag, Scope: scopeRead,
			Summary: "The chart of accounts", Response: api.FinAccountList{}, Status: http.StatusOK, read: finAccounts},
		{Method: http.MethodPost, Path: book + "/currencies", ID: "fin.currencies.define", Tag: tag, Scope: scopeWrite, Guarded: true,
			Summary: "Define a currency and its minor-unit exponent", Request: api.FinCurrencyRequest{},
			Response: api.FinCurrency{}, Status: http.StatusOK, write: finAddCurrency},
		{Method: http.MethodGet, Path: book + "/currencies", ID: "fin.currencies.list", Tag: tag, Scope: scopeRead,
			Summary: "The book's currencies", Response: api.FinCurrencyList{}, Status: http.StatusOK, read: finCurrencies},
		{Method: http.MethodPost, Path: book + "/postings", ID: "fin.postings.create", Tag: tag, Scope: scopeWrite, Guarded: true,
			Summary: "Record a balanced posting; its key is derived from the Idempotency-Key", Request: api.FinPostingRequest{},
			Response: api.FinPosting{}, Status: http.StatusCreated, write: finPost},
		{Method: http.MethodGet, Path: book + "/postings/{seq}", ID: "fin.postings.get", Tag: tag, Scope: scopeRead,
			Summary: "One posting of the journal", Response: api.FinPosting{}, Status: http.StatusOK, read: finPosting},
		{Method: http.MethodGet, Path: book + "/postings", ID: "fin.postings.by-key", Tag: tag, Scope: scopeRead,
			Summary: "The posting that holds a key", Response: api.FinPosting{}, Status: http.StatusOK, read: finPostingByKey,
			Query: []Param{{"key", "string", "the posting's key (required)"}}},
		{Method: http.MethodPost, Path: book + "/reversals", ID: "fin.reversals.create", Tag: tag, Scope: scopeWrite, Guarded: true,
			Summary: "Append the opposite of a posting (once)", Request: api.FinReversalRequest{},
			Response: api.FinPosting{}, Status: http.StatusCreated, write: finReverse},
		{Method: http.MethodGet, Path: book + "/balances/{account}", ID: "fin.balances.account", Tag: tag, Scope: scopeRead,
			Summary: "An account's current balance in every currency", Response: api.FinBalanceList{}, Status: http.StatusOK,
			read: finBalances},
		{Method: http.MethodGet, Path: book + "/balances/{account}/{currency}", ID: "fin.balances.get", Tag: tag, Scope: scopeRead,
			Summary: "An account's balance in a currency: now, after a journal seq, or as of a date", Response: api.FinBalance{},
			Status: http.StatusOK, read: finBalance,
			Query: []Param{{"at_seq", "int64", "the balance after this journal seq"},
				{"as_of", "string", "the balance of the postings dated on or before this date (YYYY-MM-DD)"}}},
		{Method: http.MethodGet, Path: book + "/trial-balance", ID: "fin.trial-balance", Tag: tag, Scope: scopeRead,
			Summary: "Every balance with debit and credit totals per currency", Response: api.FinTrialBalance{},
			Status: http.StatusOK, read: finTrialBalance},
	}
}

// book returns the tenant's book named in the path.
func (c *call) book() (*financial.Book, error) {
	return financial.NewBook(c.s.db, c.tenant, c.r.PathValue("book"))
}

func (c *call) finPosting(b *financial.Book, res financial.PostingResult) api.FinPosting {
	out := wire.FinPosting(b, res)
	out.Journal = c.rel(out.Journal)
	return out
}

func finAddAccount(c *call) (func(tx txn) (any, error), error) {
	b, err := c.book()
	if err != nil {
		return nil, err
	}
	var req api.FinAccountRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	accountType, err := financial.ParseAccountType(req.Type)
	if err != nil {
		return nil, err
	}
	acc := financial.Account{Code: req.Code, Name: req.Name, Type: accountType}
	if req.NormalSide != "" {
		if acc.NormalSide, err = financial.ParseSide(req.NormalSide); err != nil {
			return nil, err
		}
	}
	return func(tx txn) (any, error) {
		res, err := b.AddAccountTx(tx, acc)
		if err != nil {
			return nil, err
		}
		return wire.FinAccountResult(b, res), nil
	}, nil
}

func finCloseAccount(c *call) (func(tx txn) (any, error), error) {
	b, err := c.book()
	if err != nil {
		return nil, err
	}
	code := c.r.PathValue("code")
	return func(tx txn) (any, error) {
		res, err := b.CloseAccountTx(tx, code)
		if err != nil {
			return nil, err
		}
		return wire.FinAccountResult(b, res), nil
	}, nil
}

func finAccounts(c *call) (any, error) {
	b, err := c.book()
	if err != nil {
		return nil, err
	}
	accounts, err := b.Accounts(c.ctx)
	if err != nil {
		return nil, err
	}
	out := api.FinAccountList{Accounts: []api.FinAccount{}}
	for _, acc := range accounts {
		out.Accounts = append(out.Accounts, wire.FinAccount(b, acc))
	}
	return out, nil
}

func finAddCurrency(c *call) (func(tx txn) (any, error), error) {
	b, err := c.book()
	if err != nil {
		return nil, err
	}
	var req api.FinCurrencyRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	return func(tx txn) (any, error) {
		res, err := b.AddCurrencyTx(tx, financial.Currency{Code: req.Code, Exponent: req.Exponent})
		if err != nil {
			return nil, err
		}
		return wire.FinCurrency(b, res.Currency, res.Replayed), nil
	}, nil
}

func finCurrencies(c *call) (any, error) {
	b, err := c.book()
	if err != nil {
		return nil, err
	}
	currencies, err := b.Currencies(c.ctx)
	if err != nil {
		return nil, err
	}
	out := api.FinCurrencyList{Currencies: []api.FinCurrency{}}
	for _, cur := range currencies {
		out.Currencies = append(out.Currencies, wire.FinCurrency(b, cur, false))
	}
	return out, nil
}

// finLines parses posting lines at the exponents of the book's currencies
// (fixed once defined, so they may be read before the write's
// transaction).
func finLines(c *call, b *financial.Book, lines []api.PostingLine) ([]financial.Line, error) {
	currencies, err := b.Currencies(c.ctx)
	if err != nil {
		return nil, err
	}
	exponents := make(map[string]uint8, len(currencies))
	for _, cur := range currencies {
		exponents[cur.Code] = cur.Exponent
	}
	out := make([]financial.Line, 0, len(lines))
	for i, l := range lines {
		side, err := financial.ParseSide(l.Side)
		if err != nil {
			return nil, err
		}
		exp, ok := exponents[l.Currency]
		if !ok {
			return nil, invalidf("line %d: currency %q is not defined in book %s", i+1, l.Currency, b.Name())
		}
		amount, err := decimal.Parse(l.Amount, exp)
		if err != nil {
			return nil, invalidf("line %d: amount %q at %d decimal places: %v", i+1, l.Amount, exp, err)
		}
		out = append(out, financial.Line{Account: l.Account, Side: side, Amount: amount, Currency: l.Currency})
	}
	return out, nil
}

func finPost(c *call) (func(tx txn) (any, error), error) {
	b, err := c.book()
	if err != nil {
		return nil, err
	}
	var req api.FinPostingRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	date, err := financial.ParseDate(req.Date)
	if err != nil {
		return nil, err
	}
	lines, err := finLines(c, b, req.Lines)
	if err != nil {
		return nil, err
	}
	p := financial.Posting{Key: c.op(), Date: date, Memo: req.Memo, Reference: req.Reference, Lines: lines}
	return func(tx txn) (any, error) {
		res, err := b.PostTx(tx, p)
		if err != nil {
			return nil, err
		}
		return c.finPosting(b, res), nil
	}, nil
}

func finPosting(c *call) (any, error) {
	b, err := c.book()
	if err != nil {
		return nil, err
	}
	seq, err := c.pathUint("seq")
	if err != nil {
		return nil, err
	}
	res, err := b.Posting(c.ctx, seq)
	if err != nil {
		return nil, err
	}
	return c.finPosting(b, res), nil
}

func finPostingByKey(c *call) (any, error) {
	b, err := c.book()
	if err != nil {
		return nil, err
	}
	key := c.r.URL.Query().Get("key")
	if key == "" {
		return nil, invalidf("key= names the posting")
	}
	res, err := b.PostingByKey(c.ctx, key)
	if err != nil {
		return nil, err
	}
	return c.finPosting(b, res), nil
}

func finReverse(c *call) (func(tx txn) (any, error), error) {
	b, err := c.book()
	if err != nil {
		return nil, err
	}
	var req api.FinReversalRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	if (req.Seq == 0) == (req.Key == "") {
		return nil, invalidf("name the posting by seq or by key (one of them)")
	}
	r := financial.Reversal{Seq: req.Seq, Key: req.Key, Memo: req.Memo}
	if req.Date != "" {
		if r.Date, err = financial.ParseDate(req.Date); err != nil {
			return nil, err
		}
	}
	return func(tx txn) (any, error) {
		if req.Date == "" {
			var original financial.PostingResult
			var err error
			if req.Key != "" {
				original, err = b.PostingByKeyTx(tx, req.Key)
			} else {
				original, err = b.PostingTx(tx, req.Seq)
			}
			if err != nil {
				return nil, err
			}
			r.Date = original.Posting.Date
		}
		res, err := b.ReverseTx(tx, r)
		if err != nil {
			return nil, err
		}
		return c.finPosting(b, res), nil
	}, nil
}

func finBalances(c *call) (any, error) {
	b, err := c.book()
	if err != nil {
		return nil, err
	}
	balances, err := b.Balances(c.ctx, c.r.PathValue("account"))
	if err != nil {
		return nil, err
	}
	out := api.FinBalanceList{Balances: []api.FinBalance{}}
	for _, bal := range balances {
		out.Balances = append(out.Balances, wire.FinBalance(b, bal))
	}
	return out, nil
}

func finBalance(c *call) (any, error) {
	b, err := c.book()
	if err != nil {
		return nil, err
	}
	account, currency := c.r.PathValue("account"), c.r.PathValue("currency")
	atSeq, seqSet, err := c.uintQuery("at_seq", 0)
	if err != nil {
		return nil, err
	}
	asOf := c.r.URL.Query().Get("as_of")
	if seqSet && asOf != "" {
		return nil, invalidf("at_seq and as_of exclude each other")
	}
	var bal financial.Balance
	switch {
	case seqSet:
		bal, err = b.BalanceAtSeq(c.ctx, account, currency, atSeq)
	case asOf != "":
		date, perr := financial.ParseDate(asOf)
		if perr != nil {
			return nil, perr
		}
		bal, err = b.BalanceAtDate(c.ctx, account, currency, date)
	default:
		bal, err = b.Balance(c.ctx, account, currency)
	}
	if err != nil {
		return nil, err
	}
	return wire.FinBalance(b, bal), nil
}

func finTrialBalance(c *call) (any, error) {
	b, err := c.book()
	if err != nil {
		return nil, err
	}
	tb, err := b.TrialBalance(c.ctx)
	if err != nil {
		return nil, err
	}
	return wire.FinTrialBalance(b, tb), nil
}
