package api

// FinAccountRequest is POST /v1/fin/books/{book}/accounts.
type FinAccountRequest struct {
	Code string `json:"code"`
	Name string `json:"name"`
	// Type is asset, liability, equity, income or expense.
	Type string `json:"type"`
	// NormalSide is debit or credit; from the type when empty.
	NormalSide string `json:"normal_side,omitempty"`
}

// FinAccount is an account of a book's chart.
type FinAccount struct {
	Tenant     string `json:"tenant"`
	Book       string `json:"book"`
	Code       string `json:"code"`
	Name       string `json:"name"`
	Type       string `json:"type"`
	NormalSide string `json:"normal_side"`
	Closed     bool   `json:"closed"`
	DefinedSeq uint64 `json:"defined_seq,string"`
	ClosedSeq  uint64 `json:"closed_seq,omitempty,string"`
	// Seq and Replayed describe the journal entry a definition or a close
	// wrote (or found).
	Seq      uint64 `json:"seq,omitempty,string"`
	Replayed bool   `json:"replayed"`
}

// FinAccountList is GET /v1/fin/books/{book}/accounts.
type FinAccountList struct {
	Accounts []FinAccount `json:"accounts"`
}

// FinCurrencyRequest is POST /v1/fin/books/{book}/currencies.
type FinCurrencyRequest struct {
	Code     string `json:"code"`
	Exponent uint8  `json:"exponent"`
}

// FinCurrency is a currency of a book and its minor-unit exponent.
type FinCurrency struct {
	Tenant     string `json:"tenant"`
	Book       string `json:"book"`
	Code       string `json:"code"`
	Exponent   uint8  `json:"exponent"`
	DefinedSeq uint64 `json:"defined_seq,string"`
	Replayed   bool   `json:"replayed"`
}

// FinCurrencyList is GET /v1/fin/books/{book}/currencies.
type FinCurrencyList struct {
	Currencies []FinCurrency `json:"currencies"`
}

// PostingLine is one line of a posting; Amount is positive, at the
// currency's exponent.
type PostingLine struct {
	Account  string `json:"account"`
	Side     string `json:"side"` // debit or credit
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
}

// FinPostingRequest is POST /v1/fin/books/{book}/postings. The posting's
// key in the journal is derived from the request's Idempotency-Key.
type FinPostingRequest struct {
	Date      string        `json:"date"` // YYYY-MM-DD
	Memo      string        `json:"memo,omitempty"`
	Reference string        `json:"reference,omitempty"`
	Lines     []PostingLine `json:"lines"`
}

// FinReversalRequest is POST /v1/fin/books/{book}/reversals: name the
// posting by Seq or by Key (one of them). Date defaults to the original's.
type FinReversalRequest struct {
	Seq  uint64 `json:"seq,omitempty,string"`
	Key  string `json:"key,omitempty"`
	Date string `json:"date,omitempty"`
	Memo string `json:"memo,omitempty"`
}

// FinPosting is a posting of the journal.
type FinPosting struct {
	Tenant       string        `json:"tenant"`
	Book         string        `json:"book"`
	Journal      string        `json:"journal"`
	Seq          uint64        `json:"seq,string"`
	TimeUnixNano int64         `json:"time_unix_nano,string"`
	Hash         string        `json:"hash"`
	Key          string        `json:"key,omitempty"`
	Date         string        `json:"date"`
	Memo         string        `json:"memo"`
	Reference    string        `json:"reference"`
	Reverses     uint64        `json:"reverses,omitempty,string"`
	Lines        []PostingLine `json:"lines"`
	Replayed     bool          `json:"replayed"`
}

// FinBalance is an account's balance in one currency: Amount is debits
// minus credits, Normal the balance on the account's normal side.
type FinBalance struct {
	Tenant     string `json:"tenant"`
	Book       string `json:"book"`
	Account    string `json:"account"`
	Currency   string `json:"currency"`
	Amount     string `json:"amount"`
	Normal     string `json:"normal"`
	NormalSide string `json:"normal_side"`
	Postings   uint64 `json:"postings,string"`
	Seq        uint64 `json:"seq,string"`
	// Date is set for a balance as of an effective date.
	Date string `json:"date,omitempty"`
}

// FinBalanceList is GET /v1/fin/books/{book}/balances/{account}: the
// account's current balance in every currency it has postings in.
type FinBalanceList struct {
	Balances []FinBalance `json:"balances"`
}

// CurrencyTotal is a trial balance's totals in one currency.
type CurrencyTotal struct {
	Currency string `json:"currency"`
	Debit    string `json:"debit"`
	Credit   string `json:"credit"`
	Net      string `json:"net"`
}

// FinTrialBalance is GET /v1/fin/books/{book}/trial-balance.
type FinTrialBalance struct {
	Tenant string          `json:"tenant"`
	Book   string          `json:"book"`
	Seq    uint64          `json:"seq,string"`
	Rows   []FinBalance    `json:"rows"`
	Totals []CurrencyTotal `json:"totals"`
}
