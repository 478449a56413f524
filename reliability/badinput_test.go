package reliability

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/financial"
	"github.com/ledgerworks/ledger/stockmovement"
	"github.com/ledgerworks/ledger/storage/storagetest"
	"github.com/ledgerworks/ledger/valuations"
)

// badInput is one refused call: it must return an error matching every
// error of want and leave the ledger exactly as it was.
type badInput struct {
	name string
	call func(ctx context.Context, db *chain.DB) error
	want []error
}

// Sentinels of the test's own making.
var (
	errCallerFailed = errors.New("caller's function failed")
	errPanicked     = errors.New("update function panicked")
)

// badTenant owns the seeded ledger of the bad-input tests.
const badTenant = "acme"

// seedLedger writes a little of everything under badTenant: a raw entry,
// definitions (an item that does not allow negative stock), a stock
// receipt of 10, a valuation receipt of 10 at 2.50 and a posting of 100.00.
func seedLedger(t *testing.T, db *chain.DB) {
	t.Helper()
	ctx := context.Background()
	if err := setupTenant(ctx, db, badTenant, false); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, db, chain.Request{Chain: rawBadChain(), IdempotencyKey: "k1", Type: "raw/v1", Payload: []byte("x")})
	if _, err := stockmovement.Receive(ctx, db, stockmovement.ReceiveRequest{Tenant: badTenant, Item: crashItem,
		Location: crashLocations[0], Quantity: decimal.MustNew(10, 0), IdempotencyKey: "r1"}); err != nil {
		t.Fatal(err)
	}
	cost := decimal.MustNew(250, 2)
	if _, err := valuations.Receive(ctx, db, valuations.ReceiveRequest{Tenant: badTenant, Item: crashItem,
		Location: crashLocations[0], OperationID: "v1", Quantity: decimal.MustNew(10, 0), UnitCost: &cost}); err != nil {
		t.Fatal(err)
	}
	if _, err := bookOf(db, badTenant).Post(ctx, posting("p1", 10000)); err != nil {
		t.Fatal(err)
	}
}

func rawBadChain() string { return mustChain(chain.ScopedName(badTenant, "raw", "one")) }

// posting debits inventory and credits goods received with cents.
func posting(key string, cents int64) financial.Posting {
	amount := decimal.MustNew(cents, 2)
	return financial.Posting{Key: key, Date: financial.MustParseDate("2026-11-29"), Lines: []financial.Line{
		{Account: crashInventory, Side: financial.Debit, Amount: amount, Currency: crashCurrency},
		{Account: crashReceived, Side: financial.Credit, Amount: amount, Currency: crashCurrency},
	}}
}

// update runs fn in an Update, turning a panic (raised again by Update)
// into errPanicked.
func update(ctx context.Context, db *chain.DB, fn func(tx *chain.Tx) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", errPanicked, p)
		}
	}()
	return db.Update(ctx, fn)
}

// withGoodAppend runs, in one Update, a valid append and a stock receipt
// first and then fn: fn's refusal must undo them too.
func withGoodAppend(fn func(tx *chain.Tx) error) func(ctx context.Context, db *chain.DB) error {
	return func(ctx context.Context, db *chain.DB) error {
		return update(ctx, db, func(tx *chain.Tx) error {
			if _, err := tx.Append(chain.Request{Chain: rawBadChain(), IdempotencyKey: "good", Type: "raw/v1", Payload: []byte("ok")}); err != nil {
				return err
			}
			if _, err := stockmovement.ReceiveTx(tx, stockmovement.ReceiveRequest{Tenant: badTenant, Item: crashItem,
				Location: crashLocations[1], Quantity: decimal.MustNew(1, 0), IdempotencyKey: "good"}); err != nil {
				return err
			}
			if err := tx.StatePut([]byte("raw/"+badTenant+"/good"), []byte("written")); err != nil {
				return err
			}
			return fn(tx)
		})
	}
}

// appendRequest is a call of DB.Append.
func appendRequest(r chain.Request) func(ctx context.Context, db *chain.DB) error {
	return func(ctx context.Context, db *chain.DB) error {
		_, err := db.Append(ctx, r)
		return err
	}
}

// appendEntry calls Tx.AppendEntry with the raw chain's valid next entry,
// changed by change (which may recompute the hash).
func appendEntry(change func(e *chain.Entry)) func(ctx context.Context, db *chain.DB) error {
	return func(ctx context.Context, db *chain.DB) error {
		return update(ctx, db, func(tx *chain.Tx) error {
			head, err := tx.Head(rawBadChain())
			if err != nil {
				return err
			}
			e := chain.Entry{Chain: rawBadChain(), Seq: head.Seq + 1, PrevHash: head.Hash, TimeUnixNano: head.TimeUnixNano + 1,
				IdempotencyKey: "imported", Type: "raw/v1", Payload: []byte("imported")}
			e.Hash = e.ComputeHash()
			change(&e)
			return tx.AppendEntry(e)
		})
	}
}

func chainBadInputs() []badInput {
	c := rawBadChain()
	long := func(n int) string { return strings.Repeat("a", n) }
	req := func(change func(r *chain.Request)) chain.Request {
		r := chain.Request{Chain: c, IdempotencyKey: "new", Type: "raw/v1", Payload: []byte("y")}
		change(&r)
		return r
	}
	invalid := func(sentinel error) []error { return []error{sentinel, chain.ErrInvalid} }
	rehash := func(e *chain.Entry) { e.Hash = e.ComputeHash() }
	return []badInput{
		{"Append/empty chain", appendRequest(req(func(r *chain.Request) { r.Chain = "" })), invalid(chain.ErrInvalidChain)},
		{"Append/chain too long", appendRequest(req(func(r *chain.Request) { r.Chain = long(chain.ChainLengthMax + 1) })), invalid(chain.ErrInvalidChain)},
		{"Append/chain not UTF-8", appendRequest(req(func(r *chain.Request) { r.Chain = "acme/\xff" })), invalid(chain.ErrInvalidChain)},
		{"Append/chain with NUL", appendRequest(req(func(r *chain.Request) { r.Chain = "acme\x00raw" })), invalid(chain.ErrInvalidChain)},
		{"Append/chain with newline", appendRequest(req(func(r *chain.Request) { r.Chain = c + "\n" })), invalid(chain.ErrInvalidChain)},
		{"Append/chain with DEL", appendRequest(req(func(r *chain.Request) { r.Chain = c + "\x7f" })), invalid(chain.ErrInvalidChain)},
		{"Append/chain with C1 control", appendRequest(req(func(r *chain.Request) { r.Chain = c + "\u0085" })), invalid(chain.ErrInvalidChain)},
		{"Append/key too long", appendRequest(req(func(r *chain.Request) { r.IdempotencyKey = long(chain.IdempotencyKeyLengthMax + 1) })), invalid(chain.ErrInvalidKey)},
		{"Append/key not UTF-8", appendRequest(req(func(r *chain.Request) { r.IdempotencyKey = "\xc3" })), invalid(chain.ErrInvalidKey)},
		{"Append/key with tab", appendRequest(req(func(r *chain.Request) { r.IdempotencyKey = "k\t1" })), invalid(chain.ErrInvalidKey)},
		{"Append/empty type", appendRequest(req(func(r *chain.Request) { r.Type = "" })), invalid(chain.ErrInvalidType)},
		{"Append/type too long", appendRequest(req(func(r *chain.Request) { r.Type = long(chain.TypeLengthMax + 1) })), invalid(chain.ErrInvalidType)},
		{"Append/type with escape", appendRequest(req(func(r *chain.Request) { r.Type = "raw\x1b/v1" })), invalid(chain.ErrInvalidType)},
		{"Append/payload too large", appendRequest(req(func(r *chain.Request) { r.Payload = make([]byte, chain.PayloadSizeMaxDefault+1) })), invalid(chain.ErrPayloadTooLarge)},
		{"Append/key reused with another payload", appendRequest(req(func(r *chain.Request) { r.IdempotencyKey = "k1" })), []error{chain.ErrIdempotencyConflict}},
		{"Append/key reused with another type", appendRequest(req(func(r *chain.Request) { r.IdempotencyKey, r.Type, r.Payload = "k1", "raw/v2", []byte("x") })), []error{chain.ErrIdempotencyConflict}},
		{"Update/invalid append after a good one", withGoodAppend(func(tx *chain.Tx) error {
			_, err := tx.Append(chain.Request{Chain: "", Type: "raw/v1"})
			return err
		}), invalid(chain.ErrInvalidChain)},
		{"Update/conflicting append after a good one", withGoodAppend(func(tx *chain.Tx) error {
			_, err := tx.Append(chain.Request{Chain: c, IdempotencyKey: "k1", Type: "raw/v1", Payload: []byte("other")})
			return err
		}), []error{chain.ErrIdempotencyConflict}},
		{"Update/function fails after writing", withGoodAppend(func(tx *chain.Tx) error { return errCallerFailed }), []error{errCallerFailed}},
		{"Update/function panics after writing", withGoodAppend(func(tx *chain.Tx) error { panic("boom") }), []error{errPanicked}},
		{"AppendEntry/seq skips one", appendEntry(func(e *chain.Entry) { e.Seq++; rehash(e) }), invalid(chain.ErrInvalidEntry)},
		{"AppendEntry/seq repeats the head", appendEntry(func(e *chain.Entry) { e.Seq--; rehash(e) }), invalid(chain.ErrInvalidEntry)},
		{"AppendEntry/prev_hash wrong", appendEntry(func(e *chain.Entry) { e.PrevHash[0] ^= 1; rehash(e) }), invalid(chain.ErrInvalidEntry)},
		{"AppendEntry/hash wrong", appendEntry(func(e *chain.Entry) { e.Hash[31] ^= 1 }), invalid(chain.ErrInvalidEntry)},
		{"AppendEntry/payload changed after hashing", appendEntry(func(e *chain.Entry) { e.Payload = []byte("changed") }), invalid(chain.ErrInvalidEntry)},
		{"AppendEntry/time before the head", appendEntry(func(e *chain.Entry) { e.TimeUnixNano -= 2; rehash(e) }), invalid(chain.ErrInvalidEntry)},
		{"AppendEntry/key the chain holds", appendEntry(func(e *chain.Entry) { e.IdempotencyKey = "k1"; rehash(e) }), []error{chain.ErrIdempotencyConflict}},
		{"AppendEntry/invalid type", appendEntry(func(e *chain.Entry) { e.Type = ""; rehash(e) }), invalid(chain.ErrInvalidType)},
		{"AppendEntry/invalid chain", appendEntry(func(e *chain.Entry) { e.Chain = "\xff"; rehash(e) }), invalid(chain.ErrInvalidChain)},
		{"Get/seq 0", func(ctx context.Context, db *chain.DB) error { _, err := db.Get(ctx, c, 0); return err }, []error{chain.ErrNotFound}},
		{"Get/seq beyond the head", func(ctx context.Context, db *chain.DB) error { _, err := db.Get(ctx, c, 2); return err }, []error{chain.ErrNotFound}},
		{"Get/missing chain", func(ctx context.Context, db *chain.DB) error { _, err := db.Get(ctx, c+"x", 1); return err }, []error{chain.ErrNotFound}},
		{"Lookup/missing key", func(ctx context.Context, db *chain.DB) error { _, err := db.Lookup(ctx, c, "k2"); return err }, []error{chain.ErrNotFound}},
		{"Lookup/key of another chain", func(ctx context.Context, db *chain.DB) error {
			_, err := db.Lookup(ctx, mustChain(chain.ScopedName("other", "raw", "one")), "k1")
			return err
		}, []error{chain.ErrNotFound}},
		{"Head/missing chain", func(ctx context.Context, db *chain.DB) error { _, err := db.Head(ctx, c+"x"); return err }, []error{chain.ErrNotFound}},
		{"View/append", func(ctx context.Context, db *chain.DB) error {
			return db.View(ctx, func(tx *chain.Tx) error {
				_, err := tx.Append(chain.Request{Chain: c, Type: "raw/v1"})
				return err
			})
		}, []error{chain.ErrReadOnly}},
		{"View/state put", func(ctx context.Context, db *chain.DB) error {
			return db.View(ctx, func(tx *chain.Tx) error { return tx.StatePut([]byte("raw/x"), []byte("y")) })
		}, []error{chain.ErrReadOnly}},
		{"View/append entry", func(ctx context.Context, db *chain.DB) error {
			return db.View(ctx, func(tx *chain.Tx) error { return tx.AppendEntry(chain.Entry{Chain: c, Seq: 2, Type: "raw/v1"}) })
		}, []error{chain.ErrReadOnly}},
		{"ScopedName/separator in a component", func(ctx context.Context, db *chain.DB) error {
			_, err := chain.ScopedName(badTenant, "raw", "one/two")
			return err
		}, invalid(chain.ErrInvalidChain)},
		{"ScopedName/empty tenant", func(ctx context.Context, db *chain.DB) error {
			_, err := chain.ScopedName("", "raw", "one")
			return err
		}, invalid(chain.ErrInvalidChain)},
	}
}

func stockBadInputs() []badInput {
	receive := func(change func(r *stockmovement.ReceiveRequest)) func(ctx context.Context, db *chain.DB) error {
		return func(ctx context.Context, db *chain.DB) error {
			r := stockmovement.ReceiveRequest{Tenant: badTenant, Item: crashItem, Location: crashLocations[0],
				Quantity: decimal.MustNew(5, 0), IdempotencyKey: "r2"}
			change(&r)
			_, err := stockmovement.Receive(ctx, db, r)
			return err
		}
	}
	transfer := func(change func(r *stockmovement.TransferRequest)) func(ctx context.Context, db *chain.DB) error {
		return func(ctx context.Context, db *chain.DB) error {
			r := stockmovement.TransferRequest{Tenant: badTenant, Item: crashItem, From: crashLocations[0], To: crashLocations[1],
				Quantity: decimal.MustNew(5, 0), IdempotencyKey: "t1"}
			change(&r)
			_, err := stockmovement.Transfer(ctx, db, r)
			return err
		}
	}
	movementChain := mustChain(stockmovement.MovementChain(badTenant, crashItem, crashLocations[0]))
	return []badInput{
		{"Receive/unknown item", receive(func(r *stockmovement.ReceiveRequest) { r.Item = "SKU-404" }), []error{stockmovement.ErrItemNotFound, chain.ErrNotFound}},
		{"Receive/unknown location", receive(func(r *stockmovement.ReceiveRequest) { r.Location = "WH-404" }), []error{stockmovement.ErrLocationNotFound}},
		{"Receive/zero quantity", receive(func(r *stockmovement.ReceiveRequest) { r.Quantity = decimal.MustNew(0, 0) }), []error{stockmovement.ErrZeroQuantity, chain.ErrInvalid}},
		{"Receive/negative quantity", receive(func(r *stockmovement.ReceiveRequest) { r.Quantity = decimal.MustNew(-5, 0) }), []error{stockmovement.ErrNegativeQuantity}},
		{"Receive/quantity at another scale", receive(func(r *stockmovement.ReceiveRequest) { r.Quantity = decimal.MustNew(55, 1) }), []error{stockmovement.ErrScaleMismatch}},
		{"Receive/no idempotency key", receive(func(r *stockmovement.ReceiveRequest) { r.IdempotencyKey = "" }), []error{stockmovement.ErrInvalidKey}},
		{"Receive/tenant with separator", receive(func(r *stockmovement.ReceiveRequest) { r.Tenant = "acme/raw" }), []error{chain.ErrInvalid}},
		{"Receive/key reused with another quantity", receive(func(r *stockmovement.ReceiveRequest) { r.IdempotencyKey = "r1" }), []error{chain.ErrIdempotencyConflict}},
		{"Receive/quantity overflows the balance", receive(func(r *stockmovement.ReceiveRequest) { r.Quantity = decimal.MustNew(1<<63-1, 0) }), []error{stockmovement.ErrOverflow}},
		{"Issue/more than the balance", func(ctx context.Context, db *chain.DB) error {
			_, err := stockmovement.Issue(ctx, db, stockmovement.IssueRequest{Tenant: badTenant, Item: crashItem,
				Location: crashLocations[0], Quantity: decimal.MustNew(11, 0), IdempotencyKey: "i1"})
			return err
		}, []error{stockmovement.ErrNegativeStock, chain.ErrInvalid}},
		{"Adjust/no reason", func(ctx context.Context, db *chain.DB) error {
			_, err := stockmovement.Adjust(ctx, db, stockmovement.AdjustRequest{Tenant: badTenant, Item: crashItem,
				Location: crashLocations[0], Quantity: decimal.MustNew(-1, 0), IdempotencyKey: "a1"})
			return err
		}, []error{stockmovement.ErrMissingReason}},
		{"Transfer/within one location", transfer(func(r *stockmovement.TransferRequest) { r.To = r.From }), []error{stockmovement.ErrSameLocation}},
		{"Transfer/more than the balance", transfer(func(r *stockmovement.TransferRequest) { r.Quantity = decimal.MustNew(11, 0) }), []error{stockmovement.ErrNegativeStock}},
		{"Transfer/unknown target", transfer(func(r *stockmovement.TransferRequest) { r.To = "WH-404" }), []error{stockmovement.ErrLocationNotFound}},
		{"Reverse/another tenant's movement", func(ctx context.Context, db *chain.DB) error {
			_, err := stockmovement.Reverse(ctx, db, stockmovement.ReverseRequest{Tenant: "other",
				Original: stockmovement.Ref{Chain: movementChain, Seq: 1}, IdempotencyKey: "x1"})
			return err
		}, []error{stockmovement.ErrCrossTenant}},
		{"Reverse/seq beyond the head", func(ctx context.Context, db *chain.DB) error {
			_, err := stockmovement.Reverse(ctx, db, stockmovement.ReverseRequest{Tenant: badTenant,
				Original: stockmovement.Ref{Chain: movementChain, Seq: 99}, IdempotencyKey: "x1"})
			return err
		}, []error{chain.ErrNotFound}},
		{"Reverse/not a movement chain", func(ctx context.Context, db *chain.DB) error {
			_, err := stockmovement.Reverse(ctx, db, stockmovement.ReverseRequest{Tenant: badTenant,
				Original: stockmovement.Ref{Chain: rawBadChain(), Seq: 1}, IdempotencyKey: "x1"})
			return err
		}, []error{stockmovement.ErrInvalidReference}},
		{"DefineItem/scale change", func(ctx context.Context, db *chain.DB) error {
			_, err := stockmovement.DefineItem(ctx, db, badTenant, stockmovement.Item{ID: crashItem, Scale: 3})
			return err
		}, []error{stockmovement.ErrScaleChange}},
		{"ReceiveTx/refused after good writes in one Update", withGoodAppend(func(tx *chain.Tx) error {
			_, err := stockmovement.ReceiveTx(tx, stockmovement.ReceiveRequest{Tenant: badTenant, Item: crashItem,
				Location: crashLocations[0], Quantity: decimal.MustNew(0, 0), IdempotencyKey: "r3"})
			return err
		}), []error{stockmovement.ErrZeroQuantity}},
	}
}

func financialBadInputs() []badInput {
	post := func(change func(p *financial.Posting)) func(ctx context.Context, db *chain.DB) error {
		return func(ctx context.Context, db *chain.DB) error {
			p := posting("p2", 500)
			change(&p)
			_, err := bookOf(db, badTenant).Post(ctx, p)
			return err
		}
	}
	return []badInput{
		{"Post/unbalanced", post(func(p *financial.Posting) { p.Lines[1].Amount = decimal.MustNew(499, 2) }), []error{financial.ErrUnbalanced, chain.ErrInvalid}},
		{"Post/unknown account", post(func(p *financial.Posting) { p.Lines[0].Account = "9999" }), []error{financial.ErrAccountNotFound}},
		{"Post/unknown currency", post(func(p *financial.Posting) { p.Lines[0].Currency, p.Lines[1].Currency = "USD", "USD" }), []error{financial.ErrCurrencyNotFound}},
		{"Post/amount at another exponent", post(func(p *financial.Posting) {
			p.Lines[0].Amount, p.Lines[1].Amount = decimal.MustNew(5000, 3), decimal.MustNew(5000, 3)
		}), []error{financial.ErrExponent}},
		{"Post/zero amount", post(func(p *financial.Posting) {
			p.Lines[0].Amount, p.Lines[1].Amount = decimal.MustNew(0, 2), decimal.MustNew(0, 2)
		}), []error{financial.ErrAmount}},
		{"Post/negative amount", post(func(p *financial.Posting) {
			p.Lines[0].Amount, p.Lines[1].Amount = decimal.MustNew(-500, 2), decimal.MustNew(-500, 2)
		}), []error{financial.ErrAmount}},
		{"Post/no key", post(func(p *financial.Posting) { p.Key = "" }), []error{financial.ErrInvalidPosting}},
		{"Post/one line", post(func(p *financial.Posting) { p.Lines = p.Lines[:1] }), []error{financial.ErrInvalidPosting}},
		{"Post/date out of range", post(func(p *financial.Posting) { p.Date = financial.DateMax + 1 }), []error{financial.ErrInvalidDate}},
		{"Post/reverses set by the caller", post(func(p *financial.Posting) { p.Reverses = 1 }), []error{financial.ErrInvalidPosting}},
		{"Post/memo with control character", post(func(p *financial.Posting) { p.Memo = "a\x00b" }), []error{financial.ErrInvalidPosting}},
		{"Post/key reused with another amount", post(func(p *financial.Posting) { p.Key = "p1" }), []error{chain.ErrIdempotencyConflict}},
		{"Reverse/unknown posting", func(ctx context.Context, db *chain.DB) error {
			_, err := bookOf(db, badTenant).Reverse(ctx, financial.Reversal{Key: "p404", Date: financial.MustParseDate("2026-11-29")})
			return err
		}, []error{financial.ErrPostingNotFound}},
		{"AddAccount/code with separator", func(ctx context.Context, db *chain.DB) error {
			_, err := bookOf(db, badTenant).AddAccount(ctx, financial.Account{Code: "13/00", Name: "x", Type: financial.Asset})
			return err
		}, []error{financial.ErrInvalidAccount}},
		{"AddAccount/redefinition", func(ctx context.Context, db *chain.DB) error {
			_, err := bookOf(db, badTenant).AddAccount(ctx, financial.Account{Code: crashInventory, Name: "Stock", Type: financial.Asset})
			return err
		}, []error{chain.ErrIdempotencyConflict}},
		{"AddCurrency/lower-case code", func(ctx context.Context, db *chain.DB) error {
			_, err := bookOf(db, badTenant).AddCurrency(ctx, financial.Currency{Code: "eur", Exponent: 2})
			return err
		}, []error{financial.ErrInvalidCurrency}},
		{"AddCurrency/other exponent", func(ctx context.Context, db *chain.DB) error {
			_, err := bookOf(db, badTenant).AddCurrency(ctx, financial.Currency{Code: crashCurrency, Exponent: 3})
			return err
		}, []error{chain.ErrIdempotencyConflict}},
		{"NewBook/tenant with separator", func(ctx context.Context, db *chain.DB) error {
			_, err := financial.NewBook(db, "acme/x", crashBook)
			return err
		}, []error{financial.ErrInvalidBook}},
		{"PostTx/unbalanced after good writes in one Update", withGoodAppend(func(tx *chain.Tx) error {
			p := posting("p3", 100)
			p.Lines[0].Amount = decimal.MustNew(101, 2)
			_, err := bookOf(nil, badTenant).PostTx(tx, p)
			return err
		}), []error{financial.ErrUnbalanced}},
	}
}

func valuationBadInputs() []badInput {
	cost := decimal.MustNew(250, 2)
	receive := func(change func(r *valuations.ReceiveRequest)) func(ctx context.Context, db *chain.DB) error {
		return func(ctx context.Context, db *chain.DB) error {
			r := valuations.ReceiveRequest{Tenant: badTenant, Item: crashItem, Location: crashLocations[0],
				OperationID: "v2", Quantity: decimal.MustNew(5, 0), UnitCost: &cost}
			change(&r)
			_, err := valuations.Receive(ctx, db, r)
			return err
		}
	}
	negative := decimal.MustNew(-1, 2)
	value := decimal.MustNew(1000, 2)
	return []badInput{
		{"Receive/unknown item", receive(func(r *valuations.ReceiveRequest) { r.Item = "SKU-404" }), []error{valuations.ErrUnknownItem}},
		{"Receive/zero quantity", receive(func(r *valuations.ReceiveRequest) { r.Quantity = decimal.MustNew(0, 0) }), []error{valuations.ErrZeroQuantity}},
		{"Receive/quantity at another scale", receive(func(r *valuations.ReceiveRequest) { r.Quantity = decimal.MustNew(50, 1) }), []error{valuations.ErrScale}},
		{"Receive/unit cost and value", receive(func(r *valuations.ReceiveRequest) { r.Value = &value }), []error{valuations.ErrInvalidOperation}},
		{"Receive/neither unit cost nor value", receive(func(r *valuations.ReceiveRequest) { r.UnitCost = nil }), []error{valuations.ErrInvalidOperation}},
		{"Receive/negative unit cost", receive(func(r *valuations.ReceiveRequest) { r.UnitCost = &negative }), []error{valuations.ErrNegativeAmount}},
		{"Receive/empty operation id", receive(func(r *valuations.ReceiveRequest) { r.OperationID = "" }), []error{valuations.ErrInvalidOperation}},
		{"Receive/operation id reused differently", receive(func(r *valuations.ReceiveRequest) { r.OperationID = "v1" }), []error{valuations.ErrOperationConflict, chain.ErrIdempotencyConflict}},
		{"Issue/more than the stock", func(ctx context.Context, db *chain.DB) error {
			_, err := valuations.Issue(ctx, db, valuations.IssueRequest{Tenant: badTenant, Item: crashItem,
				Location: crashLocations[0], OperationID: "v3", Quantity: decimal.MustNew(11, 0)})
			return err
		}, []error{valuations.ErrInsufficientStock}},
		{"Transfer/more than the stock", func(ctx context.Context, db *chain.DB) error {
			_, err := valuations.Transfer(ctx, db, valuations.TransferRequest{Tenant: badTenant, Item: crashItem,
				From: crashLocations[0], To: crashLocations[1], OperationID: "v4", Quantity: decimal.MustNew(11, 0)})
			return err
		}, []error{valuations.ErrInsufficientStock}},
		{"Reverse/unknown operation", func(ctx context.Context, db *chain.DB) error {
			_, err := valuations.Reverse(ctx, db, valuations.ReverseRequest{Tenant: badTenant, Item: crashItem,
				Location: crashLocations[0], OperationID: "v5", Reverses: "v404"})
			return err
		}, []error{valuations.ErrUnknownOperation}},
		{"DefineItem/currency change", func(ctx context.Context, db *chain.DB) error {
			_, err := valuations.DefineItem(ctx, db, valuations.Item{Tenant: badTenant, ID: crashItem,
				Method: valuations.MovingAverage, Currency: "USD", MinorUnit: 2})
			return err
		}, []error{valuations.ErrInvalidItem}},
		{"ReceiveTx/refused after good writes in one Update", withGoodAppend(func(tx *chain.Tx) error {
			_, err := valuations.ReceiveTx(tx, valuations.ReceiveRequest{Tenant: badTenant, Item: crashItem,
				Location: crashLocations[0], OperationID: "v6", Quantity: decimal.MustNew(5, 0)})
			return err
		}), []error{valuations.ErrInvalidOperation}},
	}
}

// TestBadInputLeavesEverythingUnchanged runs every bad input of every
// public entry point against a seeded ledger, on every backend: each
// returns an error matching its typed sentinels, and every head, entry and
// state pair is the same afterwards (compared, not assumed).
func TestBadInputLeavesEverythingUnchanged(t *testing.T) {
	t.Parallel()
	groups := []struct {
		name   string
		inputs []badInput
	}{
		{"chain", chainBadInputs()},
		{"stockmovement", stockBadInputs()},
		{"financial", financialBadInputs()},
		{"valuations", valuationBadInputs()},
	}
	for _, f := range storagetest.Factories(t) {
		t.Run(f.Name, func(t *testing.T) {
			db, err := chain.OpenBackend(f.Open(t), chain.Options{Clock: testClock()})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			seedLedger(t, db)
			ctx := context.Background()
			before := takeSnapshot(t, db)
			tried := map[string]int{}
			for _, g := range groups {
				for _, in := range g.inputs {
					tried[g.name]++
					err := in.call(ctx, db)
					for _, want := range in.want {
						if !errors.Is(err, want) {
							t.Errorf("%s %s: error %v does not match %v", g.name, in.name, err, want)
						}
					}
					if d := diffSnapshots(before, takeSnapshot(t, db)); d != "" {
						t.Fatalf("%s %s: the ledger changed: %s", g.name, in.name, d)
					}
				}
			}
			assertVerifies(t, db)
			for name, check := range map[string]func(context.Context, *chain.DB) ([]chain.Failure, error){
				"stockmovement": stockmovement.Check, "financial": financial.Check, "valuations": valuations.Check,
			} {
				if failures, err := check(ctx, db); err != nil || len(failures) > 0 {
					t.Errorf("%s.Check: %v %v", name, failures, err)
				}
			}
			t.Logf("bad inputs refused with nothing written: %v", tried)
		})
	}
}

// TestBadVerifyOptions: saved heads that do not match are failures in the
// report, not operating errors, and FailuresMax bounds what is kept.
func TestBadVerifyOptions(t *testing.T) {
	t.Parallel()
	db, _ := newFile(t)
	seedLedger(t, db)
	ctx := context.Background()
	before := takeSnapshot(t, db)
	c := rawBadChain()
	head, err := db.Head(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	wrong := head
	wrong.Hash[0] ^= 1
	beyond := head
	beyond.Seq++
	missing := chain.Head{Chain: c + "-missing", Seq: 1}
	report, err := db.Verify(ctx, chain.VerifyOptions{ExpectHeads: []chain.Head{wrong, beyond, missing}})
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	reasons := map[string]chain.Reason{}
	for _, f := range report.Failures {
		reasons[fmt.Sprintf("%s/%d", f.Chain, f.Seq)] = f.Reason
	}
	for _, h := range []chain.Head{wrong, beyond, missing} {
		if reasons[fmt.Sprintf("%s/%d", h.Chain, h.Seq)] != chain.ReasonHeadMismatch {
			t.Errorf("saved head %s seq %d: failures %v, want a head mismatch", h.Chain, h.Seq, report.Failures)
		}
	}
	report, err = db.Verify(ctx, chain.VerifyOptions{ExpectHeads: []chain.Head{wrong, beyond, missing}, FailuresMax: 1})
	if err != nil || len(report.Failures) != 1 || !report.Truncated {
		t.Errorf("FailuresMax 1: %d failures, truncated %v, err %v", len(report.Failures), report.Truncated, err)
	}
	report, err = db.Verify(ctx, chain.VerifyOptions{Chains: []string{c + "-missing"}})
	if err != nil || !report.OK() || report.Chains != 0 {
		t.Errorf("verify of a chain that does not exist: %+v %v; want an empty, OK report", report, err)
	}
	if d := diffSnapshots(before, takeSnapshot(t, db)); d != "" {
		t.Fatalf("verify changed the ledger: %s", d)
	}
}
