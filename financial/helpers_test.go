package financial

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt"
	"github.com/ledgerworks/ledger/storage/storagetest"
)

var ctx = context.Background()

// testClock returns a clock that advances one second per call.
func testClock() func() time.Time {
	var n atomic.Int64
	return func() time.Time { return time.Unix(1_764_000_000+n.Add(1), 0) }
}

// forEachBackend runs fn once per registered storage backend.
func forEachBackend(t *testing.T, fn func(t *testing.T, db *chain.DB)) {
	for _, f := range storagetest.Factories(t) {
		t.Run(f.Name, func(t *testing.T) {
			db, err := chain.OpenBackend(f.Open(t), chain.Options{Clock: testClock()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			fn(t, db)
		})
	}
}

func mustBook(t testing.TB, db *chain.DB, tenant, name string) *Book {
	t.Helper()
	b, err := NewBook(db, tenant, name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// chart defines EUR (2), USD (2), JPY (0) and a small chart of accounts.
func chart(t testing.TB, b *Book) {
	t.Helper()
	for _, c := range []Currency{{Code: "EUR", Exponent: 2}, {Code: "USD", Exponent: 2}, {Code: "JPY", Exponent: 0}} {
		if _, err := b.AddCurrency(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range []Account{
		{Code: "1000", Name: "Cash", Type: Asset},
		{Code: "1400", Name: "Inventory", Type: Asset},
		{Code: "1500", Name: "Accumulated depreciation", Type: Asset, NormalSide: Credit},
		{Code: "2100", Name: "Payables", Type: Liability},
		{Code: "3000", Name: "Equity", Type: Equity},
		{Code: "4000", Name: "Sales", Type: Income},
		{Code: "5000", Name: "Cost of goods sold", Type: Expense},
	} {
		if _, err := b.AddAccount(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
}

func money(text string, scale uint8) decimal.Decimal {
	d, err := decimal.Parse(text, scale)
	if err != nil {
		panic(err)
	}
	return d
}

func dr(account, amount, currency string) Line {
	return Line{Account: account, Side: Debit, Amount: money(amount, scaleOf(currency)), Currency: currency}
}

func cr(account, amount, currency string) Line {
	return Line{Account: account, Side: Credit, Amount: money(amount, scaleOf(currency)), Currency: currency}
}

func scaleOf(currency string) uint8 {
	if currency == "JPY" {
		return 0
	}
	return 2
}

func posting(key, date string, lines ...Line) Posting {
	return Posting{Key: key, Date: MustParseDate(date), Memo: "memo " + key, Reference: "ref-" + key, Lines: lines}
}

// snapshot captures everything a refused request must leave unchanged:
// every chain head and every state key and value.
func snapshot(t testing.TB, db *chain.DB) string {
	t.Helper()
	var buf bytes.Buffer
	err := db.View(ctx, func(tx *chain.Tx) error {
		for h, err := range tx.Chains("") {
			if err != nil {
				return err
			}
			fmt.Fprintf(&buf, "chain %s %d %s\n", h.Chain, h.Seq, h.Hash)
		}
		for kv, err := range tx.StateScan(nil, nil, false) {
			if err != nil {
				return err
			}
			fmt.Fprintf(&buf, "state %x=%x\n", kv.Key, kv.Value)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func mustBalance(t testing.TB, b *Book, account, currency string) Balance {
	t.Helper()
	bal, err := b.Balance(ctx, account, currency)
	if err != nil {
		t.Fatal(err)
	}
	return bal
}

func mustCheckClean(t testing.TB, db *chain.DB) {
	t.Helper()
	failures, err := Check(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range failures {
		t.Errorf("check: %s", f)
	}
}

func wantError(t testing.TB, err error, targets ...error) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v", targets)
	}
	for _, target := range targets {
		if !errors.Is(err, target) {
			t.Fatalf("error %q does not match %v", err, target)
		}
	}
}

type backendFactory struct {
	name string
	open func(t testing.TB) storage.Backend
}

// storagetestFactories returns the registered backends for tests that open
// many ledgers (property tests). bbolt files go to a RAM-backed folder when
// there is one: such tests measure logic, not fsync.
func storagetestFactories(t *testing.T) []backendFactory {
	var out []backendFactory
	for _, f := range storagetest.Factories(t) {
		open := f.Open
		if f.Name == "bolt" {
			open = openBoltInMemoryFolder
		}
		out = append(out, backendFactory{name: f.Name, open: open})
	}
	return out
}

func openBoltInMemoryFolder(t testing.TB) storage.Backend {
	t.Helper()
	parent := ""
	if info, err := os.Stat("/dev/shm"); err == nil && info.IsDir() {
		parent = "/dev/shm"
	}
	dir, err := os.MkdirTemp(parent, "financial-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	b, err := bolt.Open(filepath.Join(dir, "ledger.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}
