package financial

import (
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/chain"
)

// TestCheckFindsTamperedState changes one piece of derived state at a time
// and expects Check to name it.
func TestCheckFindsTamperedState(t *testing.T) {
	type tamper struct {
		name   string
		edit   func(tx *chain.Tx, b *Book) error
		chain  string // expected failure chain; the book's journal when empty
		detail string
	}
	date := MustParseDate("2026-03-10")
	cases := []tamper{
		{"balance changed", func(tx *chain.Tx, b *Book) error {
			return tx.StatePut(b.balanceKey("1400", "EUR"), balanceState{balance: 10001, postings: 2, lastSeq: 12}.encode())
		}, "", "balance of 1400 in EUR is 10001 minor units"},
		{"balance removed", func(tx *chain.Tx, b *Book) error { return tx.StateDelete(b.balanceKey("2100", "EUR")) }, "", "balance of 2100/EUR is missing"},
		{"balance invented", func(tx *chain.Tx, b *Book) error {
			return tx.StatePut(b.balanceKey("3000", "EUR"), balanceState{balance: 1, postings: 1, lastSeq: 11}.encode())
		}, "", "balance of 3000 in EUR, which has no postings"},
		{"seq index entry removed", func(tx *chain.Tx, b *Book) error { return tx.StateDelete(b.seqKey("1400", "EUR", 13)) }, "", "is missing"},
		{"seq index entry changed", func(tx *chain.Tx, b *Book) error {
			return tx.StatePut(b.seqKey("1400", "EUR", 13), encodeSeqValue(balanceState{balance: 5, postings: 1}))
		}, "", "seq/1400/EUR/"},
		{"day index entry moved", func(tx *chain.Tx, b *Book) error {
			if err := tx.StateDelete(b.dayKey("1400", "EUR", date, 13)); err != nil {
				return err
			}
			return tx.StatePut(b.dayKey("1400", "EUR", date+1, 13), []byte{0, 0, 0, 0, 0, 0, 0x27, 0x10})
		}, "", "day/1400/EUR/"},
		{"date total changed", func(tx *chain.Tx, b *Book) error {
			return tx.StatePut(b.sumKey("2100", "EUR", 2, node(2, date.index())), sumNode{total: wideOf(-1), postings: 1}.encode())
		}, "", "sum/2100/EUR/"},
		{"date total invented", func(tx *chain.Tx, b *Book) error {
			return tx.StatePut(b.sumKey("2100", "EUR", 0, 7), sumNode{total: wideOf(0), postings: 0}.encode())
		}, "", "date totals of 2100/EUR hold 6 nodes, the day index implies 5"},
		{"account reopened", func(tx *chain.Tx, b *Book) error {
			a, err := b.AccountTx(tx, "9000")
			if err != nil {
				return err
			}
			a.Closed, a.ClosedSeq = false, 0
			return tx.StatePut(b.accountKey("9000"), encodeAccountState(&a))
		}, "", "state of account 9000"},
		{"currency removed", func(tx *chain.Tx, b *Book) error { return tx.StateDelete(b.currencyKey("JPY")) }, "", "state of currency JPY is missing"},
		{"unknown section", func(tx *chain.Tx, b *Book) error { return tx.StatePut([]byte(b.prefix+"misc/x"), []byte("1")) }, "", "unknown state key"},
		{"book without journal", func(tx *chain.Tx, b *Book) error {
			return tx.StatePut([]byte("fin/acme/ghost/bal/1000/EUR"), balanceState{balance: 1, postings: 1, lastSeq: 1}.encode())
		}, "acme/fin/ghost/journal", "book that has no journal"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, db *chain.DB) {
				b := mustBook(t, db, "acme", "main")
				chart(t, b)
				if _, err := b.AddAccount(ctx, Account{Code: "9000", Name: "Suspense", Type: Liability}); err != nil {
					t.Fatal(err)
				}
				if _, err := b.CloseAccount(ctx, "9000"); err != nil {
					t.Fatal(err)
				}
				p, err := b.Post(ctx, posting("p1", date.String(), dr("1400", "100.00", "EUR"), cr("2100", "100.00", "EUR")))
				if err != nil || p.Seq != 13 {
					t.Fatalf("%+v %v", p, err)
				}
				if _, err := b.Post(ctx, posting("p2", "2026-01-02", dr("1400", "1.00", "EUR"), cr("2100", "1.00", "EUR"))); err != nil {
					t.Fatal(err)
				}
				mustCheckClean(t, db)
				if err := db.Update(ctx, func(tx *chain.Tx) error { return c.edit(tx, b) }); err != nil {
					t.Fatal(err)
				}
				failures, err := Check(ctx, db)
				if err != nil {
					t.Fatal(err)
				}
				want := c.chain
				if want == "" {
					want = b.Journal()
				}
				if !mentions(failures, want, c.detail) {
					t.Fatalf("no failure on %s mentions %q: %v", want, c.detail, failures)
				}
				if c.chain == "" { // the book's own check finds it too
					own, err := b.Check(ctx)
					if err != nil || !mentions(own, want, c.detail) {
						t.Fatalf("the book's check: %v %v", own, err)
					}
				}
			})
		})
	}
}

func mentions(failures []chain.Failure, chainName, detail string) bool {
	for _, f := range failures {
		if f.Reason == chain.ReasonStateMismatch && f.Chain == chainName && strings.Contains(f.Detail, detail) {
			return true
		}
	}
	return false
}

// TestCheckFindsRuleBreakingEntries appends, with the bare chain API, entries
// that PostTx would refuse, and expects Check to report them.
func TestCheckFindsRuleBreakingEntries(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *chain.DB) {
		b := mustBook(t, db, "acme", "main")
		chart(t, b)
		closing := posting("p1", "2026-03-01", dr("1400", "1.00", "EUR"), cr("2100", "1.00", "EUR"))
		unknown := posting("p2", "2026-03-01", dr("7777", "1.00", "EUR"), cr("2100", "1.00", "EUR"))
		for _, req := range []chain.Request{
			{Chain: b.Journal(), IdempotencyKey: "wrong:p1", Type: TypePosting, Payload: EncodePosting(&closing)},
			{Chain: b.Journal(), IdempotencyKey: "posting:p2", Type: TypePosting, Payload: EncodePosting(&unknown)},
			{Chain: b.Journal(), IdempotencyKey: "x", Type: "other/v1", Payload: []byte("?")},
			{Chain: b.Journal(), IdempotencyKey: "posting:p3", Type: TypePosting, Payload: []byte{1, 2, 3}},
		} {
			if _, err := db.Append(ctx, req); err != nil {
				t.Fatal(err)
			}
		}
		failures, err := Check(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		text := ""
		for _, f := range failures {
			text += f.String() + "\n"
		}
		for _, want := range []string{`seq 11: state_mismatch: posting key "wrong:p1"`, "seq 12: state_mismatch: line 1: account 7777 is not defined",
			`seq 13: state_mismatch: entry type "other/v1"`, "seq 14: state_mismatch: financial: invalid payload", "balance of 1400/EUR is missing"} {
			if !strings.Contains(text, want) {
				t.Errorf("failures lack %q:\n%s", want, text)
			}
		}
	})
}
