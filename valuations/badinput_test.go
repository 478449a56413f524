package valuations

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
)

// TestBadInput runs every refused request through both entry points (own
// transaction and caller's transaction) and asserts the typed error, its
// engine class, and that no chain head and no state byte changed.
func TestBadInput(t *testing.T) {
	ctx := context.Background()
	eachMethod(t, func(t *testing.T, db *chain.DB, it Item) {
		if _, err := Receive(ctx, db, receipt(t, it, "WH-1", "r1", "10", "10.00")); err != nil {
			t.Fatal(err)
		}
		q := func(text string, scale uint8) decimal.Decimal { return dec(t, text, scale) }
		p := func(text string, scale uint8) *decimal.Decimal { return decPtr(t, text, scale) }
		base := ReceiveRequest{Tenant: it.Tenant, Item: it.ID, Location: "WH-1", OperationID: "bad", Quantity: q("1", 0), UnitCost: p("1.00", 2)}
		with := func(change func(r *ReceiveRequest)) ReceiveRequest {
			r := base
			change(&r)
			return r
		}
		issue := IssueRequest{Tenant: it.Tenant, Item: it.ID, Location: "WH-1", OperationID: "bad", Quantity: q("11", 0)}
		huge := decimal.MustNew(1<<62, 0)
		cases := []struct {
			name     string
			op       entryPoints
			sentinel error
			class    error
		}{
			{"unknown item", receiveOp(with(func(r *ReceiveRequest) { r.Item = "nope" })), ErrUnknownItem, chain.ErrNotFound},
			{"unknown tenant", receiveOp(with(func(r *ReceiveRequest) { r.Tenant = "other" })), ErrUnknownItem, chain.ErrNotFound},
			{"wrong quantity scale", receiveOp(with(func(r *ReceiveRequest) { r.Quantity = q("1.0", 1) })), ErrScale, chain.ErrInvalid},
			{"wrong value scale", receiveOp(with(func(r *ReceiveRequest) { r.UnitCost, r.Value = nil, p("1.000", 3) })), ErrScale, chain.ErrInvalid},
			{"unit cost beyond rate places", receiveOp(with(func(r *ReceiveRequest) { r.UnitCost = p("1.000000000001", 12) })), ErrScale, chain.ErrInvalid},
			{"zero quantity", receiveOp(with(func(r *ReceiveRequest) { r.Quantity = q("0", 0) })), ErrZeroQuantity, chain.ErrInvalid},
			{"negative quantity", receiveOp(with(func(r *ReceiveRequest) { r.Quantity = q("-1", 0) })), ErrZeroQuantity, chain.ErrInvalid},
			{"negative cost", receiveOp(with(func(r *ReceiveRequest) { r.UnitCost = p("-1.00", 2) })), ErrNegativeAmount, chain.ErrInvalid},
			{"negative value", receiveOp(with(func(r *ReceiveRequest) { r.UnitCost, r.Value = nil, p("-1.00", 2) })), ErrNegativeAmount, chain.ErrInvalid},
			{"cost and value", receiveOp(with(func(r *ReceiveRequest) { r.Value = p("1.00", 2) })), ErrInvalidOperation, chain.ErrInvalid},
			{"neither cost nor value", receiveOp(with(func(r *ReceiveRequest) { r.UnitCost = nil })), ErrInvalidOperation, chain.ErrInvalid},
			{"empty operation id", receiveOp(with(func(r *ReceiveRequest) { r.OperationID = "" })), ErrInvalidOperation, chain.ErrInvalid},
			{"long operation id", receiveOp(with(func(r *ReceiveRequest) { r.OperationID = strings.Repeat("x", OperationIDLengthMax+1) })), ErrInvalidOperation, chain.ErrInvalid},
			{"control character", receiveOp(with(func(r *ReceiveRequest) { r.OperationID = "a\nb" })), ErrInvalidOperation, chain.ErrInvalid},
			{"location with separator", receiveOp(with(func(r *ReceiveRequest) { r.Location = "WH/1" })), ErrInvalidOperation, chain.ErrInvalid},
			{"quantity overflow", receiveOp(with(func(r *ReceiveRequest) { r.Quantity = decimal.MustNew(1<<63-1, 0) })), ErrOverflow, chain.ErrInvalid},
			{"value overflow", receiveOp(with(func(r *ReceiveRequest) { r.Quantity, r.UnitCost = huge, p("100.00", 2) })), ErrOverflow, chain.ErrInvalid},
			{"rate overflow", receiveOp(with(func(r *ReceiveRequest) { r.UnitCost = p("100000000.00", 2) })), ErrOverflow, chain.ErrInvalid},
			{"issue beyond stock", issueOp(issue), ErrInsufficientStock, chain.ErrInvalid},
			{"issue wrong scale", issueOp(IssueRequest{Tenant: it.Tenant, Item: it.ID, Location: "WH-1", OperationID: "bad", Quantity: q("1.00", 2)}), ErrScale, chain.ErrInvalid},
			{"adjust nothing", adjustOp(AdjustRequest{Tenant: it.Tenant, Item: it.ID, Location: "WH-1", OperationID: "bad"}), ErrInvalidOperation, chain.ErrInvalid},
			{"adjust zero", adjustOp(AdjustRequest{Tenant: it.Tenant, Item: it.ID, Location: "WH-1", OperationID: "bad", Amount: p("0.00", 2)}), ErrInvalidOperation, chain.ErrInvalid},
			{"adjust both", adjustOp(AdjustRequest{Tenant: it.Tenant, Item: it.ID, Location: "WH-1", OperationID: "bad", Amount: p("1.00", 2), UnitCost: p("1.00", 2)}), ErrInvalidOperation, chain.ErrInvalid},
			{"adjust empty location", adjustOp(AdjustRequest{Tenant: it.Tenant, Item: it.ID, Location: "WH-2", OperationID: "bad", Amount: p("1.00", 2)}), ErrNoStock, chain.ErrInvalid},
			{"adjust below zero", adjustOp(AdjustRequest{Tenant: it.Tenant, Item: it.ID, Location: "WH-1", OperationID: "bad", Amount: p("-100.01", 2)}), ErrNegativeValue, chain.ErrInvalid},
			{"transfer to itself", transferOp(TransferRequest{Tenant: it.Tenant, Item: it.ID, From: "WH-1", To: "WH-1", OperationID: "bad", Quantity: q("1", 0)}), ErrInvalidOperation, chain.ErrInvalid},
			{"transfer beyond stock", transferOp(TransferRequest{Tenant: it.Tenant, Item: it.ID, From: "WH-1", To: "WH-2", OperationID: "bad", Quantity: q("11", 0)}), ErrInsufficientStock, chain.ErrInvalid},
			{"reverse unknown", reverseOp(ReverseRequest{Tenant: it.Tenant, Item: it.ID, Location: "WH-1", OperationID: "bad", Reverses: "nope"}), ErrUnknownOperation, chain.ErrNotFound},
			{"reverse itself", reverseOp(ReverseRequest{Tenant: it.Tenant, Item: it.ID, Location: "WH-1", OperationID: "r1", Reverses: "r1"}), ErrInvalidOperation, chain.ErrInvalid},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				before := snapshot(t, db)
				_, err := c.op.own(ctx, db)
				if !errors.Is(err, c.sentinel) || !errors.Is(err, c.class) {
					t.Fatalf("own transaction: %v, want %v and %v", err, c.sentinel, c.class)
				}
				var e *Error
				if !errors.As(err, &e) || e.Detail == "" {
					t.Fatalf("not an *Error with detail: %#v", err)
				}
				err = db.Update(ctx, func(tx *chain.Tx) error { _, err := c.op.tx(tx); return err })
				if !errors.Is(err, c.sentinel) || !errors.Is(err, c.class) {
					t.Fatalf("caller's transaction: %v", err)
				}
				if after := snapshot(t, db); after != before {
					t.Fatalf("refused request wrote:\n%s\nwas\n%s", after, before)
				}
			})
		}
		if _, err := Issue(ctx, db, issue); err == nil || !strings.Contains(err.Error(), "shortfall of 1") {
			t.Fatalf("the message does not name the shortfall: %v", err)
		}
		mustCheck(t, db)
	})
}

func TestBadItemDefinitions(t *testing.T) {
	ctx := context.Background()
	eachBackend(t, func(t *testing.T, db *chain.DB) {
		good := item(FIFO)
		for name, change := range map[string]func(*Item){
			"no method":          func(it *Item) { it.Method = 0 },
			"quantity scale":     func(it *Item) { it.QuantityScale = QuantityScaleMax + 1 },
			"minor unit":         func(it *Item) { it.MinorUnit = MinorUnitMax + 1 },
			"lowercase currency": func(it *Item) { it.Currency = "eur" },
			"long currency":      func(it *Item) { it.Currency = "EURO" },
			"empty id":           func(it *Item) { it.ID = "" },
			"id with separator":  func(it *Item) { it.ID = "a/b" },
			"empty tenant":       func(it *Item) { it.Tenant = "" },
		} {
			bad := good
			change(&bad)
			before := snapshot(t, db)
			if _, err := DefineItem(ctx, db, bad); !errors.Is(err, ErrInvalidItem) || !errors.Is(err, chain.ErrInvalid) {
				t.Errorf("%s: %v", name, err)
			}
			if snapshot(t, db) != before {
				t.Errorf("%s: wrote", name)
			}
		}
	})
}

// entryPoints are the two ways to run one request.
type entryPoints struct {
	own func(ctx context.Context, db *chain.DB) (Result, error)
	tx  func(tx *chain.Tx) (Result, error)
}

func receiveOp(r ReceiveRequest) entryPoints {
	return entryPoints{func(ctx context.Context, db *chain.DB) (Result, error) { return Receive(ctx, db, r) },
		func(tx *chain.Tx) (Result, error) { return ReceiveTx(tx, r) }}
}

func issueOp(r IssueRequest) entryPoints {
	return entryPoints{func(ctx context.Context, db *chain.DB) (Result, error) { return Issue(ctx, db, r) },
		func(tx *chain.Tx) (Result, error) { return IssueTx(tx, r) }}
}

func adjustOp(r AdjustRequest) entryPoints {
	return entryPoints{func(ctx context.Context, db *chain.DB) (Result, error) { return Adjust(ctx, db, r) },
		func(tx *chain.Tx) (Result, error) { return AdjustTx(tx, r) }}
}

func transferOp(r TransferRequest) entryPoints {
	return entryPoints{func(ctx context.Context, db *chain.DB) (Result, error) { return Transfer(ctx, db, r) },
		func(tx *chain.Tx) (Result, error) { return TransferTx(tx, r) }}
}

func reverseOp(r ReverseRequest) entryPoints {
	return entryPoints{func(ctx context.Context, db *chain.DB) (Result, error) { return Reverse(ctx, db, r) },
		func(tx *chain.Tx) (Result, error) { return ReverseTx(tx, r) }}
}
