package server

import (
	"net/http"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/internal/wire"
	"github.com/ledgerworks/ledger/valuations"
)

// ValLayersLimitDefault is the FIFO layers a page holds without limit=.
const ValLayersLimitDefault = 1000

func (s *Server) valRoutes() []*Route {
	const tag = "valuations"
	op := func(path, id, summary string, req any, write func(c *call) (func(tx txn) (any, error), error)) *Route {
		return &Route{Method: http.MethodPost, Path: path, ID: id, Tag: tag, Scope: scopeWrite, Guarded: true, Summary: summary,
			Request: req, Response: api.ValResult{}, Status: http.StatusCreated, write: write}
	}
	return []*Route{
		{Method: http.MethodPost, Path: "/v1/val/items", ID: "val.items.define", Tag: tag, Scope: scopeWrite, Guarded: true,
			Summary: "Define an item's valuation, or change its method (at quantity zero) or negative-stock policy",
			Request: api.ValItemRequest{}, Response: api.ValItem{}, Status: http.StatusOK, write: valDefineItem},
		{Method: http.MethodGet, Path: "/v1/val/items", ID: "val.items.list", Tag: tag, Scope: scopeRead,
			Summary: "List the tenant's valued items", Response: api.ValItemList{}, Status: http.StatusOK, read: valItems},
		op("/v1/val/receipts", "val.receipts.create", "Record a receipt at a unit cost or for a total value",
			api.ValReceiptRequest{}, valReceive),
		op("/v1/val/issues", "val.issues.create", "Record an issue; its value is computed", api.ValIssueRequest{}, valIssue),
		op("/v1/val/adjustments", "val.adjustments.create", "Change value without quantity, or revalue at a unit cost",
			api.ValAdjustmentRequest{}, valAdjust),
		op("/v1/val/transfers", "val.transfers.create", "Move quantity between locations at the source's valuation",
			api.ValTransferRequest{}, valTransfer),
		op("/v1/val/reversals", "val.reversals.create", "Append the opposite of an earlier operation",
			api.ValReversalRequest{}, valReverse),
		{Method: http.MethodGet, Path: "/v1/val/balances/{item}", ID: "val.balances.item", Tag: tag, Scope: scopeRead,
			Summary: "An item's quantity, value and rate at every location", Response: api.ValBalanceList{},
			Status: http.StatusOK, read: valBalances},
		{Method: http.MethodGet, Path: "/v1/val/balances/{item}/{location}", ID: "val.balances.get", Tag: tag, Scope: scopeRead,
			Summary:  "An item's valuation at a location, now or as of a seq of its value chain",
			Response: api.ValBalanceList{}, Status: http.StatusOK, read: valBalance,
			Query: []Param{{"at_seq", "int64", "the balance after this seq of the location's value chain"}}},
		{Method: http.MethodGet, Path: "/v1/val/layers/{item}/{location}", ID: "val.layers", Tag: tag, Scope: scopeRead,
			Summary: "The open FIFO layers of a location, oldest first", Response: api.ValLayerList{}, Status: http.StatusOK,
			read: valLayers, Query: []Param{{"limit", "integer", "most layers (default 1000)"}}},
	}
}

func valDefineItem(c *call) (func(tx txn) (any, error), error) {
	var req api.ValItemRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	m, err := valuations.ParseMethod(req.Method)
	if err != nil {
		return nil, err
	}
	it := valuations.Item{Tenant: c.tenant, ID: req.ID, Method: m, QuantityScale: req.QuantityScale,
		Currency: req.Currency, MinorUnit: req.MinorUnit, AllowNegative: req.AllowNegative}
	return func(tx txn) (any, error) {
		res, err := valuations.DefineItemTx(tx, it)
		if err != nil {
			return nil, err
		}
		out := wire.ValItem(res.Item)
		out.Seq, out.Unchanged = res.Entry.Seq, res.Unchanged
		return out, nil
	}, nil
}

func valItems(c *call) (any, error) {
	items, err := valuations.Items(c.ctx, c.s.db, c.tenant, "", 0)
	if err != nil {
		return nil, err
	}
	out := api.ValItemList{Items: []api.ValItem{}}
	for _, it := range items {
		out.Items = append(out.Items, wire.ValItem(it))
	}
	return out, nil
}

// valItem reads the item's declared scales, fixed once defined.
func valItem(c *call, id string) (valuations.Item, error) {
	return valuations.GetItem(c.ctx, c.s.db, c.tenant, id)
}

func valDecimal(what, text string, scale uint8) (decimal.Decimal, error) {
	d, err := decimal.Parse(text, scale)
	if err != nil {
		return decimal.Decimal{}, invalidf("%s %q at %d decimal places: %v", what, text, scale, err)
	}
	return d, nil
}

// valOptional parses an optional amount at scale; nil for "".
func valOptional(what, text string, scale uint8) (*decimal.Decimal, error) {
	if text == "" {
		return nil, nil
	}
	d, err := valDecimal(what, text, scale)
	return &d, err
}

func (c *call) valResult(item string, res valuations.Result) api.ValResult {
	out := wire.ValResult(c.tenant, item, res)
	for i := range out.Legs {
		out.Legs[i].QuantityChain = c.rel(out.Legs[i].QuantityChain)
		out.Legs[i].ValueChain = c.rel(out.Legs[i].ValueChain)
	}
	return out
}

func valRun(c *call, item string, op func(tx txn) (valuations.Result, error)) func(tx txn) (any, error) {
	return func(tx txn) (any, error) {
		res, err := op(tx)
		if err != nil {
			return nil, err
		}
		return c.valResult(item, res), nil
	}
}

func valReceive(c *call) (func(tx txn) (any, error), error) {
	var req api.ValReceiptRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	if (req.UnitCost == "") == (req.Value == "") {
		return nil, invalidf("give exactly one of unit_cost and value")
	}
	it, err := valItem(c, req.Item)
	if err != nil {
		return nil, err
	}
	r := valuations.ReceiveRequest{Tenant: c.tenant, Item: it.ID, Location: req.Location, OperationID: c.op()}
	if r.Quantity, err = valDecimal("quantity", req.Quantity, it.QuantityScale); err != nil {
		return nil, err
	}
	if r.UnitCost, err = wire.Rate("unit_cost", req.UnitCost); err != nil {
		return nil, invalidf("%v", err)
	}
	if r.Value, err = valOptional("value", req.Value, it.MinorUnit); err != nil {
		return nil, err
	}
	return valRun(c, it.ID, func(tx txn) (valuations.Result, error) { return valuations.ReceiveTx(tx, r) }), nil
}

func valIssue(c *call) (func(tx txn) (any, error), error) {
	var req api.ValIssueRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	it, err := valItem(c, req.Item)
	if err != nil {
		return nil, err
	}
	r := valuations.IssueRequest{Tenant: c.tenant, Item: it.ID, Location: req.Location, OperationID: c.op()}
	if r.Quantity, err = valDecimal("quantity", req.Quantity, it.QuantityScale); err != nil {
		return nil, err
	}
	if r.EstimateRate, err = wire.Rate("estimate_rate", req.EstimateRate); err != nil {
		return nil, invalidf("%v", err)
	}
	return valRun(c, it.ID, func(tx txn) (valuations.Result, error) { return valuations.IssueTx(tx, r) }), nil
}

func valAdjust(c *call) (func(tx txn) (any, error), error) {
	var req api.ValAdjustmentRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	if (req.Amount == "") == (req.UnitCost == "") {
		return nil, invalidf("give exactly one of amount and unit_cost")
	}
	it, err := valItem(c, req.Item)
	if err != nil {
		return nil, err
	}
	r := valuations.AdjustRequest{Tenant: c.tenant, Item: it.ID, Location: req.Location, OperationID: c.op()}
	if r.UnitCost, err = wire.Rate("unit_cost", req.UnitCost); err != nil {
		return nil, invalidf("%v", err)
	}
	if r.Amount, err = valOptional("amount", req.Amount, it.MinorUnit); err != nil {
		return nil, err
	}
	return valRun(c, it.ID, func(tx txn) (valuations.Result, error) { return valuations.AdjustTx(tx, r) }), nil
}

func valTransfer(c *call) (func(tx txn) (any, error), error) {
	var req api.ValTransferRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	it, err := valItem(c, req.Item)
	if err != nil {
		return nil, err
	}
	r := valuations.TransferRequest{Tenant: c.tenant, Item: it.ID, From: req.From, To: req.To, OperationID: c.op()}
	if r.Quantity, err = valDecimal("quantity", req.Quantity, it.QuantityScale); err != nil {
		return nil, err
	}
	if r.EstimateRate, err = wire.Rate("estimate_rate", req.EstimateRate); err != nil {
		return nil, invalidf("%v", err)
	}
	return valRun(c, it.ID, func(tx txn) (valuations.Result, error) { return valuations.TransferTx(tx, r) }), nil
}

func valReverse(c *call) (func(tx txn) (any, error), error) {
	var req api.ValReversalRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	if req.Reverses == "" {
		return nil, invalidf("reverses names the operation to reverse")
	}
	r := valuations.ReverseRequest{Tenant: c.tenant, Item: req.Item, Location: req.Location, OperationID: c.op(), Reverses: req.Reverses}
	return valRun(c, req.Item, func(tx txn) (valuations.Result, error) { return valuations.ReverseTx(tx, r) }), nil
}

func valBalances(c *call) (any, error) {
	balances, err := valuations.Balances(c.ctx, c.s.db, c.tenant, c.r.PathValue("item"))
	if err != nil {
		return nil, err
	}
	return valBalanceList(balances), nil
}

func valBalanceList(balances []valuations.Balance) api.ValBalanceList {
	out := api.ValBalanceList{Balances: []api.ValBalance{}}
	for _, b := range balances {
		out.Balances = append(out.Balances, wire.ValBalance(b))
	}
	return out
}

func valBalance(c *call) (any, error) {
	item, location := c.r.PathValue("item"), c.r.PathValue("location")
	atSeq, seqSet, err := c.uintQuery("at_seq", 0)
	if err != nil {
		return nil, err
	}
	var b valuations.Balance
	if seqSet {
		b, err = valuations.BalanceAt(c.ctx, c.s.db, c.tenant, item, location, atSeq)
	} else {
		b, err = valuations.GetBalance(c.ctx, c.s.db, c.tenant, item, location)
	}
	if err != nil {
		return nil, err
	}
	return valBalanceList([]valuations.Balance{b}), nil
}

func valLayers(c *call) (any, error) {
	limit, _, err := c.uintQuery("limit", ValLayersLimitDefault)
	if err != nil {
		return nil, err
	}
	if limit == 0 || limit > valuations.LayersMax {
		return nil, invalidf("limit=%d: want 1 to %d", limit, valuations.LayersMax)
	}
	layers, err := valuations.Layers(c.ctx, c.s.db, c.tenant, c.r.PathValue("item"), c.r.PathValue("location"), int(limit))
	if err != nil {
		return nil, err
	}
	out := api.ValLayerList{Layers: []api.ValLayer{}}
	for _, l := range layers {
		out.Layers = append(out.Layers, wire.ValLayer(l))
	}
	return out, nil
}
