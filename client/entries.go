package client

import (
	"context"

	"github.com/ledgerworks/ledger/api"
)

// AppendEntry appends a raw entry to the tenant's chain name (POST
// /v1/chains/{name}/entries). A retry of the intent returns the original
// entry. The domain chains (stock, fin, val, outbox, inbox) are written
// only through their own routes.
func (c *Client) AppendEntry(ctx context.Context, name string, req api.AppendRequest, opts ...CallOption) (api.AppendResponse, error) {
	var out api.AppendResponse
	err := c.post(ctx, newRoute("/v1/chains").chain(name).lit("/entries"), req, &out, opts)
	return out, err
}

// Entry reads the entry seq of chain name.
func (c *Client) Entry(ctx context.Context, name string, seq uint64, opts ...CallOption) (api.Entry, error) {
	var out api.Entry
	r := newRoute("/v1/chains").chain(name).lit("/entries").seg("seq", uintString(seq))
	err := c.get(ctx, r, nil, &out, opts)
	return out, err
}

// Entries reads up to limit entries of chain name from seq from (the
// server's defaults when 0); EntryPage.NextSeq continues.
func (c *Client) Entries(ctx context.Context, name string, from uint64, limit int, opts ...CallOption) (api.EntryPage, error) {
	var out api.EntryPage
	q := query{}.uint("from", from).int("limit", int64(limit))
	err := c.get(ctx, newRoute("/v1/chains").chain(name).lit("/entries"), q.values(), &out, opts)
	return out, err
}

// Head reads the newest entry of chain name.
func (c *Client) Head(ctx context.Context, name string, opts ...CallOption) (api.Head, error) {
	var out api.Head
	err := c.get(ctx, newRoute("/v1/chains").chain(name).lit("/head"), nil, &out, opts)
	return out, err
}
