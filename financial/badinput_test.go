package financial

import (
	"math"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
)

// TestBadInputWritesNothing refuses each malformed or rule-breaking posting
// with its typed error, an error matching chain.ErrInvalid and a message
// naming the offending value, and checks that no head, entry or state
// changed.
func TestBadInputWritesNothing(t *testing.T) {
	maxEUR := decimal.MustNew(math.MaxInt64, 2)
	half := decimal.MustNew(math.MaxInt64/2+1, 2)
	cases := []struct {
		name    string
		posting Posting
		err     error
		message string
	}{
		{"unbalanced", posting("k", "2026-03-01", dr("1400", "100.00", "EUR"), cr("2100", "99.99", "EUR")), ErrUnbalanced, "difference 0.01"},
		{"balanced only across currencies", posting("k", "2026-03-01", dr("1400", "100.00", "EUR"), cr("2100", "100.00", "USD")), ErrUnbalanced, "EUR debits 100.00, credits 0.00"},
		{"single line", posting("k", "2026-03-01", dr("1400", "100.00", "EUR")), ErrInvalidPosting, "1 lines"},
		{"no lines", posting("k", "2026-03-01"), ErrInvalidPosting, "0 lines"},
		{"too many lines", posting("k", "2026-03-01", manyLines(LinesMax+1)...), ErrInvalidPosting, "257 lines"},
		{"zero amount", posting("k", "2026-03-01", dr("1400", "0.00", "EUR"), cr("2100", "0.00", "EUR")), ErrAmount, "0.00 EUR"},
		{"negative amount", posting("k", "2026-03-01", dr("1400", "-5.00", "EUR"), cr("2100", "-5.00", "EUR")), ErrAmount, "-5.00 EUR"},
		{"unknown account", posting("k", "2026-03-01", dr("1401", "1.00", "EUR"), cr("2100", "1.00", "EUR")), ErrAccountNotFound, "account 1401"},
		{"closed account", posting("k", "2026-03-01", dr("1400", "1.00", "EUR"), cr("9000", "1.00", "EUR")), ErrAccountClosed, "account 9000"},
		{"account of another book", posting("k", "2026-03-01", dr("1400", "1.00", "EUR"), cr("8000", "1.00", "EUR")), ErrAccountNotFound, "account 8000 is not defined in book acme/main"},
		{"unknown currency", posting("k", "2026-03-01", dr("1400", "1.00", "GBP"), cr("2100", "1.00", "GBP")), ErrCurrencyNotFound, "currency GBP"},
		{"wrong exponent", posting("k", "2026-03-01",
			Line{Account: "1400", Side: Debit, Amount: money("1.000", 3), Currency: "EUR"},
			Line{Account: "2100", Side: Credit, Amount: money("1.000", 3), Currency: "EUR"}), ErrExponent, "EUR has exponent 2"},
		{"mixed scales in one currency", posting("k", "2026-03-01",
			Line{Account: "1400", Side: Debit, Amount: money("1.0", 1), Currency: "EUR"},
			cr("2100", "1.00", "EUR")), ErrExponent, "EUR amount 1.00 has 2 decimals"},
		{"line totals overflow", posting("k", "2026-03-01",
			Line{Account: "1400", Side: Debit, Amount: half, Currency: "EUR"},
			Line{Account: "1400", Side: Debit, Amount: half, Currency: "EUR"},
			Line{Account: "2100", Side: Credit, Amount: maxEUR, Currency: "EUR"},
			Line{Account: "2100", Side: Credit, Amount: decimal.MustNew(1, 2), Currency: "EUR"}), ErrOverflow, "debits in EUR"},
		{"balance overflow", posting("k", "2026-03-01", dr("1000", "0.01", "EUR"), cr("3000", "0.01", "EUR")), ErrOverflow, "account 1000 balance 9223372036854775807 + 1"},
		{"empty key", posting("", "2026-03-01", dr("1400", "1.00", "EUR"), cr("2100", "1.00", "EUR")), ErrInvalidPosting, "idempotency key of 0 bytes"},
		{"key too long", posting(strings.Repeat("k", PostingKeyLengthMax+1), "2026-03-01", dr("1400", "1.00", "EUR"), cr("2100", "1.00", "EUR")), ErrInvalidPosting, "241 bytes"},
		{"control character in memo", withMemo(posting("k", "2026-03-01", dr("1400", "1.00", "EUR"), cr("2100", "1.00", "EUR")), "a\nb"), ErrInvalidPosting, "memo has control character"},
		{"memo too long", withMemo(posting("k", "2026-03-01", dr("1400", "1.00", "EUR"), cr("2100", "1.00", "EUR")), strings.Repeat("m", MemoLengthMax+1)), ErrInvalidPosting, "memo of 513 bytes"},
		{"date before range", withDate(posting("k", "2026-03-01", dr("1400", "1.00", "EUR"), cr("2100", "1.00", "EUR")), DateMin-1), ErrInvalidDate, "outside 1900-01-01"},
		{"date after range", withDate(posting("k", "2026-03-01", dr("1400", "1.00", "EUR"), cr("2100", "1.00", "EUR")), DateMax+1), ErrInvalidDate, "outside"},
		{"no side", posting("k", "2026-03-01", Line{Account: "1400", Amount: money("1.00", 2), Currency: "EUR"}, cr("2100", "1.00", "EUR")), ErrInvalidPosting, "side 0"},
		{"account code with separator", posting("k", "2026-03-01", dr("14/00", "1.00", "EUR"), cr("2100", "1.00", "EUR")), ErrInvalidAccount, "14/00"},
		{"lower-case currency", posting("k", "2026-03-01", dr("1400", "1.00", "eur"), cr("2100", "1.00", "eur")), ErrInvalidCurrency, "eur"},
		{"reverses set by the caller", withReverses(posting("k", "2026-03-01", dr("1400", "1.00", "EUR"), cr("2100", "1.00", "EUR"))), ErrInvalidPosting, "Reverse"},
	}
	forEachBackend(t, func(t *testing.T, db *chain.DB) {
		b := mustBook(t, db, "acme", "main")
		chart(t, b)
		if _, err := b.AddAccount(ctx, Account{Code: "9000", Name: "Old suspense", Type: Liability}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.CloseAccount(ctx, "9000"); err != nil {
			t.Fatal(err)
		}
		if _, err := mustBook(t, db, "acme", "other").AddAccount(ctx, Account{Code: "8000", Name: "Elsewhere", Type: Asset}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Post(ctx, Posting{Key: "opening", Date: MustParseDate("2026-01-01"), Lines: []Line{
			{Account: "1000", Side: Debit, Amount: maxEUR, Currency: "EUR"},
			{Account: "3000", Side: Credit, Amount: maxEUR, Currency: "EUR"}}}); err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, db)
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				_, err := b.Post(ctx, c.posting)
				wantError(t, err, c.err, chain.ErrInvalid)
				if !strings.Contains(err.Error(), c.message) {
					t.Errorf("message %q does not name %q", err, c.message)
				}
				inTx := db.Update(ctx, func(tx *chain.Tx) error {
					_, err := b.PostTx(tx, c.posting)
					return err
				})
				wantError(t, inTx, c.err, chain.ErrInvalid)
				if after := snapshot(t, db); after != before {
					t.Fatalf("refused posting changed the ledger:\nbefore %s\nafter %s", before, after)
				}
			})
		}
		if bal := mustBalance(t, b, "1400", "EUR"); !bal.Amount.IsZero() || bal.Postings != 0 {
			t.Fatalf("balance %+v", bal)
		}
		mustCheckClean(t, db)
	})
}

func TestBadDefinitionsWriteNothing(t *testing.T) {
	accounts := []struct {
		account Account
		err     error
	}{
		{Account{Code: "", Name: "x", Type: Asset}, ErrInvalidAccount},
		{Account{Code: strings.Repeat("1", AccountCodeLengthMax+1), Name: "x", Type: Asset}, ErrInvalidAccount},
		{Account{Code: "1:0", Name: "x", Type: Asset}, ErrInvalidAccount},
		{Account{Code: "10", Name: "", Type: Asset}, ErrInvalidAccount},
		{Account{Code: "10", Name: "x\x00", Type: Asset}, ErrInvalidAccount},
		{Account{Code: "10", Name: "x", Type: 0}, ErrInvalidAccount},
		{Account{Code: "10", Name: "x", Type: accountTypeEnd}, ErrInvalidAccount},
		{Account{Code: "10", Name: "x", Type: Asset, NormalSide: 3}, ErrInvalidAccount},
	}
	currencies := []struct {
		currency Currency
		err      error
	}{
		{Currency{Code: "EU", Exponent: 2}, ErrInvalidCurrency},
		{Currency{Code: "eur", Exponent: 2}, ErrInvalidCurrency},
		{Currency{Code: strings.Repeat("X", CurrencyCodeLengthMax+1), Exponent: 2}, ErrInvalidCurrency},
		{Currency{Code: "XAU", Exponent: ExponentMax + 1}, ErrInvalidCurrency},
	}
	forEachBackend(t, func(t *testing.T, db *chain.DB) {
		b := mustBook(t, db, "acme", "main")
		chart(t, b)
		before := snapshot(t, db)
		for _, c := range accounts {
			_, err := b.AddAccount(ctx, c.account)
			wantError(t, err, c.err, chain.ErrInvalid)
		}
		for _, c := range currencies {
			_, err := b.AddCurrency(ctx, c.currency)
			wantError(t, err, c.err, chain.ErrInvalid)
		}
		_, err := b.CloseAccount(ctx, "a/b")
		wantError(t, err, ErrInvalidAccount, chain.ErrInvalid)
		if snapshot(t, db) != before {
			t.Fatal("refused definitions changed the ledger")
		}
	})
}

func manyLines(n int) []Line {
	lines := make([]Line, n)
	for i := range lines {
		lines[i] = dr("1400", "1.00", "EUR")
	}
	return lines
}

func withMemo(p Posting, memo string) Posting { p.Memo = memo; return p }
func withDate(p Posting, d Date) Posting      { p.Date = d; return p }
func withReverses(p Posting) Posting          { p.Reverses = 1; return p }
