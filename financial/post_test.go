package financial

import (
	"errors"
	"testing"

	"github.com/ledgerworks/ledger/chain"
)

func TestPostBalancesAndTrialBalance(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *chain.DB) {
		b := mustBook(t, db, "acme", "main")
		chart(t, b)
		first, err := b.Post(ctx, posting("p1", "2026-03-10", dr("1400", "100.00", "EUR"), cr("2100", "100.00", "EUR")))
		if err != nil {
			t.Fatal(err)
		}
		second, err := b.Post(ctx, posting("p2", "2026-03-20",
			dr("1000", "30.00", "EUR"), dr("5000", "20.00", "EUR"), cr("4000", "50.00", "EUR"),
			dr("1000", "500", "JPY"), cr("3000", "500", "JPY")))
		if err != nil {
			t.Fatal(err)
		}
		if first.Replayed || second.Replayed || second.Seq != first.Seq+1 {
			t.Fatalf("results %+v %+v", first, second)
		}
		for _, want := range []struct {
			account, currency, amount, normal string
			postings                          uint64
		}{
			{"1400", "EUR", "100.00", "100.00", 1},
			{"2100", "EUR", "-100.00", "100.00", 1},
			{"1000", "EUR", "30.00", "30.00", 1},
			{"4000", "EUR", "-50.00", "50.00", 1},
			{"1000", "JPY", "500", "500", 1},
			{"3000", "JPY", "-500", "500", 1},
			{"3000", "EUR", "0.00", "0.00", 0},
		} {
			got := mustBalance(t, b, want.account, want.currency)
			if got.Amount.String() != want.amount || got.Normal.String() != want.normal || got.Postings != want.postings {
				t.Errorf("%s %s: %+v, want %s normal %s over %d", want.account, want.currency, got, want.amount, want.normal, want.postings)
			}
		}
		tb, err := b.TrialBalance(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(tb.Rows) != 7 || len(tb.Totals) != 2 || tb.Seq != second.Seq {
			t.Fatalf("trial balance %+v", tb)
		}
		for _, total := range tb.Totals {
			if !total.Net.IsZero() || total.Debit.String() != map[string]string{"EUR": "150.00", "JPY": "500"}[total.Currency] {
				t.Errorf("total %+v", total)
			}
		}
		got, err := b.Posting(ctx, second.Seq)
		if err != nil || got.Posting.Key != "p2" || len(got.Posting.Lines) != 5 || got.Posting.Memo != "memo p2" {
			t.Fatalf("posting %+v %v", got, err)
		}
		byKey, err := b.PostingByKey(ctx, "p1")
		if err != nil || byKey.Seq != first.Seq {
			t.Fatalf("by key %+v %v", byKey, err)
		}
		mustCheckClean(t, db)
	})
}

func TestBalanceAtSeqAndDate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *chain.DB) {
		b := mustBook(t, db, "acme", "main")
		chart(t, b)
		post := func(key, date, amount string) PostingResult {
			t.Helper()
			r, err := b.Post(ctx, posting(key, date, dr("1000", amount, "EUR"), cr("4000", amount, "EUR")))
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		march := post("a", "2026-03-15", "10.00")
		may := post("b", "2026-05-01", "20.00")
		// Arrives last, dated first: it changes every balance by date from
		// February on, and no balance by seq before its own.
		feb := post("c", "2026-02-01", "5.00")

		for _, c := range []struct {
			seq      uint64
			amount   string
			postings uint64
		}{{march.Seq - 1, "0.00", 0}, {march.Seq, "10.00", 1}, {may.Seq, "30.00", 2}, {feb.Seq, "35.00", 3}, {feb.Seq + 100, "35.00", 3}} {
			got, err := b.BalanceAtSeq(ctx, "1000", "EUR", c.seq)
			if err != nil || got.Amount.String() != c.amount || got.Postings != c.postings {
				t.Errorf("at seq %d: %+v %v, want %s", c.seq, got, err, c.amount)
			}
		}
		for _, c := range []struct {
			date, amount string
			postings     uint64
		}{
			{"1900-01-01", "0.00", 0}, {"2026-01-31", "0.00", 0}, {"2026-02-01", "5.00", 1},
			{"2026-03-14", "5.00", 1}, {"2026-03-15", "15.00", 2}, {"2026-04-30", "15.00", 2},
			{"2026-05-01", "35.00", 3}, {DateMax.String(), "35.00", 3},
		} {
			got, err := b.BalanceAtDate(ctx, "1000", "EUR", MustParseDate(c.date))
			if err != nil || got.Amount.String() != c.amount || got.Postings != c.postings || got.Seq != feb.Seq {
				t.Errorf("as of %s: %+v %v, want %s", c.date, got, err, c.amount)
			}
			income, err := b.BalanceAtDate(ctx, "4000", "EUR", MustParseDate(c.date))
			if err != nil || income.Normal.String() != c.amount {
				t.Errorf("income as of %s: %+v %v", c.date, income, err)
			}
		}
		mustCheckClean(t, db)
	})
}

func TestPostReplayAndConflict(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *chain.DB) {
		b := mustBook(t, db, "acme", "main")
		chart(t, b)
		p := posting("invoice-7", "2026-03-10", dr("1400", "100.00", "EUR"), cr("2100", "100.00", "EUR"))
		original, err := b.Post(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, db)
		again, err := b.Post(ctx, p)
		if err != nil || !again.Replayed || again.Seq != original.Seq || again.Hash != original.Hash {
			t.Fatalf("replay %+v %v", again, err)
		}
		if snapshot(t, db) != before {
			t.Fatalf("the replay changed the ledger")
		}
		// The retry is answered even after the account was closed.
		if _, err := b.CloseAccount(ctx, "2100"); err != nil {
			t.Fatal(err)
		}
		before = snapshot(t, db)
		again, err = b.Post(ctx, p)
		if err != nil || !again.Replayed || again.Seq != original.Seq {
			t.Fatalf("replay after close %+v %v", again, err)
		}
		changed := p
		changed.Lines = []Line{dr("1400", "100.01", "EUR"), cr("2100", "100.01", "EUR")}
		_, err = b.Post(ctx, changed)
		wantError(t, err, chain.ErrIdempotencyConflict)
		var conflict *chain.ConflictError
		if !errors.As(err, &conflict) || conflict.ExistingSeq != original.Seq {
			t.Fatalf("conflict %v", err)
		}
		if after := snapshot(t, db); after != before {
			t.Fatalf("refused requests changed the ledger")
		}
		if bal := mustBalance(t, b, "1400", "EUR"); bal.Amount.String() != "100.00" || bal.Postings != 1 {
			t.Fatalf("balance %+v", bal)
		}
		mustCheckClean(t, db)
	})
}

func TestReverse(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *chain.DB) {
		b := mustBook(t, db, "acme", "main")
		chart(t, b)
		original, err := b.Post(ctx, posting("p1", "2026-03-10", dr("1400", "100.00", "EUR"), cr("2100", "60.00", "EUR"), cr("3000", "40.00", "EUR")))
		if err != nil {
			t.Fatal(err)
		}
		r := Reversal{Key: "p1", Date: MustParseDate("2026-03-31"), Memo: "wrong supplier"}
		reversal, err := b.Reverse(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if reversal.Posting.Reverses != original.Seq || reversal.Posting.Key != "" || reversal.Posting.Reference != "ref-p1" ||
			reversal.Posting.Lines[0].Side != Credit || reversal.Posting.Lines[1].Side != Debit {
			t.Fatalf("reversal %+v", reversal)
		}
		for _, account := range []string{"1400", "2100", "3000"} {
			if bal := mustBalance(t, b, account, "EUR"); !bal.Amount.IsZero() || bal.Postings != 2 {
				t.Errorf("%s after reversal: %+v", account, bal)
			}
		}
		if bal, err := b.BalanceAtDate(ctx, "1400", "EUR", MustParseDate("2026-03-30")); err != nil || bal.Amount.String() != "100.00" {
			t.Errorf("before the reversal's date: %+v %v", bal, err)
		}
		before := snapshot(t, db)
		bySeq := r
		bySeq.Key, bySeq.Seq = "", original.Seq
		again, err := b.Reverse(ctx, bySeq)
		if err != nil || !again.Replayed || again.Seq != reversal.Seq {
			t.Fatalf("second reversal %+v %v", again, err)
		}
		other := r
		other.Date = MustParseDate("2026-04-01")
		_, err = b.Reverse(ctx, other)
		wantError(t, err, chain.ErrIdempotencyConflict)
		_, err = b.Reverse(ctx, Reversal{Seq: reversal.Seq, Date: r.Date})
		wantError(t, err, ErrNotReversible, chain.ErrInvalid)
		_, err = b.Reverse(ctx, Reversal{Seq: 1, Date: r.Date}) // seq 1 defines a currency
		wantError(t, err, ErrPostingNotFound, chain.ErrNotFound)
		_, err = b.Reverse(ctx, Reversal{Key: "nope", Date: r.Date})
		wantError(t, err, ErrPostingNotFound, chain.ErrNotFound)
		_, err = b.Reverse(ctx, Reversal{Seq: 1, Key: "p1", Date: r.Date})
		wantError(t, err, ErrInvalidPosting, chain.ErrInvalid)
		if snapshot(t, db) != before {
			t.Fatal("refused reversals changed the ledger")
		}
		mustCheckClean(t, db)
	})
}

func TestAccountsAndCurrencies(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *chain.DB) {
		b := mustBook(t, db, "acme", "main")
		chart(t, b)
		res, err := b.AddAccount(ctx, Account{Code: "1000", Name: "Cash", Type: Asset, NormalSide: Debit})
		if err != nil || !res.Replayed || res.Account.DefinedSeq != res.Seq {
			t.Fatalf("replayed add %+v %v", res, err)
		}
		before := snapshot(t, db)
		_, err = b.AddAccount(ctx, Account{Code: "1000", Name: "Petty cash", Type: Asset})
		wantError(t, err, chain.ErrIdempotencyConflict)
		_, err = b.AddCurrency(ctx, Currency{Code: "EUR", Exponent: 3})
		wantError(t, err, chain.ErrIdempotencyConflict)
		_, err = b.CloseAccount(ctx, "9999")
		wantError(t, err, ErrAccountNotFound, chain.ErrNotFound)
		_, err = b.Account(ctx, "9999")
		wantError(t, err, ErrAccountNotFound, chain.ErrNotFound)
		_, err = b.Balance(ctx, "1000", "GBP")
		wantError(t, err, ErrCurrencyNotFound, chain.ErrNotFound)
		if snapshot(t, db) != before {
			t.Fatal("refused definitions changed the ledger")
		}
		closed, err := b.CloseAccount(ctx, "1000")
		if err != nil || !closed.Account.Closed || closed.Account.ClosedSeq != closed.Seq {
			t.Fatalf("close %+v %v", closed, err)
		}
		again, err := b.CloseAccount(ctx, "1000")
		if err != nil || !again.Replayed || again.Seq != closed.Seq {
			t.Fatalf("close again %+v %v", again, err)
		}
		accounts, err := b.Accounts(ctx)
		if err != nil || len(accounts) != 7 || accounts[0].Code != "1000" || !accounts[0].Closed || accounts[2].NormalSide != Credit {
			t.Fatalf("accounts %+v %v", accounts, err)
		}
		currencies, err := b.Currencies(ctx)
		if err != nil || len(currencies) != 3 || currencies[1].Code != "JPY" || currencies[1].Exponent != 0 {
			t.Fatalf("currencies %+v %v", currencies, err)
		}
		mustCheckClean(t, db)
	})
}

func TestBooksAndTenantsAreSeparate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *chain.DB) {
		main, other, tenant := mustBook(t, db, "acme", "main"), mustBook(t, db, "acme", "other"), mustBook(t, db, "globex", "main")
		chart(t, main)
		chart(t, tenant)
		p := posting("k", "2026-01-01", dr("1000", "1.00", "EUR"), cr("4000", "1.00", "EUR"))
		a, err := main.Post(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		c, err := tenant.Post(ctx, p)
		if err != nil || c.Replayed || c.Seq != a.Seq {
			t.Fatalf("same key in another tenant: %+v %v", c, err)
		}
		_, err = other.Post(ctx, p)
		wantError(t, err, ErrAccountNotFound, chain.ErrInvalid)
		if _, err := NewBook(db, "acme/x", "main"); !errors.Is(err, ErrInvalidBook) || !errors.Is(err, chain.ErrInvalid) {
			t.Fatalf("tenant with a separator: %v", err)
		}
		mustCheckClean(t, db)
	})
}

func TestPostTxIsAtomicWithOtherChains(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *chain.DB) {
		b := mustBook(t, db, "acme", "main")
		chart(t, b)
		stock := chain.Request{Chain: "acme/stock/SKU-1/WH-1", IdempotencyKey: "receipt-1", Type: "test.stock/v1", Payload: []byte("+10")}
		err := db.Update(ctx, func(tx *chain.Tx) error {
			if _, err := tx.Append(stock); err != nil {
				return err
			}
			_, err := b.PostTx(tx, posting("receipt-1", "2026-03-01", dr("1400", "100.00", "EUR"), cr("2100", "100.00", "EUR")))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, db)
		// A refused posting fails the whole business event: the stock entry
		// written before it in the same transaction is rolled back too.
		err = db.Update(ctx, func(tx *chain.Tx) error {
			stock.IdempotencyKey = "receipt-2"
			if _, err := tx.Append(stock); err != nil {
				return err
			}
			_, err := b.PostTx(tx, posting("receipt-2", "2026-03-01", dr("1400", "100.00", "EUR"), cr("2100", "99.00", "EUR")))
			return err
		})
		wantError(t, err, ErrUnbalanced, chain.ErrInvalid)
		if snapshot(t, db) != before {
			t.Fatal("a failed business event left entries behind")
		}
		if h, err := db.Head(ctx, stock.Chain); err != nil || h.Seq != 1 {
			t.Fatalf("stock head %+v %v", h, err)
		}
		mustCheckClean(t, db)
	})
}
