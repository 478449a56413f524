package financial

import (
	"context"
	"errors"
	"strings"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
)

// LineTextLengthMax bounds the text ParseLine accepts.
const LineTextLengthMax = AccountCodeLengthMax + 1 + decimal.TextLengthMax + 1 + CurrencyCodeLengthMax

// ParseLine parses a posting line written account:amount:currency, such
// as 1400:100.00:EUR, on the given side. The amount is parsed exactly at
// the exponent that exponentOf returns for the currency (typically the
// book's definition): more decimals than the exponent is ErrExponent, never
// a rounding; fewer are padded ("100" is 100.00).
func ParseLine(side Side, text string, exponentOf func(currency string) (uint8, error)) (Line, error) {
	if len(text) > LineTextLengthMax {
		return Line{}, invalid(ErrInvalidPosting, "line of %d bytes exceeds %d", len(text), LineTextLengthMax)
	}
	if !side.valid() {
		return Line{}, invalid(ErrInvalidPosting, "side %d is not debit or credit", uint8(side))
	}
	fields := strings.Split(text, ":")
	if len(fields) != 3 {
		return Line{}, invalid(ErrInvalidPosting, "line %q is not account:amount:currency", text)
	}
	account, amount, currency := fields[0], fields[1], fields[2]
	if err := validateAccountCode(account); err != nil {
		return Line{}, err
	}
	if err := validateCurrencyCode(currency); err != nil {
		return Line{}, err
	}
	exponent, err := exponentOf(currency)
	if err != nil {
		return Line{}, err
	}
	value, err := decimal.Parse(amount, exponent)
	switch {
	case errors.Is(err, decimal.ErrScale):
		return Line{}, &Error{Err: ErrExponent, Class: invalidClass, Cause: err,
			Detail: "amount " + amount + " has more decimals than " + currency + " allows"}
	case errors.Is(err, decimal.ErrOverflow):
		return Line{}, &Error{Err: ErrOverflow, Class: invalidClass, Cause: err,
			Detail: "amount " + amount + " " + currency + " exceeds the range of minor units"}
	case err != nil:
		return Line{}, &Error{Err: ErrInvalidPosting, Class: invalidClass, Cause: err,
			Detail: "amount " + amount + " is not a decimal number"}
	}
	l := Line{Account: account, Side: side, Amount: value, Currency: currency}
	if value.Sign() <= 0 {
		return Line{}, invalid(ErrAmount, "amount %s %s on account %s is not positive", value, currency, account)
	}
	return l, nil
}

// ParseLines parses the text of debit and credit lines (see ParseLine) at
// the exponents of the book's currencies, debits first, each side in the
// order given. A currency the book does not define is an input error
// (ErrCurrencyNotFound, chain.ErrInvalid).
func (b *Book) ParseLines(ctx context.Context, debits, credits []string) ([]Line, error) {
	return view(ctx, b, func(tx *chain.Tx) ([]Line, error) {
		exponentOf := func(code string) (uint8, error) {
			c, err := b.CurrencyTx(tx, code)
			if errors.Is(err, ErrCurrencyNotFound) {
				return 0, invalid(ErrCurrencyNotFound, "currency %s is not defined in book %s/%s", code, b.tenant, b.name)
			}
			return c.Exponent, err
		}
		lines := make([]Line, 0, len(debits)+len(credits))
		for i, text := range append(append([]string(nil), debits...), credits...) {
			side := Debit
			if i >= len(debits) {
				side = Credit
			}
			l, err := ParseLine(side, text, exponentOf)
			if err != nil {
				return nil, withLine(err, i+1)
			}
			lines = append(lines, l)
		}
		return lines, nil
	})
}
