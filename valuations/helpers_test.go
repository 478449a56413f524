package valuations

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/chain/chaintest"
	"github.com/ledgerworks/ledger/decimal"
)

// testClock returns a clock that advances one millisecond per reading.
func testClock() func() time.Time {
	return chaintest.SteppingClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Millisecond)
}

// eachBackend runs fn against a fresh ledger on every registered backend.
func eachBackend(t *testing.T, fn func(t *testing.T, db *chain.DB)) {
	t.Helper()
	chaintest.ForEachBackend(t, func() chain.Options { return chain.Options{Clock: testClock()} }, fn)
}

func dec(t testing.TB, text string, scale uint8) decimal.Decimal {
	t.Helper()
	d, err := decimal.Parse(text, scale)
	if err != nil {
		t.Fatalf("parse %q at %d: %v", text, scale, err)
	}
	return d
}

func decPtr(t testing.TB, text string, scale uint8) *decimal.Decimal {
	d := dec(t, text, scale)
	return &d
}

// fataler is what both *testing.T and *rapid.T offer.
type fataler interface {
	Helper()
	Fatal(args ...any)
}

// snapshot describes every chain head and every state pair, so that a test
// can assert that a refused operation wrote nothing at all.
func snapshot(t fataler, db *chain.DB) string {
	t.Helper()
	return scopedSnapshot(t, db, "", nil, nil)
}

// tenantSnapshot is snapshot restricted to one tenant's chains and
// valuation state.
func tenantSnapshot(t fataler, db *chain.DB, tenant string) string {
	t.Helper()
	state := []byte(statePrefix + tenant + "/")
	return scopedSnapshot(t, db, tenant+"/", state, prefixEnd(state))
}

func scopedSnapshot(t fataler, db *chain.DB, chainPrefix string, stateStart, stateEnd []byte) string {
	t.Helper()
	var lines []string
	for h, err := range db.Chains(context.Background(), chainPrefix) {
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(h.Chain, chainPrefix) {
			break
		}
		lines = append(lines, fmt.Sprintf("chain %s %d %s", h.Chain, h.Seq, h.Hash))
	}
	err := db.View(context.Background(), func(tx *chain.Tx) error {
		for kv, err := range tx.StateScan(stateStart, stateEnd, false) {
			if err != nil {
				return err
			}
			lines = append(lines, fmt.Sprintf("state %q %x", kv.Key, kv.Value))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// mustCheck fails the test when Check finds anything.
func mustCheck(t testing.TB, db *chain.DB) {
	t.Helper()
	failures, err := Check(context.Background(), db)
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	for _, f := range failures {
		t.Errorf("check: %v", f)
	}
}

func defineItem(t testing.TB, db *chain.DB, it Item) {
	t.Helper()
	if _, err := DefineItem(context.Background(), db, it); err != nil {
		t.Fatalf("define %+v: %v", it, err)
	}
}
