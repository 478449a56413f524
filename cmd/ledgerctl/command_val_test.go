package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/valuations"
)

// valJSON runs a val command for tenant acme and decodes its JSON output.
func (l *testLedger) valJSON(value any, args ...string) {
	l.t.Helper()
	out := l.must(append([]string{"-o", "json", "val", "--tenant", "acme"}, args...)...)
	if err := json.Unmarshal([]byte(out), value); err != nil {
		l.t.Fatalf("val %v: %v in %q", args, err, out)
	}
}

func (l *testLedger) val(args ...string) cliResult {
	l.t.Helper()
	return l.run(append([]string{"val", "--tenant", "acme"}, args...)...)
}

func TestValWorkedExample(t *testing.T) {
	for _, l := range testLedgers(t) {
		t.Run(l.backend, func(t *testing.T) {
			l.t = t
			l.must("init")
			for method, want := range map[string][]string{
				"ma":   {"100.00", "55.05", "-72.36", "-51.68", "-31.01"},
				"fifo": {"100.00", "55.05", "-70.00", "-52.02", "-33.03"},
			} {
				item := "SKU-" + method
				var def valItemJSON
				l.valJSON(&def, "item", "add", item, "--method", method, "--currency", "EUR")
				if def.Seq != 1 || def.Unchanged || def.MinorUnit != 2 {
					t.Fatalf("item %+v", def)
				}
				steps := [][]string{
					{"receive", item, "WH-1", "10", "--unit-cost", "10.00", "--op", "r1"},
					{"receive", item, "WH-1", "5", "--unit-cost", "11.01", "--op", "r2"},
					{"issue", item, "WH-1", "7", "--op", "i1"},
					{"issue", item, "WH-1", "5", "--op", "i2"},
					{"issue", item, "WH-1", "3", "--op", "i3"},
				}
				for i, step := range steps {
					var res valResultJSON
					l.valJSON(&res, step...)
					if res.Replayed || len(res.Legs) != 1 || res.Legs[0].ValueChange != want[i] {
						t.Fatalf("%s step %d: %+v, want value change %s", method, i, res, want[i])
					}
				}
				var shown struct {
					Balances []valBalanceJSON `json:"balances"`
				}
				l.valJSON(&shown, "show", item, "WH-1", "--at-seq", "2")
				if len(shown.Balances) != 1 || shown.Balances[0].Quantity != "15" || shown.Balances[0].Value != "155.05" {
					t.Fatalf("%s at seq 2: %+v", method, shown)
				}
				l.valJSON(&shown, "show", item)
				if len(shown.Balances) != 1 || shown.Balances[0].Quantity != "0" || shown.Balances[0].Value != "0.00" {
					t.Fatalf("%s now: %+v", method, shown)
				}
			}
			var items struct {
				Items []valItemJSON `json:"items"`
			}
			l.valJSON(&items, "item", "list")
			if len(items.Items) != 2 || items.Items[0].Method != "fifo" || items.Items[1].Method != "moving_average" {
				t.Fatalf("items %+v", items)
			}
			l.must("verify")
		})
	}
}

func TestValRetriesConflictsAndRefusals(t *testing.T) {
	for _, l := range testLedgers(t) {
		t.Run(l.backend, func(t *testing.T) {
			l.t = t
			l.must("init")
			l.must("val", "--tenant", "acme", "item", "add", "SKU-1", "--method", "fifo", "--currency", "EUR", "--scale", "1")
			var first, retry valResultJSON
			l.valJSON(&first, "receive", "SKU-1", "WH-1", "2.5", "--value", "10.00", "--op", "po-1")
			l.valJSON(&retry, "receive", "SKU-1", "WH-1", "2.5", "--value", "10.00", "--op", "po-1")
			if first.Replayed || !retry.Replayed || retry.Legs[0].ValueSeq != first.Legs[0].ValueSeq {
				t.Fatalf("first %+v retry %+v", first, retry)
			}
			before := l.snapshot()
			l.val("receive", "SKU-1", "WH-1", "2.5", "--value", "10.01", "--op", "po-1").expect(t, exitConflict, "different request")
			l.val("issue", "SKU-1", "WH-1", "3", "--op", "so-1").expect(t, exitUsage, "shortfall of 0.5")
			l.val("issue", "SKU-1", "WH-1", "0.25", "--op", "so-1").expect(t, exitUsage, "0.25")
			l.val("issue", "SKU-9", "WH-1", "1", "--op", "so-1").expect(t, exitNotFound, "unknown item")
			l.val("receive", "SKU-1", "WH-1", "1", "--op", "po-2").expect(t, exitUsage, "exactly one of --unit-cost and --value")
			l.val("receive", "SKU-1", "WH-1", "1", "--unit-cost", "-1", "--op", "po-2").expect(t, exitUsage, "negative")
			l.val("issue", "SKU-1", "WH-1", "1").expect(t, exitUsage, "--op is required")
			l.val("reverse", "SKU-1", "WH-1", "nope", "--op", "rv-1").expect(t, exitNotFound, "no operation")
			r := l.run("-o", "json", "val", "--tenant", "acme", "issue", "SKU-1", "WH-1", "3", "--op", "so-1")
			if r.code != exitUsage || !strings.Contains(r.stderr, `"code":"INVALID_INPUT"`) {
				t.Fatalf("JSON error %+v", r)
			}
			if after := l.snapshot(); after != before {
				t.Fatalf("refused commands wrote:\n%s\nwas\n%s", after, before)
			}
			var transfer valResultJSON
			l.valJSON(&transfer, "transfer", "SKU-1", "WH-1", "WH-2", "1.0", "--op", "tr-1")
			if len(transfer.Legs) != 2 || transfer.Legs[0].ValueChange != "-4.00" || transfer.Legs[1].Value != "4.00" {
				t.Fatalf("transfer %+v", transfer)
			}
			var layers struct {
				Layers []valLayerJSON `json:"layers"`
			}
			l.valJSON(&layers, "layers", "SKU-1", "WH-1")
			if len(layers.Layers) != 1 || layers.Layers[0].Quantity != "1.5" || layers.Layers[0].Value != "6.00" {
				t.Fatalf("layers %+v", layers)
			}
			// Layers are shown by their readable number, not their 2^63-based key id.
			if n := layers.Layers[0].Number; n < -10 || n > 10 || n != valuations.LayerNumber(layers.Layers[0].ID) {
				t.Fatalf("layer number %d of id %d", n, layers.Layers[0].ID)
			}
			layersText := l.val("layers", "SKU-1", "WH-1")
			if layersText.code != 0 || !strings.Contains(layersText.stdout, fmt.Sprintf("\n%d ", layers.Layers[0].Number)) ||
				strings.Contains(layersText.stdout, "922337") {
				t.Fatalf("val layers prints %q", layersText.stdout)
			}
			var reversal valResultJSON
			l.valJSON(&reversal, "reverse", "SKU-1", "WH-1", "tr-1", "--op", "rv-1")
			if len(reversal.Legs) != 2 || reversal.Legs[0].Location != "WH-2" || reversal.Legs[1].Value != "10.00" {
				t.Fatalf("reversal %+v", reversal)
			}
			var adjusted valResultJSON
			l.valJSON(&adjusted, "adjust", "SKU-1", "WH-1", "--amount", "1.50", "--op", "lc-1")
			if adjusted.Legs[0].ValueChange != "1.50" || adjusted.Legs[0].Value != "11.50" {
				t.Fatalf("adjustment %+v", adjusted)
			}
			text := l.must("val", "--tenant", "acme", "show", "SKU-1", "WH-1")
			if !strings.Contains(text, "11.50") || !strings.Contains(text, "fifo") {
				t.Fatalf("show text:\n%s", text)
			}
			if out := l.must("verify"); !strings.Contains(out, "intact") {
				t.Fatalf("verify: %s", out)
			}
		})
	}
}

// TestVerifyReportsValuationStateMismatch: verify runs the valuation check
// and reports a location whose derived state is gone as state_mismatch
// (exit 1).
func TestVerifyReportsValuationStateMismatch(t *testing.T) {
	l := newFileLedger(t)
	l.must("init")
	l.must("val", "--tenant", "acme", "item", "add", "SKU-1", "--method", "fifo", "--currency", "EUR")
	l.must("val", "--tenant", "acme", "receive", "SKU-1", "WH-1", "5", "--unit-cost", "2.00", "--op", "po-1")
	l.must("verify")
	a := &app{database: l.name, lockTimeout: -1}
	db, err := a.openDB(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(context.Background(), func(tx *chain.Tx) error { return tx.StateDelete([]byte("val/acme/pos/SKU-1/WH-1")) })
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	r := l.run("verify")
	if r.code != exitVerification || !strings.Contains(r.stdout, "state_mismatch") || !strings.Contains(r.stdout, "acme/val/SKU-1/WH-1/value") {
		t.Fatalf("verify: %+v", r)
	}
}
