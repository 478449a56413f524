package server

import (
	"encoding/json"
	"net/http"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/financial"
	"github.com/ledgerworks/ledger/internal/wire"
	"github.com/ledgerworks/ledger/outbox"
	"github.com/ledgerworks/ledger/stockmovement"
	"github.com/ledgerworks/ledger/valuations"
)

// The events of the business event messages.
const (
	eventPurchaseReceipt = "purchase_receipt"
	eventSalesIssue      = "sales_issue"
)

func (s *Server) businessRoutes() []*Route {
	const tag = "business events"
	return []*Route{
		{Method: http.MethodPost, Path: "/v1/purchase-receipts", ID: "business.purchase-receipts.create", Tag: tag,
			Scope: scopeWrite, Guarded: true, Request: api.PurchaseReceiptRequest{}, Response: api.BusinessEvent{},
			Status: http.StatusCreated, write: purchaseReceipt,
			Summary: "Goods received: stock, valuation, journal (Dr inventory / Cr received not invoiced) and an outbox message, in one transaction"},
		{Method: http.MethodPost, Path: "/v1/sales-issues", ID: "business.sales-issues.create", Tag: tag,
			Scope: scopeWrite, Guarded: true, Request: api.SalesIssueRequest{}, Response: api.BusinessEvent{},
			Status: http.StatusCreated, write: salesIssue,
			Summary: "Goods issued: stock, valuation at cost, journal (Dr cost of goods sold / Cr inventory) and an outbox message, in one transaction"},
	}
}

// businessItem is what a business event checks before its transaction:
// the item in both catalogs, with one quantity scale; the book; the date.
type businessItem struct {
	quantity decimal.Decimal
	val      valuations.Item
	book     *financial.Book
	date     financial.Date
	topic    string
}

func businessPrepare(c *call, item, quantity, bookName, date, topic string) (businessItem, error) {
	var b businessItem
	stockItem, err := stockmovement.GetItem(c.ctx, c.s.db, c.tenant, item)
	if err != nil {
		return b, err
	}
	if b.val, err = valuations.GetItem(c.ctx, c.s.db, c.tenant, item); err != nil {
		return b, err
	}
	if stockItem.Scale != b.val.QuantityScale {
		return b, invalidf("item %s: its stock scale %d and its valuation scale %d differ", item, stockItem.Scale, b.val.QuantityScale)
	}
	if b.quantity, err = valDecimal("quantity", quantity, stockItem.Scale); err != nil {
		return b, err
	}
	if bookName == "" {
		bookName = api.BookDefault
	}
	if b.book, err = financial.NewBook(c.s.db, c.tenant, bookName); err != nil {
		return b, err
	}
	if b.date, err = financial.ParseDate(date); err != nil {
		return b, err
	}
	if b.topic = topic; b.topic == "" {
		b.topic = api.TopicDefault
	}
	if _, err := outbox.MessagesChain(c.tenant, b.topic); err != nil {
		return b, err
	}
	return b, nil
}

// planBusiness tells the group commit the chains a business event of item
// at location writes (chain.WithPlannedAppends), so that on PostgreSQL
// their heads are locked with the rest of its group's, in one global
// order, before the domain operations run and read their state. A name
// that cannot be made plans nothing: the operation reports it.
func planBusiness(c *call, b businessItem, item, location string) {
	names := []func() (string, error){
		func() (string, error) { return stockmovement.ItemLockChain(c.tenant, item) },
		func() (string, error) { return stockmovement.MovementChain(c.tenant, item, location) },
		func() (string, error) { return valuations.ItemChain(c.tenant, item) },
		func() (string, error) { return valuations.QuantityChain(c.tenant, item, location) },
		func() (string, error) { return valuations.ValueChain(c.tenant, item, location) },
		func() (string, error) { return b.book.Journal(), nil },
		func() (string, error) { return outbox.MessagesChain(c.tenant, b.topic) },
	}
	planned := make([]chain.Request, 0, len(names))
	for _, name := range names {
		n, err := name()
		if err != nil {
			return
		}
		planned = append(planned, chain.Request{Chain: n})
	}
	c.ctx = chain.WithPlannedAppends(c.ctx, planned...)
}

// businessFinish posts the journal entry and enqueues the message of a
// business event, in its transaction, and builds the answer.
func (c *call) businessFinish(tx txn, b businessItem, event, location, reference string, stock stockmovement.Result,
	val valuations.Result, amount decimal.Decimal, debit, credit, memo string) (api.BusinessEvent, error) {
	op := c.op()
	posting, err := b.book.PostTx(tx, financial.Posting{Key: op, Date: b.date, Memo: memo, Reference: reference,
		Lines: []financial.Line{
			{Account: debit, Side: financial.Debit, Amount: amount, Currency: b.val.Currency},
			{Account: credit, Side: financial.Credit, Amount: amount, Currency: b.val.Currency}}})
	if err != nil {
		return api.BusinessEvent{}, err
	}
	payload, err := json.Marshal(api.BusinessMessage{Event: event, Tenant: c.tenant, Operation: op, Item: b.val.ID,
		Location: location, Quantity: b.quantity.String(), Value: amount.String(), Currency: b.val.Currency, Reference: reference})
	if err != nil {
		return api.BusinessEvent{}, err
	}
	msg, err := outbox.EnqueueTx(tx, outbox.EnqueueRequest{Tenant: c.tenant, Topic: b.topic, IdempotencyKey: op,
		Headers: []outbox.Header{{Name: "Content-Type", Value: api.MediaJSON}}, Payload: payload})
	if err != nil {
		return api.BusinessEvent{}, err
	}
	info, err := outbox.GetTx(tx, c.tenant, msg.ID)
	if err != nil {
		return api.BusinessEvent{}, err
	}
	return api.BusinessEvent{Operation: op, Stock: c.stockResult(stock), Valuation: c.valResult(b.val.ID, val),
		Posting: c.finPosting(b.book, posting), Message: wire.OutboxMessage(info, true)}, nil
}

func purchaseReceipt(c *call) (func(tx txn) (any, error), error) {
	var req api.PurchaseReceiptRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	if req.InventoryAccount == "" || req.CreditAccount == "" || req.UnitCost == "" {
		return nil, invalidf("a purchase receipt needs unit_cost, inventory_account and credit_account")
	}
	b, err := businessPrepare(c, req.Item, req.Quantity, req.Book, req.Date, req.Topic)
	if err != nil {
		return nil, err
	}
	cost, err := wire.Rate("unit_cost", req.UnitCost)
	if err != nil {
		return nil, invalidf("%v", err)
	}
	planBusiness(c, b, req.Item, req.Location)
	op := c.op()
	return func(tx txn) (any, error) {
		stock, err := stockmovement.ReceiveTx(tx, stockmovement.ReceiveRequest{Tenant: c.tenant, Item: req.Item,
			Location: req.Location, Quantity: b.quantity, Reference: req.Reference, IdempotencyKey: op})
		if err != nil {
			return nil, err
		}
		val, err := valuations.ReceiveTx(tx, valuations.ReceiveRequest{Tenant: c.tenant, Item: req.Item,
			Location: req.Location, OperationID: op, Quantity: b.quantity, UnitCost: cost})
		if err != nil {
			return nil, err
		}
		return c.businessFinish(tx, b, eventPurchaseReceipt, req.Location, req.Reference, stock, val, val.ValueChange(),
			req.InventoryAccount, req.CreditAccount, "goods receipt")
	}, nil
}

func salesIssue(c *call) (func(tx txn) (any, error), error) {
	var req api.SalesIssueRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	if req.CostAccount == "" || req.InventoryAccount == "" {
		return nil, invalidf("a sales issue needs cost_account and inventory_account")
	}
	b, err := businessPrepare(c, req.Item, req.Quantity, req.Book, req.Date, req.Topic)
	if err != nil {
		return nil, err
	}
	planBusiness(c, b, req.Item, req.Location)
	op := c.op()
	return func(tx txn) (any, error) {
		stock, err := stockmovement.IssueTx(tx, stockmovement.IssueRequest{Tenant: c.tenant, Item: req.Item,
			Location: req.Location, Quantity: b.quantity, Reference: req.Reference, IdempotencyKey: op})
		if err != nil {
			return nil, err
		}
		val, err := valuations.IssueTx(tx, valuations.IssueRequest{Tenant: c.tenant, Item: req.Item,
			Location: req.Location, OperationID: op, Quantity: b.quantity})
		if err != nil {
			return nil, err
		}
		cost, err := val.ValueChange().Neg()
		if err != nil {
			return nil, err
		}
		return c.businessFinish(tx, b, eventSalesIssue, req.Location, req.Reference, stock, val, cost,
			req.CostAccount, req.InventoryAccount, "cost of goods sold")
	}, nil
}
