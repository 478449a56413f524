package client

import (
	"context"

	"github.com/ledgerworks/ledger/api"
)

// DefineValItem defines an item's valuation, or changes its method (only
// at quantity zero) or negative-stock policy.
func (c *Client) DefineValItem(ctx context.Context, req api.ValItemRequest, opts ...CallOption) (api.ValItem, error) {
	var out api.ValItem
	err := c.post(ctx, newRoute("/v1/val/items"), req, &out, opts)
	return out, err
}

// ValItems lists the valued items.
func (c *Client) ValItems(ctx context.Context, opts ...CallOption) (api.ValItemList, error) {
	var out api.ValItemList
	err := c.get(ctx, newRoute("/v1/val/items"), nil, &out, opts)
	return out, err
}

// ValReceipt values goods received; the operation id is derived from the
// call's Idempotency-Key.
func (c *Client) ValReceipt(ctx context.Context, req api.ValReceiptRequest, opts ...CallOption) (api.ValResult, error) {
	return c.valOperation(ctx, "/v1/val/receipts", req, opts)
}

// ValIssue values goods issued at their computed cost.
func (c *Client) ValIssue(ctx context.Context, req api.ValIssueRequest, opts ...CallOption) (api.ValResult, error) {
	return c.valOperation(ctx, "/v1/val/issues", req, opts)
}

// ValAdjustment changes a location's value (an amount, or a revaluation
// at a unit cost).
func (c *Client) ValAdjustment(ctx context.Context, req api.ValAdjustmentRequest, opts ...CallOption) (api.ValResult, error) {
	return c.valOperation(ctx, "/v1/val/adjustments", req, opts)
}

// ValTransfer moves quantity and value between two locations.
func (c *Client) ValTransfer(ctx context.Context, req api.ValTransferRequest, opts ...CallOption) (api.ValResult, error) {
	return c.valOperation(ctx, "/v1/val/transfers", req, opts)
}

// ValReversal records the opposite of an earlier operation.
func (c *Client) ValReversal(ctx context.Context, req api.ValReversalRequest, opts ...CallOption) (api.ValResult, error) {
	return c.valOperation(ctx, "/v1/val/reversals", req, opts)
}

func (c *Client) valOperation(ctx context.Context, path string, req any, opts []CallOption) (api.ValResult, error) {
	var out api.ValResult
	err := c.post(ctx, newRoute(path), req, &out, opts)
	return out, err
}

// ValBalances reads an item's valuation at every location.
func (c *Client) ValBalances(ctx context.Context, item string, opts ...CallOption) (api.ValBalanceList, error) {
	var out api.ValBalanceList
	err := c.get(ctx, newRoute("/v1/val/balances").seg("item", item), nil, &out, opts)
	return out, err
}

// ValBalance reads an item's valuation at a location, as of its quantity
// chain's entry atSeq (the current one when 0).
func (c *Client) ValBalance(ctx context.Context, item, location string, atSeq uint64, opts ...CallOption) (api.ValBalanceList, error) {
	var out api.ValBalanceList
	r := newRoute("/v1/val/balances").seg("item", item).seg("location", location)
	err := c.get(ctx, r, query{}.uint("at_seq", atSeq).values(), &out, opts)
	return out, err
}

// ValLayers reads up to limit open FIFO layers of an item at a location
// (the server's default when 0).
func (c *Client) ValLayers(ctx context.Context, item, location string, limit int, opts ...CallOption) (api.ValLayerList, error) {
	var out api.ValLayerList
	r := newRoute("/v1/val/layers").seg("item", item).seg("location", location)
	err := c.get(ctx, r, query{}.int("limit", int64(limit)).values(), &out, opts)
	return out, err
}
