package financial

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// AccountType classifies an account in the chart of accounts. Its values are
// persisted: never renumber them.
type AccountType uint8

// Account types.
const (
	Asset AccountType = iota + 1
	Liability
	Equity
	Income
	Expense
	accountTypeEnd
)

var accountTypeNames = [...]string{"", "asset", "liability", "equity", "income", "expense"}

// String returns the lower-case name used by the CLI and JSON.
func (t AccountType) String() string {
	if t == 0 || t >= accountTypeEnd {
		return fmt.Sprintf("AccountType(%d)", uint8(t))
	}
	return accountTypeNames[t]
}

// ParseAccountType parses asset, liability, equity, income or expense.
func ParseAccountType(text string) (AccountType, error) {
	for t := Asset; t < accountTypeEnd; t++ {
		if accountTypeNames[t] == text {
			return t, nil
		}
	}
	return 0, invalid(ErrInvalidAccount, "account type %q is not asset, liability, equity, income or expense", text)
}

// MarshalText writes the type's name.
func (t AccountType) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// NormalSide is the side on which an account of this type usually carries
// its balance: debit for assets and expenses, credit for the others.
func (t AccountType) NormalSide() Side {
	if t == Asset || t == Expense {
		return Debit
	}
	return Credit
}

// Side is the side of a posting line. Its values are persisted.
type Side uint8

// Sides.
const (
	Debit Side = iota + 1
	Credit
	sideEnd
)

// String returns "debit" or "credit".
func (s Side) String() string {
	switch s {
	case Debit:
		return "debit"
	case Credit:
		return "credit"
	}
	return fmt.Sprintf("Side(%d)", uint8(s))
}

// ParseSide parses debit or credit.
func ParseSide(text string) (Side, error) {
	switch text {
	case "debit":
		return Debit, nil
	case "credit":
		return Credit, nil
	}
	return 0, invalid(ErrInvalidPosting, "side %q is not debit or credit", text)
}

// MarshalText writes the side's name.
func (s Side) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Opposite returns the other side.
func (s Side) Opposite() Side { return sideEnd - s }

func (s Side) valid() bool { return s == Debit || s == Credit }

// Account is an entry of the chart of accounts. A definition is an entry of
// the book's journal; so is closing the account. The current definition is
// derived state.
type Account struct {
	// Code identifies the account in its book: 1 to AccountCodeLengthMax
	// bytes of ASCII letters, digits, '.', '-' and '_'.
	Code string `json:"code"`
	// Name is free text: 1 to AccountNameLengthMax bytes of UTF-8 without
	// control characters.
	Name string      `json:"name"`
	Type AccountType `json:"type"`
	// NormalSide defaults to Type.NormalSide() when zero; set it for
	// contra accounts (accumulated depreciation: an asset with a credit
	// balance).
	NormalSide Side `json:"normal_side"`

	// Closed, DefinedSeq and ClosedSeq are state, filled in on reads and
	// ignored on AddAccount.
	Closed     bool   `json:"closed"`
	DefinedSeq uint64 `json:"defined_seq"`
	ClosedSeq  uint64 `json:"closed_seq,omitempty"`
}

// normalize fills the defaults and checks every field.
func (a *Account) normalize() error {
	if err := validateAccountCode(a.Code); err != nil {
		return err
	}
	if err := validateText(ErrInvalidAccount, "account name", a.Name, 1, AccountNameLengthMax); err != nil {
		return err
	}
	if a.Type == 0 || a.Type >= accountTypeEnd {
		return invalid(ErrInvalidAccount, "account %s: type %d is not one of asset..expense", a.Code, uint8(a.Type))
	}
	if a.NormalSide == 0 {
		a.NormalSide = a.Type.NormalSide()
	}
	if !a.NormalSide.valid() {
		return invalid(ErrInvalidAccount, "account %s: normal side %d is not debit or credit", a.Code, uint8(a.NormalSide))
	}
	return nil
}

// validateAccountCode keeps codes safe inside state keys (no '/') and inside
// the CLI's account:amount:currency line syntax (no ':').
func validateAccountCode(code string) error {
	if len(code) == 0 || len(code) > AccountCodeLengthMax {
		return invalid(ErrInvalidAccount, "account code %q: length %d outside 1..%d", code, len(code), AccountCodeLengthMax)
	}
	for i := 0; i < len(code); i++ {
		if c := code[i]; !isAlphanumeric(c) && c != '.' && c != '-' && c != '_' {
			return invalid(ErrInvalidAccount, "account code %q: byte %q at %d is not a letter, digit, '.', '-' or '_'", code, c, i)
		}
	}
	return nil
}

func isAlphanumeric(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// validateText checks free text: UTF-8, no control characters, length in
// lengthMin..lengthMax bytes.
func validateText(sentinel error, field, text string, lengthMin, lengthMax int) error {
	if len(text) < lengthMin || len(text) > lengthMax {
		return invalid(sentinel, "%s of %d bytes outside %d..%d", field, len(text), lengthMin, lengthMax)
	}
	if !utf8.ValidString(text) {
		return invalid(sentinel, "%s is not valid UTF-8", field)
	}
	for i, r := range text {
		if unicode.IsControl(r) {
			return invalid(sentinel, "%s has control character %U at byte %d", field, r, i)
		}
	}
	return nil
}

// Currency is a unit of account of a book with its minor-unit exponent:
// EUR has 2 (amounts are whole cents), JPY 0, BHD 3. Its definition is a
// journal entry and can never change, since changing the exponent would
// change the meaning of every stored amount.
type Currency struct {
	// Code is CurrencyCodeLengthMin..CurrencyCodeLengthMax upper-case ASCII
	// letters and digits.
	Code       string `json:"code"`
	Exponent   uint8  `json:"exponent"`
	DefinedSeq uint64 `json:"defined_seq"` // state, ignored on AddCurrency
}

func (c *Currency) validate() error {
	if err := validateCurrencyCode(c.Code); err != nil {
		return err
	}
	if c.Exponent > ExponentMax {
		return invalid(ErrInvalidCurrency, "currency %s: exponent %d exceeds %d", c.Code, c.Exponent, ExponentMax)
	}
	return nil
}

func validateCurrencyCode(code string) error {
	if len(code) < CurrencyCodeLengthMin || len(code) > CurrencyCodeLengthMax {
		return invalid(ErrInvalidCurrency, "currency code %q: length %d outside %d..%d",
			code, len(code), CurrencyCodeLengthMin, CurrencyCodeLengthMax)
	}
	for i := 0; i < len(code); i++ {
		if c := code[i]; !('A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return invalid(ErrInvalidCurrency, "currency code %q: byte %q at %d is not an upper-case letter or digit", code, c, i)
		}
	}
	return nil
}
