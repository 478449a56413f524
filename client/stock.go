package client

import (
	"context"
	"time"

	"github.com/ledgerworks/ledger/api"
)

// DefineStockItem defines an item of the stock catalog, or records a
// change to its definition (Unchanged when it was already recorded).
func (c *Client) DefineStockItem(ctx context.Context, req api.StockItemRequest, opts ...CallOption) (api.StockItem, error) {
	var out api.StockItem
	err := c.post(ctx, newRoute("/v1/stock/items"), req, &out, opts)
	return out, err
}

// StockItems lists the stock catalog's items.
func (c *Client) StockItems(ctx context.Context, opts ...CallOption) (api.StockItemList, error) {
	var out api.StockItemList
	err := c.get(ctx, newRoute("/v1/stock/items"), nil, &out, opts)
	return out, err
}

// DefineStockLocation defines a location of the stock catalog.
func (c *Client) DefineStockLocation(ctx context.Context, req api.StockLocationRequest, opts ...CallOption) (api.StockLocation, error) {
	var out api.StockLocation
	err := c.post(ctx, newRoute("/v1/stock/locations"), req, &out, opts)
	return out, err
}

// StockLocations lists the stock catalog's locations.
func (c *Client) StockLocations(ctx context.Context, opts ...CallOption) (api.StockLocationList, error) {
	var out api.StockLocationList
	err := c.get(ctx, newRoute("/v1/stock/locations"), nil, &out, opts)
	return out, err
}

// StockReceipt records goods received at a location.
func (c *Client) StockReceipt(ctx context.Context, req api.StockMovementRequest, opts ...CallOption) (api.StockResult, error) {
	return c.stockMovement(ctx, "/v1/stock/receipts", req, opts)
}

// StockIssue records goods issued from a location.
func (c *Client) StockIssue(ctx context.Context, req api.StockMovementRequest, opts ...CallOption) (api.StockResult, error) {
	return c.stockMovement(ctx, "/v1/stock/issues", req, opts)
}

// StockAdjustment records a signed correction of a location's quantity.
func (c *Client) StockAdjustment(ctx context.Context, req api.StockAdjustmentRequest, opts ...CallOption) (api.StockResult, error) {
	return c.stockMovement(ctx, "/v1/stock/adjustments", req, opts)
}

// StockTransfer moves goods between two locations in one transaction.
func (c *Client) StockTransfer(ctx context.Context, req api.StockTransferRequest, opts ...CallOption) (api.StockResult, error) {
	return c.stockMovement(ctx, "/v1/stock/transfers", req, opts)
}

// StockReversal cancels a movement by appending its opposite.
func (c *Client) StockReversal(ctx context.Context, req api.StockReversalRequest, opts ...CallOption) (api.StockResult, error) {
	return c.stockMovement(ctx, "/v1/stock/reversals", req, opts)
}

func (c *Client) stockMovement(ctx context.Context, path string, req any, opts []CallOption) (api.StockResult, error) {
	var out api.StockResult
	err := c.post(ctx, newRoute(path), req, &out, opts)
	return out, err
}

// StockTotal reads an item's balance at every location and their total.
func (c *Client) StockTotal(ctx context.Context, item string, opts ...CallOption) (api.StockTotal, error) {
	var out api.StockTotal
	err := c.get(ctx, newRoute("/v1/stock/balances").seg("item", item), nil, &out, opts)
	return out, err
}

// StockAt names a point in a movement chain's history: its entry Seq, or
// the balance as recorded at Time; the current balance when both are zero
// (the server refuses both at once).
type StockAt struct {
	Seq  uint64
	Time time.Time
}

// StockBalance reads an item's quantity at a location, at a point in time.
func (c *Client) StockBalance(ctx context.Context, item, location string, at StockAt, opts ...CallOption) (api.StockBalance, error) {
	var out api.StockBalance
	q := query{}.uint("at_seq", at.Seq)
	if !at.Time.IsZero() {
		q = q.str("at_time", at.Time.UTC().Format(time.RFC3339Nano))
	}
	err := c.get(ctx, newRoute("/v1/stock/balances").seg("item", item).seg("location", location), q.values(), &out, opts)
	return out, err
}

// StockHistory reads up to limit movements of an item at a location from
// seq from (the server's defaults when 0); NextSeq continues.
func (c *Client) StockHistory(ctx context.Context, item, location string, from uint64, limit int, opts ...CallOption) (api.StockHistory, error) {
	var out api.StockHistory
	q := query{}.uint("from", from).int("limit", int64(limit))
	err := c.get(ctx, newRoute("/v1/stock/history").seg("item", item).seg("location", location), q.values(), &out, opts)
	return out, err
}
