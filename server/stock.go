package server

import (
	"context"
	"net/http"
	"time"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/internal/wire"
	"github.com/ledgerworks/ledger/stockmovement"
)

// Limits of the stock reads.
const (
	// StockHistoryLimitDefault is the movements a history page holds
	// without limit=.
	StockHistoryLimitDefault = 100
	// StockHistoryLimitMax bounds limit=.
	StockHistoryLimitMax = 10_000
)

func (s *Server) stockRoutes() []*Route {
	const tag = "stock"
	movement := func(path, id, summary string, req any, write func(c *call) (func(tx txn) (any, error), error)) *Route {
		return &Route{Method: http.MethodPost, Path: path, ID: id, Tag: tag, Scope: scopeWrite, Guarded: true, Summary: summary,
			Request: req, Response: api.StockResult{}, Status: http.StatusCreated, write: write}
	}
	return []*Route{
		{Method: http.MethodPost, Path: "/v1/stock/items", ID: "stock.items.define", Tag: tag, Scope: scopeWrite, Guarded: true,
			Summary: "Define an item, or record a change to its definition", Request: api.StockItemRequest{},
			Response: api.StockItem{}, Status: http.StatusOK, write: stockDefineItem},
		{Method: http.MethodGet, Path: "/v1/stock/items", ID: "stock.items.list", Tag: tag, Scope: scopeRead,
			Summary: "List the tenant's items", Response: api.StockItemList{}, Status: http.StatusOK, read: stockItems},
		{Method: http.MethodPost, Path: "/v1/stock/locations", ID: "stock.locations.define", Tag: tag, Scope: scopeWrite, Guarded: true,
			Summary: "Define a location, or record a new name for it", Request: api.StockLocationRequest{},
			Response: api.StockLocation{}, Status: http.StatusOK, write: stockDefineLocation},
		{Method: http.MethodGet, Path: "/v1/stock/locations", ID: "stock.locations.list", Tag: tag, Scope: scopeRead,
			Summary: "List the tenant's locations", Response: api.StockLocationList{}, Status: http.StatusOK, read: stockLocations},
		movement("/v1/stock/receipts", "stock.receipts.create", "Record a receipt of an item at a location",
			api.StockMovementRequest{}, stockReceive),
		movement("/v1/stock/issues", "stock.issues.create", "Record an issue (refused if it would leave negative stock)",
			api.StockMovementRequest{}, stockIssue),
		movement("/v1/stock/adjustments", "stock.adjustments.create", "Adjust a balance by a signed quantity, for a reason",
			api.StockAdjustmentRequest{}, stockAdjust),
		movement("/v1/stock/transfers", "stock.transfers.create", "Move a quantity between two locations, atomically",
			api.StockTransferRequest{}, stockTransfer),
		movement("/v1/stock/reversals", "stock.reversals.create", "Cancel a movement by appending its opposite",
			api.StockReversalRequest{}, stockReverse),
		{Method: http.MethodGet, Path: "/v1/stock/balances/{item}", ID: "stock.balances.item", Tag: tag, Scope: scopeRead,
			Summary: "An item's balance at every location, with the total", Response: api.StockTotal{}, Status: http.StatusOK,
			read: stockItemBalances},
		{Method: http.MethodGet, Path: "/v1/stock/balances/{item}/{location}", ID: "stock.balances.get", Tag: tag, Scope: scopeRead,
			Summary: "An item's balance at a location: now, after a seq, or as recorded at a time", Response: api.StockBalance{},
			Status: http.StatusOK, read: stockBalance,
			Query: []Param{{"at_seq", "int64", "the balance after this seq of the location's chain"},
				{"at_time", "string", "the balance as recorded at this time (RFC 3339)"}}},
		{Method: http.MethodGet, Path: "/v1/stock/history/{item}/{location}", ID: "stock.history", Tag: tag, Scope: scopeRead,
			Summary: "The movements of an item at a location, a page at a time", Response: api.StockHistory{}, Status: http.StatusOK,
			read:  stockHistory,
			Query: []Param{{"from", "int64", "first seq (default 1)"}, {"limit", "integer", "most movements (default 100)"}}},
	}
}

func stockDefineItem(c *call) (func(tx txn) (any, error), error) {
	var req api.StockItemRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	it := stockmovement.Item{ID: req.ID, Name: req.Name, Scale: req.Scale, AllowNegative: req.AllowNegative}
	if err := stockmovement.ValidateItem(it); err != nil {
		return nil, err
	}
	return func(tx txn) (any, error) {
		res, err := stockmovement.DefineItemTx(tx, c.tenant, it)
		if err != nil {
			return nil, err
		}
		return wire.StockItem(c.tenant, res), nil
	}, nil
}

func stockDefineLocation(c *call) (func(tx txn) (any, error), error) {
	var req api.StockLocationRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	l := stockmovement.Location{ID: req.ID, Name: req.Name}
	if err := stockmovement.ValidateLocation(l); err != nil {
		return nil, err
	}
	return func(tx txn) (any, error) {
		res, err := stockmovement.DefineLocationTx(tx, c.tenant, l)
		if err != nil {
			return nil, err
		}
		return wire.StockLocation(c.tenant, res), nil
	}, nil
}

func stockItems(c *call) (any, error) {
	items, err := stockmovement.Items(c.ctx, c.s.db, c.tenant, "", 0)
	if err != nil {
		return nil, err
	}
	out := api.StockItemList{Items: []api.StockItem{}}
	for _, it := range items {
		out.Items = append(out.Items, wire.StockItem(c.tenant, it))
	}
	return out, nil
}

func stockLocations(c *call) (any, error) {
	locations, err := stockmovement.Locations(c.ctx, c.s.db, c.tenant, "", 0)
	if err != nil {
		return nil, err
	}
	out := api.StockLocationList{Locations: []api.StockLocation{}}
	for _, l := range locations {
		out.Locations = append(out.Locations, wire.StockLocation(c.tenant, l))
	}
	return out, nil
}

// stockQuantity parses a quantity at the item's declared scale (fixed once
// defined, so it may be read before the write's transaction).
func stockQuantity(ctx context.Context, c *call, item, text string) (decimal.Decimal, error) {
	it, err := stockmovement.GetItem(ctx, c.s.db, c.tenant, item)
	if err != nil {
		return decimal.Decimal{}, err
	}
	q, err := decimal.Parse(text, it.Scale)
	if err != nil {
		return decimal.Decimal{}, invalidf("quantity %q for item %s (scale %d): %v", text, item, it.Scale, err)
	}
	return q, nil
}

// stockResult is a movement's entries with chain names relative to the
// tenant.
func (c *call) stockResult(res stockmovement.Result) api.StockResult {
	out := wire.StockResult(res)
	for i := range out.Entries {
		c.relStockEntry(&out.Entries[i])
	}
	return out
}

func (c *call) relStockEntry(e *api.StockEntry) {
	e.Chain = c.rel(e.Chain)
	if e.OriginalChain != "" {
		e.OriginalChain = c.rel(e.OriginalChain)
	}
}

func stockRun(c *call, op func(tx txn) (stockmovement.Result, error)) func(tx txn) (any, error) {
	return func(tx txn) (any, error) {
		res, err := op(tx)
		if err != nil {
			return nil, err
		}
		return c.stockResult(res), nil
	}
}

func stockMovement(c *call) (api.StockMovementRequest, decimal.Decimal, error) {
	var req api.StockMovementRequest
	if err := c.decode(&req); err != nil {
		return req, decimal.Decimal{}, err
	}
	q, err := stockQuantity(c.ctx, c, req.Item, req.Quantity)
	return req, q, err
}

func stockReceive(c *call) (func(tx txn) (any, error), error) {
	req, q, err := stockMovement(c)
	if err != nil {
		return nil, err
	}
	r := stockmovement.ReceiveRequest{Tenant: c.tenant, Item: req.Item, Location: req.Location, Quantity: q,
		Reference: req.Reference, Note: req.Note, IdempotencyKey: c.op()}
	return stockRun(c, func(tx txn) (stockmovement.Result, error) { return stockmovement.ReceiveTx(tx, r) }), nil
}

func stockIssue(c *call) (func(tx txn) (any, error), error) {
	req, q, err := stockMovement(c)
	if err != nil {
		return nil, err
	}
	r := stockmovement.IssueRequest{Tenant: c.tenant, Item: req.Item, Location: req.Location, Quantity: q,
		Reference: req.Reference, Note: req.Note, IdempotencyKey: c.op()}
	return stockRun(c, func(tx txn) (stockmovement.Result, error) { return stockmovement.IssueTx(tx, r) }), nil
}

func stockAdjust(c *call) (func(tx txn) (any, error), error) {
	var req api.StockAdjustmentRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	q, err := stockQuantity(c.ctx, c, req.Item, req.Quantity)
	if err != nil {
		return nil, err
	}
	r := stockmovement.AdjustRequest{Tenant: c.tenant, Item: req.Item, Location: req.Location, Quantity: q, Reason: req.Reason,
		Reference: req.Reference, Note: req.Note, IdempotencyKey: c.op()}
	return stockRun(c, func(tx txn) (stockmovement.Result, error) { return stockmovement.AdjustTx(tx, r) }), nil
}

func stockTransfer(c *call) (func(tx txn) (any, error), error) {
	var req api.StockTransferRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	q, err := stockQuantity(c.ctx, c, req.Item, req.Quantity)
	if err != nil {
		return nil, err
	}
	r := stockmovement.TransferRequest{Tenant: c.tenant, Item: req.Item, From: req.From, To: req.To, Quantity: q,
		Reference: req.Reference, Note: req.Note, IdempotencyKey: c.op()}
	return stockRun(c, func(tx txn) (stockmovement.Result, error) { return stockmovement.TransferTx(tx, r) }), nil
}

func stockReverse(c *call) (func(tx txn) (any, error), error) {
	var req api.StockReversalRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	if req.Chain == "" || req.Seq == 0 {
		return nil, invalidf("a reversal names the movement's chain and seq")
	}
	r := stockmovement.ReverseRequest{Tenant: c.tenant, Original: stockmovement.Ref{Chain: c.full(req.Chain), Seq: req.Seq},
		Reference: req.Reference, Note: req.Note, IdempotencyKey: c.op()}
	return stockRun(c, func(tx txn) (stockmovement.Result, error) { return stockmovement.ReverseTx(tx, r) }), nil
}

func stockItemBalances(c *call) (any, error) {
	item := c.r.PathValue("item")
	balances, err := stockmovement.ItemBalances(c.ctx, c.s.db, c.tenant, item)
	if err != nil {
		return nil, err
	}
	total, err := stockmovement.ItemTotal(c.ctx, c.s.db, c.tenant, item)
	if err != nil {
		return nil, err
	}
	out := api.StockTotal{Tenant: c.tenant, Item: item, Total: total.String(), Balances: []api.StockBalance{}}
	for _, b := range balances {
		out.Balances = append(out.Balances, wire.StockBalance(b))
	}
	return out, nil
}

func stockBalance(c *call) (any, error) {
	item, location := c.r.PathValue("item"), c.r.PathValue("location")
	atSeq, seqSet, err := c.uintQuery("at_seq", 0)
	if err != nil {
		return nil, err
	}
	atTime := c.r.URL.Query().Get("at_time")
	if seqSet && atTime != "" {
		return nil, invalidf("give at_seq or at_time, not both")
	}
	var b stockmovement.Balance
	switch {
	case seqSet:
		b, err = stockmovement.BalanceAtSeq(c.ctx, c.s.db, c.tenant, item, location, atSeq)
	case atTime != "":
		at, perr := time.Parse(time.RFC3339Nano, atTime)
		if perr != nil {
			return nil, invalidf("at_time %q: want RFC 3339, such as 2026-11-02T09:00:00Z", atTime)
		}
		b, err = stockmovement.BalanceAtTime(c.ctx, c.s.db, c.tenant, item, location, at)
	default:
		b, err = stockmovement.GetBalance(c.ctx, c.s.db, c.tenant, item, location)
	}
	if err != nil {
		return nil, err
	}
	return wire.StockBalance(b), nil
}

func stockHistory(c *call) (any, error) {
	item, location := c.r.PathValue("item"), c.r.PathValue("location")
	from, _, err := c.uintQuery("from", 1)
	if err != nil {
		return nil, err
	}
	limit, _, err := c.uintQuery("limit", StockHistoryLimitDefault)
	if err != nil {
		return nil, err
	}
	if from == 0 || limit == 0 || limit > StockHistoryLimitMax {
		return nil, invalidf("from=%d limit=%d: seqs start at 1; limit is 1 to %d", from, limit, StockHistoryLimitMax)
	}
	current, err := stockmovement.GetBalance(c.ctx, c.s.db, c.tenant, item, location)
	if err != nil {
		return nil, err
	}
	name, _ := stockmovement.MovementChain(c.tenant, item, location)
	out := api.StockHistory{Chain: c.rel(name), Entries: []api.StockEntry{}}
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	size := 0
	for e, err := range stockmovement.History(ctx, c.s.db, c.tenant, item, location, from) {
		if err != nil {
			return nil, err
		}
		se := wire.StockEntry(e)
		c.relStockEntry(&se)
		n := len(marshal(se)) + 1 // and its comma
		if len(out.Entries) > 0 && size+n > ResponseSizeMax {
			break // the page ends early, with next_seq
		}
		size += n
		out.Entries = append(out.Entries, se)
		if uint64(len(out.Entries)) == limit {
			break
		}
	}
	if n := len(out.Entries); n > 0 && out.Entries[n-1].Seq < current.Seq {
		out.NextSeq = out.Entries[n-1].Seq + 1
	}
	return out, nil
}
