package valuations

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
)

// vector is one file of testdata/valuations: an item, a sequence of
// operations with what each must produce, and the final positions.
type vector struct {
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Item        itemPayload       `json:"item"`
	Steps       []vectorStep      `json:"steps"`
	Final       map[string]vFinal `json:"final"`
}

type vectorStep struct {
	Op           string     `json:"op"` // receive, issue, adjust, transfer, reverse, define
	ID           string     `json:"id"`
	Location     string     `json:"location"`
	To           string     `json:"to"`
	Quantity     string     `json:"quantity"`
	UnitCost     string     `json:"unitCost"`
	Value        string     `json:"value"`
	Amount       string     `json:"amount"`
	EstimateRate string     `json:"estimateRate"`
	Reverses     string     `json:"reverses"`
	Method       string     `json:"method"`
	Expect       vectorLeg  `json:"expect"`
	Destination  *vectorLeg `json:"destination"`
}

type vectorLeg struct {
	Error       string             `json:"error"`
	ValueChange string             `json:"valueChange"`
	Quantity    string             `json:"quantity"`
	Value       string             `json:"value"`
	Rate        string             `json:"rate"`
	Settlements []settlementRecord `json:"settlements"`
}

type vFinal struct {
	Quantity string      `json:"quantity"`
	Value    string      `json:"value"`
	Layers   [][2]string `json:"layers"`
}

func TestVectors(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("..", "testdata", "valuations", "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no vectors: %v", err)
	}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var v vector
		if err := decodeStrictTest(data, &v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		t.Run(strings.TrimSuffix(filepath.Base(path), ".json"), func(t *testing.T) {
			eachBackend(t, func(t *testing.T, db *chain.DB) { runVector(t, db, v) })
		})
	}
}

func runVector(t *testing.T, db *chain.DB, v vector) {
	ctx := context.Background()
	v.Item.Tenant, v.Item.Item = "acme", "SKU-1"
	it, err := decodeItem(mustMarshal(v.Item))
	if err != nil {
		t.Fatalf("item: %v", err)
	}
	defineItem(t, db, it)
	s := it.scales()
	sums := map[string]int64{}
	for i, step := range v.Steps {
		before := snapshot(t, db)
		res, err := runStep(t, db, it, step)
		if step.Expect.Error != "" {
			if Code(err) != step.Expect.Error || !errors.Is(err, chain.ErrInvalid) && !errors.Is(err, chain.ErrNotFound) {
				t.Fatalf("step %d (%s %s): error %v, want %s", i, step.Op, step.ID, err, step.Expect.Error)
			}
			if after := snapshot(t, db); after != before {
				t.Fatalf("step %d: refused operation wrote:\n%s\nwas\n%s", i, after, before)
			}
			continue
		}
		if err != nil {
			t.Fatalf("step %d (%s %s): %v", i, step.Op, step.ID, err)
		}
		if step.Op == "define" {
			continue
		}
		legs := []vectorLeg{step.Expect}
		if step.Destination != nil {
			legs = append(legs, *step.Destination)
		}
		if len(res.Legs) != len(legs) {
			t.Fatalf("step %d: %d legs, want %d", i, len(res.Legs), len(legs))
		}
		for j, want := range legs {
			got := res.Legs[j]
			sums[got.Location] += got.ValueChange.Units()
			check := func(field, want string, got decimal.Decimal) {
				if want != "" && got.String() != want {
					t.Errorf("step %d (%s %s) leg %d: %s %s, want %s", i, step.Op, step.ID, j, field, got, want)
				}
			}
			check("value change", want.ValueChange, got.ValueChange)
			check("quantity", want.Quantity, got.Quantity)
			check("value", want.Value, got.Value)
			check("rate", want.Rate, got.Rate)
			if want.Settlements != nil {
				var records []settlementRecord
				for _, st := range got.Settlements {
					records = append(records, settlementRecord{Operation: st.OperationID, Quantity: st.Quantity.String(),
						Estimated: st.Estimated.String(), Actual: st.Actual.String(), Correction: st.Correction.String()})
				}
				if string(mustMarshal(records)) != string(mustMarshal(want.Settlements)) {
					t.Errorf("step %d: settlements %s, want %s", i, mustMarshal(records), mustMarshal(want.Settlements))
				}
			}
			if got.Quantity.IsZero() && !got.Value.IsZero() {
				t.Errorf("step %d: value %s at quantity zero", i, got.Value)
			}
		}
		// A retry replays and writes nothing.
		mid := snapshot(t, db)
		again, err := runStep(t, db, it, step)
		if err != nil || !again.Replayed || !reflect.DeepEqual(again.Legs, res.Legs) {
			t.Fatalf("step %d: retry %+v %v\nfirst %+v", i, again, err, res)
		}
		if snapshot(t, db) != mid {
			t.Fatalf("step %d: retry wrote", i)
		}
	}
	for loc, want := range v.Final {
		b, err := GetBalance(ctx, db, it.Tenant, it.ID, loc)
		if err != nil {
			t.Fatal(err)
		}
		if b.Quantity.String() != want.Quantity || b.Value.String() != want.Value {
			t.Errorf("final %s: %s / %s, want %s / %s", loc, b.Quantity, b.Value, want.Quantity, want.Value)
		}
		if sums[loc] != b.Value.Units() {
			t.Errorf("final %s: Σ value changes %s, value %s", loc, s.formatValue(sums[loc]), b.Value)
		}
		layers, err := Layers(ctx, db, it.Tenant, it.ID, loc, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got [][2]string
		for _, l := range layers {
			got = append(got, [2]string{l.Quantity.String(), l.Value.String()})
		}
		if string(mustMarshal(got)) != string(mustMarshal(want.Layers)) && !(len(got) == 0 && len(want.Layers) == 0) {
			t.Errorf("final %s layers %v, want %v", loc, got, want.Layers)
		}
	}
	mustCheck(t, db)
}

func runStep(t *testing.T, db *chain.DB, it Item, step vectorStep) (Result, error) {
	ctx := context.Background()
	s := it.scales()
	optional := func(text string, scale uint8, infer bool) *decimal.Decimal {
		if text == "" {
			return nil
		}
		if infer {
			var err error
			if scale, err = inferScale(text); err != nil {
				t.Fatal(err)
			}
		}
		return decPtr(t, text, scale)
	}
	quantity := func() decimal.Decimal {
		scale, err := inferScale(step.Quantity)
		if err != nil {
			t.Fatal(err)
		}
		return dec(t, step.Quantity, scale)
	}
	base := func() (string, string, string) { return it.Tenant, it.ID, step.Location }
	tenant, item, loc := base()
	switch step.Op {
	case "receive":
		return Receive(ctx, db, ReceiveRequest{Tenant: tenant, Item: item, Location: loc, OperationID: step.ID,
			Quantity: quantity(), UnitCost: optional(step.UnitCost, 0, true), Value: optional(step.Value, s.minor, true)})
	case "issue":
		return Issue(ctx, db, IssueRequest{Tenant: tenant, Item: item, Location: loc, OperationID: step.ID,
			Quantity: quantity(), EstimateRate: optional(step.EstimateRate, 0, true)})
	case "adjust":
		return Adjust(ctx, db, AdjustRequest{Tenant: tenant, Item: item, Location: loc, OperationID: step.ID,
			Amount: optional(step.Amount, 0, true), UnitCost: optional(step.UnitCost, 0, true)})
	case "transfer":
		return Transfer(ctx, db, TransferRequest{Tenant: tenant, Item: item, From: loc, To: step.To, OperationID: step.ID,
			Quantity: quantity(), EstimateRate: optional(step.EstimateRate, 0, true)})
	case "reverse":
		return Reverse(ctx, db, ReverseRequest{Tenant: tenant, Item: item, Location: loc, OperationID: step.ID, Reverses: step.Reverses})
	case "define":
		method, err := ParseMethod(step.Method)
		if err != nil {
			t.Fatal(err)
		}
		next := it
		next.Method = method
		_, err = DefineItem(ctx, db, next)
		return Result{}, err
	}
	t.Fatalf("unknown op %q", step.Op)
	return Result{}, nil
}

// decodeStrictTest decodes a vector file, refusing unknown fields.
func decodeStrictTest(data []byte, v any) error {
	d := json.NewDecoder(strings.NewReader(string(data)))
	d.DisallowUnknownFields()
	return d.Decode(v)
}
