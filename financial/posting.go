package financial

import (
	"math"

	"github.com/ledgerworks/ledger/decimal"
)

// Line is one line of a posting: a positive amount on one side of one
// account, in one currency. The amount's scale must be the currency's
// exponent.
type Line struct {
	Account  string          `json:"account"`
	Side     Side            `json:"side"`
	Amount   decimal.Decimal `json:"amount"`
	Currency string          `json:"currency"`
}

// Posting is a journal entry: two or more lines whose debits equal their
// credits in every currency.
type Posting struct {
	// Key is the idempotency key: a posting with a key the book already
	// holds is the same posting (returned unchanged) or a conflict.
	// Reversals have no key of their own (Reverses identifies them).
	Key string `json:"key,omitempty"`
	// Date is the effective date; it need not follow the journal order
	// (see BalanceAtDate).
	Date      Date   `json:"date"`
	Memo      string `json:"memo,omitempty"`
	Reference string `json:"reference,omitempty"`
	Lines     []Line `json:"lines"`
	// Reverses is the journal seq of the posting this one reverses; zero for
	// an ordinary posting. Only Reverse sets it.
	Reverses uint64 `json:"reverses,omitempty"`
}

// currencyTotal is the debit and credit total of one currency in a posting.
type currencyTotal struct {
	code          string
	scale         uint8
	debit, credit int64
	firstLine     int
}

// validateShape checks everything that needs no stored state: lengths,
// sides, positive amounts, consistent scales and the balance per currency.
// keyRequired is false for reversals, whose key the package derives.
func (p *Posting) validateShape(keyRequired bool) error {
	if keyRequired || p.Key != "" {
		if err := validateText(ErrInvalidPosting, "idempotency key", p.Key, 1, PostingKeyLengthMax); err != nil {
			return err
		}
	}
	if err := p.Date.Validate(); err != nil {
		return err
	}
	if err := validateText(ErrInvalidPosting, "memo", p.Memo, 0, MemoLengthMax); err != nil {
		return err
	}
	if err := validateText(ErrInvalidPosting, "reference", p.Reference, 0, ReferenceLengthMax); err != nil {
		return err
	}
	if len(p.Lines) < LinesMin || len(p.Lines) > LinesMax {
		return invalid(ErrInvalidPosting, "%d lines outside %d..%d", len(p.Lines), LinesMin, LinesMax)
	}
	for i := range p.Lines {
		if err := p.Lines[i].validate(i + 1); err != nil {
			return err
		}
	}
	_, err := p.totals()
	return err
}

func (l *Line) validate(number int) error {
	if err := validateAccountCode(l.Account); err != nil {
		return withLine(err, number)
	}
	if !l.Side.valid() {
		return lineInvalid(number, ErrInvalidPosting, "side %d is not debit or credit", uint8(l.Side))
	}
	if err := validateCurrencyCode(l.Currency); err != nil {
		return withLine(err, number)
	}
	if l.Amount.Sign() <= 0 {
		return lineInvalid(number, ErrAmount, "amount %s %s on account %s is not positive", l.Amount, l.Currency, l.Account)
	}
	return nil
}

func withLine(err error, number int) error {
	if e, ok := err.(*Error); ok {
		e.Line = number
	}
	return err
}

// totals sums the debits and credits per currency, in the order currencies
// first appear, and checks that they are equal.
func (p *Posting) totals() ([]currencyTotal, error) {
	var totals []currencyTotal
	for i, l := range p.Lines {
		t := findTotal(totals, l.Currency)
		if t == nil {
			totals = append(totals, currencyTotal{code: l.Currency, scale: l.Amount.Scale(), firstLine: i + 1})
			t = &totals[len(totals)-1]
		}
		if l.Amount.Scale() != t.scale {
			return nil, lineInvalid(i+1, ErrExponent, "%s amount %s has %d decimals, line %d has %d",
				l.Currency, l.Amount, l.Amount.Scale(), t.firstLine, t.scale)
		}
		sum := &t.debit
		if l.Side == Credit {
			sum = &t.credit
		}
		next, ok := addInt64(*sum, l.Amount.Units())
		if !ok {
			return nil, &Error{Err: ErrOverflow, Class: invalidClass, Line: i + 1, Cause: decimal.ErrOverflow,
				Detail: "the " + l.Side.String() + "s in " + l.Currency + " exceed the range of minor units"}
		}
		*sum = next
	}
	for _, t := range totals {
		if t.debit != t.credit {
			debit, credit := decimal.MustNew(t.debit, t.scale), decimal.MustNew(t.credit, t.scale)
			return nil, invalid(ErrUnbalanced, "%s debits %s, credits %s, difference %s",
				t.code, debit, credit, decimal.MustNew(t.debit-t.credit, t.scale))
		}
	}
	return totals, nil
}

func findTotal(totals []currencyTotal, code string) *currencyTotal {
	for i := range totals {
		if totals[i].code == code {
			return &totals[i]
		}
	}
	return nil
}

// addInt64 returns a+b, or false if the sum leaves the symmetric range
// -MaxInt64..MaxInt64. Balances avoid MinInt64 so that they can always be
// negated (a credit-normal account shows its balance with the sign flipped).
func addInt64(a, b int64) (int64, bool) {
	sum := a + b
	if (a^sum)&(b^sum) < 0 || sum == math.MinInt64 {
		return 0, false
	}
	return sum, true
}

// signedAmount is the line's effect on the account's debit-minus-credit
// balance.
func (l *Line) signedAmount() int64 {
	if l.Side == Credit {
		return -l.Amount.Units()
	}
	return l.Amount.Units()
}

// reversed returns the lines of p with every side swapped.
func (p *Posting) reversedLines() []Line {
	lines := make([]Line, len(p.Lines))
	for i, l := range p.Lines {
		l.Side = l.Side.Opposite()
		lines[i] = l
	}
	return lines
}
