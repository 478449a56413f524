package valuations

import (
	"context"
	"testing"

	"github.com/ledgerworks/ledger/chain"
)

// TestLayerNumbersAreReadable: a location's receipts give layers 1, 2, …;
// an issue reversed returns its quantity as a layer in front, numbered 0;
// ID stays the id of the state key, 2^63 for the first layer.
func TestLayerNumbersAreReadable(t *testing.T) {
	ctx := context.Background()
	eachBackend(t, func(t *testing.T, db *chain.DB) {
		it := item(FIFO)
		defineItem(t, db, it)
		for _, op := range []struct{ id, quantity, cost string }{{"r1", "10", "10.00"}, {"r2", "4", "12.00"}, {"r3", "2", "13.00"}} {
			if _, err := Receive(ctx, db, receipt(t, it, "WH-1", op.id, op.quantity, op.cost)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := Issue(ctx, db, IssueRequest{Tenant: it.Tenant, Item: it.ID, Location: "WH-1", OperationID: "i1",
			Quantity: dec(t, "3", it.QuantityScale)}); err != nil {
			t.Fatal(err)
		}
		if _, err := Reverse(ctx, db, ReverseRequest{Tenant: it.Tenant, Item: it.ID, Location: "WH-1", OperationID: "x1", Reverses: "i1"}); err != nil {
			t.Fatal(err)
		}
		layers, err := Layers(ctx, db, it.Tenant, it.ID, "WH-1", 0)
		if err != nil {
			t.Fatal(err)
		}
		var numbers []int64
		for _, l := range layers {
			numbers = append(numbers, l.Number)
			if LayerNumber(l.ID) != l.Number {
				t.Fatalf("layer %+v: LayerNumber(ID) = %d", l, LayerNumber(l.ID))
			}
		}
		if len(numbers) != 4 || numbers[0] != 0 || numbers[1] != 1 || numbers[2] != 2 || numbers[3] != 3 {
			t.Fatalf("layer numbers %v, want [0 1 2 3] (the returned issue first)", numbers)
		}
		if layers[1].ID != 1<<63 {
			t.Fatalf("first receipt's layer id %d, want 2^63", layers[1].ID)
		}
		mustCheck(t, db)
	})
}
