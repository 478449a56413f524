package client

import (
	"context"
	"encoding/json"

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

// Chains lists the heads of the tenant's chains whose names start with
// prefix, from the name fromName on ("" for the first page: a page's
// NextFromName gives the next), at most limit (the server's default when
// 0).
func (c *Client) Chains(ctx context.Context, prefix, fromName string, limit int, opts ...CallOption) (api.ChainList, error) {
	var out api.ChainList
	q := query{}.str("prefix", prefix).str("from_name", fromName).int("limit", int64(limit))
	err := c.get(ctx, newRoute("/v1/chains"), q.values(), &out, opts)
	return out, err
}

// ProveEntry returns the entry proof file (docs/PROOFS.md) of chain name's
// entry seq against the newest checkpoint the server signed, byte for byte
// (audit.ParseEntryProof reads it). 404 NOT_FOUND when the server signs no
// checkpoint or the entry is newer than the last one.
func (c *Client) ProveEntry(ctx context.Context, name string, seq uint64, opts ...CallOption) ([]byte, error) {
	var out json.RawMessage
	q := query{}.str("chain", name).uint("seq", seq)
	err := c.get(ctx, newRoute("/v1/proofs/entry"), q.values(), &out, opts)
	return out, err
}

// Head reads the newest entry of chain name.
func (c *Client) Head(ctx context.Context, name string, opts ...CallOption) (api.Head, error) {
	var out api.Head
	err := c.get(ctx, newRoute("/v1/chains").chain(name).lit("/head"), nil, &out, opts)
	return out, err
}
