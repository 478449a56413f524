package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
)

// stateOf lists every derived-state pair of a ledger, to compare two
// ledgers' state byte for byte.
func (l *testLedger) stateOf() string {
	l.t.Helper()
	db := l.open()
	defer db.Close()
	var b strings.Builder
	err := db.View(context.Background(), func(tx *chain.Tx) error {
		for kv, err := range tx.StateScan(nil, nil, false) {
			if err != nil {
				return err
			}
			if bytes.HasPrefix(kv.Key, []byte("idempotency/")) {
				continue // the HTTP guard's records: not derived from the chains, not exported
			}
			fmt.Fprintf(&b, "%q %x\n", kv.Key, kv.Value)
		}
		return nil
	})
	if err != nil {
		l.t.Fatal(err)
	}
	return b.String()
}

// update changes a ledger behind the CLI's back, in one write transaction.
func (l *testLedger) update(fn func(tx *chain.Tx) error) {
	l.t.Helper()
	a := &app{database: l.name, lockTimeout: time.Second}
	db, err := a.openDB(context.Background(), false)
	if err != nil {
		l.t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(context.Background(), fn); err != nil {
		l.t.Fatal(err)
	}
}

// demoLedger returns a ledger of the given backend's kind holding the demo.
func demoLedger(t *testing.T, l *testLedger) *testLedger {
	t.Helper()
	l.t = t
	if r := l.run("demo"); r.code != 0 {
		t.Fatalf("demo: %+v", r)
	}
	return l
}

// TestRebuildStateRepairsDamagedState damages the demo's derived state in
// each domain — a balance changed, an index key deleted, a position
// changed, stray keys added — and rebuilds it: verify reports the damage,
// rebuild-state restores the state byte for byte, and verify is clean.
func TestRebuildStateRepairsDamagedState(t *testing.T) {
	for _, l := range testLedgers(t) {
		t.Run(l.backend, func(t *testing.T) {
			l = demoLedger(t, l)
			before := l.stateOf()
			l.update(func(tx *chain.Tx) error {
				var keys [][]byte
				for kv, err := range tx.StateScan(nil, nil, false) {
					if err != nil {
						return err
					}
					keys = append(keys, bytes.Clone(kv.Key))
				}
				for _, key := range keys {
					switch k := string(key); {
					case strings.HasPrefix(k, "stock/acme/total/"):
						if err := tx.StatePut(key, make([]byte, 8)); err != nil {
							return err
						}
					case strings.HasPrefix(k, "fin/acme/main/seq/"):
						if err := tx.StateDelete(key); err != nil {
							return err
						}
					case strings.HasPrefix(k, "val/acme/pos/"):
						if err := tx.StatePut(key, []byte{1}); err != nil {
							return err
						}
					}
				}
				for _, stray := range []string{"stock/acme/balance/SACK-10/WH-9", "fin/acme/gone/bal/1400/EUR", "val/acme/item/GONE", "stock/x"} {
					if err := tx.StatePut([]byte(stray), []byte{1}); err != nil {
						return err
					}
				}
				return nil
			})
			r := l.run("verify")
			for _, want := range []string{"acme/stock/FLOUR-405", "acme/fin/main/journal", "acme/val/NUT-M8/WH-1/value", "acme/fin/gone/journal", "acme/val/GONE"} {
				if r.code != exitVerification || !strings.Contains(r.stdout, want) {
					t.Fatalf("verify of the damaged state does not name %s: %+v", want, r)
				}
			}
			out := l.must("rebuild-state")
			if l.backend == "bolt" {
				golden(t, "rebuild_state", out)
			}
			l.must("verify")
			if after := l.stateOf(); after != before {
				t.Fatalf("state after rebuild-state:\n%s\nwant\n%s", after, before)
			}
			// Once more: the same state, and the same work.
			var again rebuildStateJSON
			if err := json.Unmarshal([]byte(l.must("-o", "json", "rebuild-state")), &again); err != nil {
				t.Fatal(err)
			}
			if !again.OK || len(again.Domains) != len(stateRebuilders) || again.Domains[1].Domain != "stock" || again.Domains[1].Deleted != again.Domains[1].Written {
				t.Fatalf("second rebuild-state %+v", again)
			}
			if l.stateOf() != before {
				t.Fatal("a second rebuild-state changed the state")
			}
		})
	}
}

// TestRebuildStateDomainFlag rebuilds only the domains named.
func TestRebuildStateDomainFlag(t *testing.T) {
	l := demoLedger(t, newFileLedger(t))
	before := l.stateOf()
	l.update(func(tx *chain.Tx) error { return tx.StatePut([]byte("stock/x"), []byte{1}) })
	var out rebuildStateJSON
	if err := json.Unmarshal([]byte(l.must("-o", "json", "rebuild-state", "--domain", "val", "--domain", "fin")), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Domains) != 2 || out.Domains[0].Domain != "fin" || out.Domains[1].Domain != "val" {
		t.Fatalf("rebuild-state --domain val --domain fin: %+v", out)
	}
	if l.run("verify").code != exitVerification {
		t.Fatal("the stock stray key was removed by a rebuild of fin and val")
	}
	l.must("rebuild-state", "--domain", "stock")
	if l.stateOf() != before {
		t.Fatal("rebuild-state --domain stock did not remove the stray key")
	}
	l.run("rebuild-state", "--domain", "stocks").expect(t, exitUsage, `--domain "stocks": want stock, fin, val`)
	missing := newFileLedger(t)
	missing.run("rebuild-state").expect(t, exitStorage, "ledger does not exist")
}

// TestRebuildStateReportsEntriesThatBreakARule: an entry no domain package
// would write (a raw append to a stock chain) cannot be rebuilt; it is
// listed, rebuild-state exits 1, and the rest of the state is rebuilt.
func TestRebuildStateReportsEntriesThatBreakARule(t *testing.T) {
	l := demoLedger(t, newFileLedger(t))
	l.must("append", "acme/stock/SACK-10/WH-1", "--type", "audit.event/v1", "--data", "{}")
	l.update(func(tx *chain.Tx) error { return tx.StateDelete([]byte("stock/acme/total/FLOUR-405")) })
	r := l.run("-o", "json", "rebuild-state")
	r.expect(t, exitVerification, "1 entry of stock break a rule of their domain")
	var out rebuildStateJSON
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	stock := out.Domains[1]
	if out.OK || stock.Domain != "stock" || len(stock.Failures) != 1 || stock.Failures[0].Chain != "acme/stock/SACK-10/WH-1" ||
		stock.Failures[0].Seq != 4 || stock.Failures[0].Reason != "state_mismatch" {
		t.Fatalf("rebuild-state: %+v", out)
	}
	v := l.run("verify")
	if v.code != exitVerification || strings.Count(v.stdout, "state_mismatch") != 1 || !strings.Contains(v.stdout, "acme/stock/SACK-10/WH-1 seq 4") {
		t.Fatalf("verify after the rebuild: %+v", v)
	}
}

// TestImportOfTheDemoVerifiesClean imports the demo's export into a fresh
// ledger of every backend: import rebuilds the stock, fin and val state, so
// verify is clean, the state is byte for byte the demo's own, and the
// domain commands answer as they do on the demo's ledger.
func TestImportOfTheDemoVerifiesClean(t *testing.T) {
	source := demoLedger(t, newFileLedger(t))
	export := filepath.Join(source.dir, "demo.jsonl")
	source.must("export", "--all", "--out", export)
	queries := [][]string{
		{"stock", "--tenant", "acme", "balance", "FLOUR-405"},
		{"fin", "--tenant", "acme", "trial-balance"},
		{"val", "--tenant", "acme", "show", "NUT-M8", "WH-1"},
	}
	for _, l := range testLedgers(t) {
		t.Run(l.backend, func(t *testing.T) {
			l.t = t
			out := l.must("import", "--file", export)
			if l.backend == "bolt" {
				golden(t, "import_demo", strings.ReplaceAll(out, export, "$EXPORT"))
			}
			l.must("verify")
			if got, want := l.stateOf(), source.stateOf(); got != want {
				t.Fatalf("imported state:\n%s\nthe demo's:\n%s", got, want)
			}
			for _, q := range queries {
				if got, want := l.must(q...), source.must(q...); got != want {
					t.Fatalf("%s: %q, on the demo's ledger %q", strings.Join(q, " "), got, want)
				}
			}
			// Importing again appends nothing and rebuilds the same state.
			var again importJSON
			if err := json.Unmarshal([]byte(l.must("-o", "json", "import", "--file", export)), &again); err != nil {
				t.Fatal(err)
			}
			if again.Appended != 0 || len(again.Rebuilt) != 5 || again.Rebuilt[2].Domain != "val" || len(again.Rebuilt[2].Failures) != 0 {
				t.Fatalf("second import %+v", again)
			}
			if l.stateOf() != source.stateOf() {
				t.Fatal("the second import changed the state")
			}
		})
	}
}
