package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/chain"
)

// stockJSON runs a stock command for tenant acme and decodes its JSON output.
func (l *testLedger) stockJSON(value any, args ...string) {
	l.t.Helper()
	out := l.must(append([]string{"-o", "json", "stock", "--tenant", "acme"}, args...)...)
	if err := json.Unmarshal([]byte(out), value); err != nil {
		l.t.Fatalf("stock %v: %v in %q", args, err, out)
	}
}

// stockSetup initializes the ledger with item SKU-1 (scale 3) and locations
// WH-1, WH-2.
func (l *testLedger) stockSetup() {
	l.t.Helper()
	l.must("init")
	l.must("stock", "--tenant", "acme", "item", "add", "SKU-1", "--scale", "3", "--name", "Flour")
	l.must("stock", "--tenant", "acme", "location", "add", "WH-1")
	l.must("stock", "--tenant", "acme", "location", "add", "WH-2", "--name", "Annex")
}

func TestStockMovementsAndBalances(t *testing.T) {
	for _, l := range testLedgers(t) {
		t.Run(l.backend, func(t *testing.T) {
			l.t = t
			l.stockSetup()
			var receipt, retry stockResultJSON
			l.stockJSON(&receipt, "receive", "SKU-1", "WH-1", "12.5", "--key", "grn-1", "--reference", "GRN-1", "--note", "first")
			l.stockJSON(&retry, "receive", "SKU-1", "WH-1", "12.5", "--key", "grn-1", "--reference", "GRN-1", "--note", "first")
			if receipt.Replayed || !retry.Replayed || len(retry.Entries) != 1 || retry.Entries[0] != receipt.Entries[0] {
				t.Fatalf("receipt %+v, retry %+v", receipt, retry)
			}
			want := stockEntryJSON{Tenant: "acme", Item: "SKU-1", Location: "WH-1", Chain: "acme/stock/SKU-1/WH-1", Seq: 1,
				TimeUnixNano: receipt.Entries[0].TimeUnixNano, IdempotencyKey: "grn-1", Kind: "receipt", Quantity: "12.500",
				Balance: "12.500", Reference: "GRN-1", Note: "first"}
			if receipt.Entries[0] != want {
				t.Fatalf("entry %+v, want %+v", receipt.Entries[0], want)
			}
			l.must("stock", "--tenant", "acme", "issue", "SKU-1", "WH-1", "2.25", "--key", "pick-1")
			l.must("stock", "--tenant", "acme", "adjust", "SKU-1", "WH-1", "--by", "-0.25", "--reason", "count", "--key", "count-1")
			var transfer stockResultJSON
			l.stockJSON(&transfer, "transfer", "SKU-1", "WH-1", "WH-2", "4", "--key", "tr-1")
			if len(transfer.Entries) != 2 || transfer.Entries[0].IdempotencyKey != "tr-1:out" || transfer.Entries[1].Balance != "4.000" {
				t.Fatalf("transfer %+v", transfer)
			}
			var all stockTotalJSON
			l.stockJSON(&all, "balance", "SKU-1")
			if all.Total != "10.000" || len(all.Balances) != 2 || all.Balances[0].Quantity != "6.000" || all.Balances[1].Quantity != "4.000" {
				t.Fatalf("balances %+v", all)
			}
			var atSeq, atTime stockBalanceJSON
			l.stockJSON(&atSeq, "balance", "SKU-1", "WH-1", "--at-seq", "2")
			if atSeq.Quantity != "10.250" || atSeq.Seq != 2 {
				t.Fatalf("at seq 2: %+v", atSeq)
			}
			l.stockJSON(&atTime, "balance", "SKU-1", "WH-1", "--at-time", formatTime(receipt.Entries[0].TimeUnixNano))
			if atTime.Quantity != "12.500" || atTime.Seq != 1 {
				t.Fatalf("at the receipt's time: %+v", atTime)
			}
			var page stockHistoryJSON
			l.stockJSON(&page, "history", "SKU-1", "WH-1", "--limit", "2")
			if len(page.Entries) != 2 || page.NextSeq != 3 || page.Entries[1].Kind != "issue" {
				t.Fatalf("history page %+v", page)
			}
			text := l.must("stock", "--tenant", "acme", "history", "SKU-1", "WH-1", "--from", "3")
			for _, part := range []string{"adjustment", "reason count", "transfer_out", "to WH-2"} {
				if !strings.Contains(text, part) {
					t.Fatalf("history text lacks %q:\n%s", part, text)
				}
			}
			var reversal stockResultJSON
			l.stockJSON(&reversal, "reverse", "acme/stock/SKU-1/WH-2", "1", "--key", "cancel-tr-1")
			if len(reversal.Entries) != 2 || reversal.Entries[0].Balance != "10.000" || reversal.Entries[1].OriginalSeq != 1 {
				t.Fatalf("reversal %+v", reversal)
			}
			var items struct {
				Items []stockItemJSON `json:"items"`
			}
			l.stockJSON(&items, "item", "list")
			if len(items.Items) != 1 || items.Items[0] != (stockItemJSON{Tenant: "acme", ID: "SKU-1", Name: "Flour", Scale: 3, Seq: 1}) {
				t.Fatalf("items %+v", items)
			}
			if out := l.must("stock", "--tenant", "acme", "location", "list"); !strings.Contains(out, "WH-2      Annex") {
				t.Fatalf("locations:\n%s", out)
			}
			if out := l.must("verify"); !strings.HasPrefix(out, "intact:") {
				t.Fatalf("verify: %s", out)
			}
		})
	}
}

func TestStockRefusalsExitCodesAndWriteNothing(t *testing.T) {
	for _, l := range testLedgers(t) {
		t.Run(l.backend, func(t *testing.T) {
			l.t = t
			l.stockSetup()
			l.must("stock", "--tenant", "acme", "receive", "SKU-1", "WH-1", "1", "--key", "grn-1")
			before := l.snapshot()
			cases := []struct {
				args   []string
				code   int
				stderr string
			}{
				{[]string{"issue", "SKU-1", "WH-1", "1.5", "--key", "k"}, exitUsage, `"code":"INVALID_INPUT"`},
				{[]string{"issue", "SKU-1", "WH-1", "1.5", "--key", "k"}, exitUsage, "short by 0.500"},
				{[]string{"receive", "SKU-1", "WH-1", "1.0001", "--key", "k"}, exitUsage, "scale 3"},
				{[]string{"receive", "SKU-1", "WH-1", "0", "--key", "k"}, exitUsage, "zero quantity"},
				{[]string{"receive", "SKU-1", "WH-9", "1", "--key", "k"}, exitNotFound, `"code":"NOT_FOUND"`},
				{[]string{"receive", "NOPE", "WH-1", "1", "--key", "k"}, exitNotFound, "item not found"},
				{[]string{"receive", "SKU-1", "WH-1", "2", "--key", "grn-1"}, exitConflict, `"existing_seq":1`},
				{[]string{"receive", "SKU-1", "WH-1", "1"}, exitUsage, "--key is required"},
				{[]string{"transfer", "SKU-1", "WH-1", "WH-1", "1", "--key", "k"}, exitUsage, "transfer within one location"},
				{[]string{"adjust", "SKU-1", "WH-1", "--by", "-1", "--key", "k"}, exitUsage, "without a reason"},
				{[]string{"reverse", "globex/stock/SKU-1/WH-1", "1", "--key", "k"}, exitUsage, "another tenant"},
				{[]string{"reverse", "acme/stock/SKU-1/WH-1", "7", "--key", "k"}, exitNotFound, "movement not found"},
				{[]string{"balance", "SKU-1", "WH-1", "--at-seq", "9"}, exitNotFound, "beyond"},
				{[]string{"item", "add", "SKU-1", "--scale", "2"}, exitUsage, "scale cannot change"},
			}
			for _, c := range cases {
				r := l.run(append([]string{"-o", "json", "stock", "--tenant", "acme"}, c.args...)...)
				r.expect(t, c.code, c.stderr)
				if after := l.snapshot(); after != before {
					t.Fatalf("stock %v wrote:\n%s\nwas\n%s", c.args, after, before)
				}
			}
			r := l.run("stock", "receive", "SKU-1", "WH-1", "1", "--key", "k")
			r.expect(t, exitUsage, "--tenant is required")
		})
	}
}

// TestVerifyReportsStockStateMismatch: verify runs the stock check and
// reports tampered derived state as state_mismatch (exit 1).
func TestVerifyReportsStockStateMismatch(t *testing.T) {
	l := newFileLedger(t)
	l.stockSetup()
	l.must("stock", "--tenant", "acme", "receive", "SKU-1", "WH-1", "5", "--key", "grn-1")
	a := &app{database: l.name, lockTimeout: -1}
	db, err := a.openDB(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	value := binary.BigEndian.AppendUint64(nil, 4000) // 4.000 instead of 5.000
	err = db.Update(context.Background(), func(tx *chain.Tx) error { return tx.StatePut([]byte("stock/acme/total/SKU-1"), value) })
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	r := l.run("verify")
	if r.code != exitVerification || !strings.Contains(r.stdout, "state_mismatch") || !strings.Contains(r.stdout, "acme/stock/SKU-1") {
		t.Fatalf("verify: %+v", r)
	}
}

func TestDemoRecordsStock(t *testing.T) {
	r := runRaw(t, "demo", "--dir", t.TempDir())
	if r.code != 0 {
		t.Fatalf("demo: %+v", r)
	}
	first, _, _ := strings.Cut(r.stdout, "\n")
	path := strings.TrimPrefix(first, "ledger: ")
	for _, want := range []string{"transfer_in +100.000", "replayed=true (nothing written)", "short by 20.000", "total FLOUR-405: 207.500"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	balance := runRaw(t, "--db", path, "-o", "json", "stock", "--tenant", "acme", "balance", "SACK-10", "WH-1")
	if balance.code != 0 || !strings.Contains(balance.stdout, `"quantity":"500"`) {
		t.Fatalf("balance after the demo: %+v", balance)
	}
}
