package client

import (
	"context"
	"net/http"

	"github.com/ledgerworks/ledger/api"
)

// PurchaseReceipt records goods received, their valuation, the journal
// posting and an outbox message in one ledger transaction, every part
// keyed from the call's Idempotency-Key.
func (c *Client) PurchaseReceipt(ctx context.Context, req api.PurchaseReceiptRequest, opts ...CallOption) (api.BusinessEvent, error) {
	var out api.BusinessEvent
	err := c.post(ctx, newRoute("/v1/purchase-receipts"), req, &out, opts)
	return out, err
}

// SalesIssue records goods issued at their cost, the journal posting and
// an outbox message in one ledger transaction.
func (c *Client) SalesIssue(ctx context.Context, req api.SalesIssueRequest, opts ...CallOption) (api.BusinessEvent, error) {
	var out api.BusinessEvent
	err := c.post(ctx, newRoute("/v1/sales-issues"), req, &out, opts)
	return out, err
}

// OutboxFilter selects outbox messages; zero fields select all (and the
// server's default limit).
type OutboxFilter struct {
	Topic  string
	Status string // pending, leased, done or dead
	Limit  int
}

// OutboxMessages lists outbox messages (admin).
func (c *Client) OutboxMessages(ctx context.Context, f OutboxFilter, opts ...CallOption) (api.OutboxMessageList, error) {
	var out api.OutboxMessageList
	q := query{}.str("topic", f.Topic).str("status", f.Status).int("limit", int64(f.Limit))
	err := c.get(ctx, newRoute("/v1/outbox/messages"), q.values(), &out, opts)
	return out, err
}

// OutboxMessage reads one message with its headers, payload and whole
// delivery history (admin).
func (c *Client) OutboxMessage(ctx context.Context, id string, opts ...CallOption) (api.OutboxMessageHistory, error) {
	var out api.OutboxMessageHistory
	err := c.get(ctx, newRoute("/v1/outbox/messages").seg("id", id), nil, &out, opts)
	return out, err
}

// DeadMessages returns the first page of the dead letters of a topic, or
// of every topic when topic is empty (admin); OutboxMessageList.NextFrom
// continues with DeadMessagesFrom.
func (c *Client) DeadMessages(ctx context.Context, topic string, opts ...CallOption) (api.OutboxMessageList, error) {
	return c.DeadMessagesFrom(ctx, topic, "", opts...)
}

// DeadMessagesFrom returns the page of dead letters that begins with the
// message from (a previous page's NextFrom; the first page when empty).
func (c *Client) DeadMessagesFrom(ctx context.Context, topic, from string, opts ...CallOption) (api.OutboxMessageList, error) {
	var out api.OutboxMessageList
	err := c.get(ctx, newRoute("/v1/outbox/dead"), query{}.str("topic", topic).str("from", from).values(), &out, opts)
	return out, err
}

// OutboxStats counts the messages of a topic, or of every topic (admin).
func (c *Client) OutboxStats(ctx context.Context, topic string, opts ...CallOption) (api.OutboxStats, error) {
	var out api.OutboxStats
	err := c.get(ctx, newRoute("/v1/outbox/stats"), query{}.str("topic", topic).values(), &out, opts)
	return out, err
}

// OutboxActivity counts the delivered, failed and rejected attempts of a
// topic, or of every topic, in twelve buckets of the last minutes (admin;
// 60 when minutes is 0).
func (c *Client) OutboxActivity(ctx context.Context, topic string, minutes int, opts ...CallOption) (api.OutboxActivity, error) {
	var out api.OutboxActivity
	err := c.get(ctx, newRoute("/v1/outbox/activity"), query{}.str("topic", topic).int("minutes", int64(minutes)).values(), &out, opts)
	return out, err
}

// Inbox lists the tenant's webhook providers, their newest events and the
// refusals the server counted since it started (admin).
func (c *Client) Inbox(ctx context.Context, opts ...CallOption) (api.InboxList, error) {
	var out api.InboxList
	err := c.get(ctx, newRoute("/v1/inbox"), nil, &out, opts)
	return out, err
}

// GuardRecord reads the replay guard's record of the request the key
// keyID of the tenant sent to method path with Idempotency-Key key
// (admin).
func (c *Client) GuardRecord(ctx context.Context, keyID, method, path, key string, opts ...CallOption) (api.GuardRecord, error) {
	var out api.GuardRecord
	q := query{}.str("key_id", keyID).str("method", method).str("path", path).str("key", key)
	err := c.get(ctx, newRoute("/v1/idempotency/records"), q.values(), &out, opts)
	return out, err
}

// Whoami reads the calling key's record: its tenant and scopes.
func (c *Client) Whoami(ctx context.Context, opts ...CallOption) (api.APIKey, error) {
	var out api.APIKey
	err := c.get(ctx, newRoute("/v1/whoami"), nil, &out, opts)
	return out, err
}

// Requeue returns dead messages to pending (admin).
func (c *Client) Requeue(ctx context.Context, req api.OutboxRequeueRequest, opts ...CallOption) (api.OutboxRequeueResponse, error) {
	var out api.OutboxRequeueResponse
	err := c.post(ctx, newRoute("/v1/outbox/requeue"), req, &out, opts)
	return out, err
}

// CreateAPIKey creates a key of the caller's tenant (admin); the token in
// the answer is shown this once.
func (c *Client) CreateAPIKey(ctx context.Context, req api.APIKeyRequest, opts ...CallOption) (api.APIKeyCreated, error) {
	var out api.APIKeyCreated
	err := c.post(ctx, newRoute("/v1/apikeys"), req, &out, opts)
	return out, err
}

// APIKeys lists the keys of the caller's tenant (admin).
func (c *Client) APIKeys(ctx context.Context, opts ...CallOption) (api.APIKeyList, error) {
	var out api.APIKeyList
	err := c.get(ctx, newRoute("/v1/apikeys"), nil, &out, opts)
	return out, err
}

// RevokeAPIKey revokes a key of the caller's tenant (admin).
func (c *Client) RevokeAPIKey(ctx context.Context, id string, opts ...CallOption) (api.APIKey, error) {
	var out api.APIKey
	err := c.del(ctx, newRoute("/v1/apikeys").seg("id", id), &out, opts)
	return out, err
}

// Verify checks the hash links of the tenant's chains, or of req.Chains
// (admin). It writes nothing and sends no Idempotency-Key; a report with
// failures is an answer (OK false), not an error.
func (c *Client) Verify(ctx context.Context, req api.VerifyRequest, opts ...CallOption) (api.VerifyReport, error) {
	var out api.VerifyReport
	err := c.do(ctx, call{method: http.MethodPost, path: "/v1/verify", in: req, out: &out}, opts)
	return out, err
}

// Health reads GET /healthz: the process answers.
func (c *Client) Health(ctx context.Context, opts ...CallOption) (api.Health, error) {
	var out api.Health
	err := c.get(ctx, newRoute("/healthz"), nil, &out, opts)
	return out, err
}

// Ready reads GET /readyz: the server can serve requests (an *Error with
// status 503 while it cannot).
func (c *Client) Ready(ctx context.Context, opts ...CallOption) (api.Health, error) {
	var out api.Health
	err := c.get(ctx, newRoute("/readyz"), nil, &out, opts)
	return out, err
}
