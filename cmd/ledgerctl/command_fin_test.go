package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/financial"
)

// finJSON runs a fin command for tenant acme and decodes its JSON output.
func (l *testLedger) finJSON(value any, args ...string) {
	l.t.Helper()
	out := l.must(append([]string{"-o", "json", "fin", "--tenant", "acme"}, args...)...)
	if err := json.Unmarshal([]byte(out), value); err != nil {
		l.t.Fatalf("fin %v: %v in %q", args, err, out)
	}
}

func (l *testLedger) fin(args ...string) cliResult {
	l.t.Helper()
	return l.run(append([]string{"fin", "--tenant", "acme"}, args...)...)
}

// finSetup initializes the ledger with EUR, JPY and four accounts.
func (l *testLedger) finSetup() {
	l.t.Helper()
	l.must("init")
	l.must("fin", "--tenant", "acme", "currency", "add", "EUR", "--exponent", "2")
	l.must("fin", "--tenant", "acme", "currency", "add", "JPY", "--exponent", "0")
	for _, acc := range [][]string{{"1400", "Inventory", "asset"}, {"2100", "Goods received", "liability"},
		{"4000", "Sales", "income"}, {"5000", "Cost of goods sold", "expense"}} {
		l.must("fin", "--tenant", "acme", "account", "add", acc[0], "--name", acc[1], "--type", acc[2])
	}
}

type finPostingOut struct {
	Journal  string `json:"journal"`
	Seq      uint64 `json:"seq,string"`
	Key      string `json:"key"`
	Date     string `json:"date"`
	Memo     string `json:"memo"`
	Reverses uint64 `json:"reverses,string"`
	Lines    []struct {
		Account, Side, Amount, Currency string
	} `json:"lines"`
	Replayed bool `json:"replayed"`
}

type finBalanceOut struct {
	Account, Currency, Amount, Normal string
	NormalSide                        string `json:"normal_side"`
	Postings                          uint64 `json:",string"`
	Seq                               uint64 `json:",string"`
	Date                              string
}

func TestFinPostingsBalancesAndTrialBalance(t *testing.T) {
	for _, l := range testLedgers(t) {
		t.Run(l.backend, func(t *testing.T) {
			l.t = t
			l.finSetup()
			var first, retry finPostingOut
			post := []string{"post", "--key", "grn-1", "--date", "2026-11-02", "--memo", "goods received",
				"--debit", "1400:1250:EUR", "--credit", "2100:1250.00:EUR"}
			l.finJSON(&first, post...)
			l.finJSON(&retry, post...)
			if first.Replayed || !retry.Replayed || retry.Seq != first.Seq || first.Seq != 7 || first.Journal != "acme/fin/main/journal" ||
				len(first.Lines) != 2 || first.Lines[0].Amount != "1250.00" || first.Lines[1].Side != "credit" {
				t.Fatalf("posting %+v, retry %+v", first, retry)
			}
			l.must("fin", "--tenant", "acme", "post", "--key", "inv-1", "--date", "2026-10-30",
				"--debit", "5000:400.00:EUR", "--credit", "1400:400.00:EUR", "--debit", "1400:3:JPY", "--credit", "4000:3:JPY")
			var current, atSeq, asOf finBalanceOut
			l.finJSON(&current, "balance", "1400", "EUR")
			l.finJSON(&atSeq, "balance", "1400", "EUR", "--at-seq", "7")
			l.finJSON(&asOf, "balance", "1400", "EUR", "--as-of", "2026-11-01")
			if current.Amount != "850.00" || current.Postings != 2 || atSeq.Amount != "1250.00" || atSeq.Seq != 7 ||
				asOf.Amount != "-400.00" || asOf.Date != "2026-11-01" || asOf.Seq != 8 {
				t.Fatalf("balances: current %+v, at seq 7 %+v, as of 2026-11-01 %+v", current, atSeq, asOf)
			}
			var liability finBalanceOut
			l.finJSON(&liability, "balance", "2100", "EUR")
			if liability.Amount != "-1250.00" || liability.Normal != "1250.00" || liability.NormalSide != "credit" {
				t.Fatalf("liability %+v", liability)
			}
			var all struct{ Balances []finBalanceOut }
			l.finJSON(&all, "balance", "1400")
			if len(all.Balances) != 2 || all.Balances[0].Currency != "EUR" || all.Balances[1].Amount != "3" {
				t.Fatalf("all balances %+v", all)
			}
			var tb struct {
				Seq    uint64 `json:",string"`
				Rows   []finBalanceOut
				Totals []struct{ Currency, Debit, Credit, Net string }
			}
			l.finJSON(&tb, "trial-balance")
			if tb.Seq != 8 || len(tb.Rows) != 5 || len(tb.Totals) != 2 || tb.Totals[0].Net != "0.00" || tb.Totals[0].Debit != "1250.00" ||
				tb.Totals[1].Currency != "JPY" || tb.Totals[1].Net != "0" {
				t.Fatalf("trial balance %+v", tb)
			}
			text := l.must("fin", "--tenant", "acme", "trial-balance")
			for _, part := range []string{"trial balance at journal seq 8", "EUR: debits - credits = 0.00", "JPY: debits - credits = 0"} {
				if !strings.Contains(text, part) {
					t.Fatalf("trial balance text lacks %q:\n%s", part, text)
				}
			}
			var reversal, again finPostingOut
			l.finJSON(&reversal, "reverse", "--key", "grn-1", "--memo", "wrong supplier")
			l.finJSON(&again, "reverse", "--seq", "7", "--memo", "wrong supplier")
			if reversal.Reverses != 7 || reversal.Date != "2026-11-02" || reversal.Lines[0].Side != "credit" || !again.Replayed || again.Seq != reversal.Seq {
				t.Fatalf("reversal %+v, again %+v", reversal, again)
			}
			var shown finPostingOut
			l.finJSON(&shown, "posting", "--seq", "9")
			if shown.Reverses != 7 || shown.Memo != "wrong supplier" {
				t.Fatalf("posting 9: %+v", shown)
			}
			var accounts struct{ Accounts []struct{ Code, Type string } }
			l.finJSON(&accounts, "account", "list")
			if len(accounts.Accounts) != 4 || accounts.Accounts[3].Type != "expense" {
				t.Fatalf("accounts %+v", accounts)
			}
			l.must("verify")
		})
	}
}

func TestFinRefusalsExitCodesAndWriteNothing(t *testing.T) {
	for _, l := range testLedgers(t) {
		t.Run(l.backend, func(t *testing.T) {
			l.t = t
			l.finSetup()
			l.must("fin", "--tenant", "acme", "post", "--key", "p1", "--date", "2026-11-02", "--debit", "1400:1:EUR", "--credit", "2100:1:EUR")
			l.must("fin", "--tenant", "acme", "account", "add", "9000", "--name", "Suspense", "--type", "liability")
			l.must("fin", "--tenant", "acme", "account", "close", "9000")
			before := l.snapshot()
			for _, c := range []struct {
				args   []string
				code   int
				stderr string
			}{
				{[]string{"post", "--key", "p2", "--date", "2026-11-02", "--debit", "1400:1.00:EUR", "--credit", "2100:0.99:EUR"}, exitUsage, "difference 0.01"},
				{[]string{"post", "--key", "p2", "--date", "2026-11-02", "--debit", "1400:1.00:EUR"}, exitUsage, "1 lines"},
				{[]string{"post", "--key", "p2", "--date", "2026-11-02", "--debit", "1400:0:EUR", "--credit", "2100:0:EUR"}, exitUsage, "not positive"},
				{[]string{"post", "--key", "p2", "--date", "2026-11-02", "--debit", "1400:-1:EUR", "--credit", "2100:-1:EUR"}, exitUsage, "not positive"},
				{[]string{"post", "--key", "p2", "--date", "2026-11-02", "--debit", "1400:1.001:EUR", "--credit", "2100:1.001:EUR"}, exitUsage, "more decimals than EUR"},
				{[]string{"post", "--key", "p2", "--date", "2026-11-02", "--debit", "1400:1:GBP", "--credit", "2100:1:GBP"}, exitUsage, "currency GBP is not defined"},
				{[]string{"post", "--key", "p2", "--date", "2026-11-02", "--debit", "1499:1:EUR", "--credit", "2100:1:EUR"}, exitUsage, "account 1499 is not defined"},
				{[]string{"post", "--key", "p2", "--date", "2026-11-02", "--debit", "1400:1:EUR", "--credit", "9000:1:EUR"}, exitUsage, "account 9000 was closed"},
				{[]string{"post", "--key", "p2", "--date", "2026-11-02", "--debit", "1400:92233720368547758.08:EUR", "--credit", "2100:1:EUR"}, exitUsage, "exceeds the range"},
				{[]string{"post", "--key", "p2", "--date", "2026-13-01", "--debit", "1400:1:EUR", "--credit", "2100:1:EUR"}, exitUsage, "not a calendar date"},
				{[]string{"post", "--key", "p2", "--date", "2026-11-02", "--debit", "1400-1-EUR", "--credit", "2100:1:EUR"}, exitUsage, "account:amount:currency"},
				{[]string{"post", "--date", "2026-11-02", "--debit", "1400:1:EUR", "--credit", "2100:1:EUR"}, exitUsage, "--key is required"},
				{[]string{"post", "--key", "p1", "--date", "2026-11-02", "--debit", "1400:2:EUR", "--credit", "2100:2:EUR"}, exitConflict, "held by seq 7"},
				{[]string{"--book", "other", "post", "--key", "p2", "--date", "2026-11-02", "--debit", "1400:1:EUR", "--credit", "2100:1:EUR"}, exitUsage, "not defined in book acme/other"},
				{[]string{"account", "add", "1400", "--name", "Stock", "--type", "asset"}, exitConflict, "already defined differently"},
				{[]string{"account", "add", "14/00", "--name", "Stock", "--type", "asset"}, exitUsage, "14/00"},
				{[]string{"account", "add", "1500", "--name", "Stock", "--type", "assets"}, exitUsage, "account type"},
				{[]string{"account", "close", "1499"}, exitNotFound, "account 1499"},
				{[]string{"currency", "add", "EUR", "--exponent", "3"}, exitConflict, "already defined differently"},
				{[]string{"currency", "add", "USD"}, exitUsage, "--exponent is required"},
				{[]string{"reverse", "--seq", "1"}, exitNotFound, "no posting at seq 1"},
				{[]string{"reverse", "--key", "p404"}, exitNotFound, "no posting with key"},
				{[]string{"reverse", "--seq", "7", "--key", "p1"}, exitUsage, "--seq or --key"},
				{[]string{"balance", "1499", "EUR"}, exitNotFound, "account 1499"},
				{[]string{"balance", "1400", "GBP"}, exitNotFound, "currency GBP"},
				{[]string{"balance", "1400", "--at-seq", "3"}, exitUsage, "need a CURRENCY"},
				{[]string{"balance", "1400", "EUR", "--as-of", "1800-01-01"}, exitUsage, "outside"},
			} {
				r := l.fin(c.args...)
				r.expect(t, c.code, c.stderr)
				if after := l.snapshot(); after != before {
					t.Fatalf("fin %v changed the ledger", c.args)
				}
			}
			r := l.run("-o", "json", "fin", "--tenant", "acme", "post", "--key", "p1", "--date", "2026-11-02", "--debit", "1400:2:EUR", "--credit", "2100:2:EUR")
			r.expect(t, exitConflict, `"existing_seq":7`)
			l.run("fin", "post", "--key", "x", "--date", "2026-11-02").expect(t, exitUsage, "--tenant is required")
		})
	}
}

// TestFinVerifyFindsTamperedBalance changes a stored balance behind the
// CLI's back; verify runs the financial check and exits 1.
func TestFinVerifyFindsTamperedBalance(t *testing.T) {
	l := newFileLedger(t)
	l.finSetup()
	l.must("fin", "--tenant", "acme", "post", "--key", "p1", "--date", "2026-11-02", "--debit", "1400:1:EUR", "--credit", "2100:1:EUR")
	l.must("verify")
	db, err := chain.Open(l.name, chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := financial.NewBook(db, "acme", "main")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	err = db.Update(ctx, func(tx *chain.Tx) error {
		return tx.StatePut([]byte("fin/acme/main/bal/1400/EUR"), make([]byte, 24))
	})
	if err != nil {
		t.Fatal(err)
	}
	if bal, err := b.Balance(ctx, "1400", "EUR"); err != nil || !bal.Amount.IsZero() {
		t.Fatalf("tampered balance %+v %v", bal, err)
	}
	db.Close()
	r := l.run("verify")
	r.expect(t, exitVerification, "")
	if !strings.Contains(r.stdout, "state_mismatch") || !strings.Contains(r.stdout, "balance of 1400 in EUR") {
		t.Fatalf("verify output:\n%s", r.stdout)
	}
}
