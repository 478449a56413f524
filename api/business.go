package api

// PurchaseReceiptRequest is POST /v1/purchase-receipts: goods received into
// stock, valued, and posted Dr Inventory / Cr Goods received not invoiced,
// with an outbox message, in one ledger transaction. The item must be
// defined in the stock catalog and for valuation, the accounts and the
// item's currency in the book. The stock movement, the valuation
// operation, the posting and the message all carry keys derived from the
// request's Idempotency-Key, so a retry writes none of them twice.
type PurchaseReceiptRequest struct {
	Item     string `json:"item"`
	Location string `json:"location"`
	Quantity string `json:"quantity"`
	UnitCost string `json:"unit_cost"`
	Date     string `json:"date"` // YYYY-MM-DD, the posting's effective date
	// Book is the tenant's book; BookDefault when empty.
	Book             string `json:"book,omitempty"`
	InventoryAccount string `json:"inventory_account"` // debited
	CreditAccount    string `json:"credit_account"`    // credited: goods received not invoiced
	Reference        string `json:"reference,omitempty"`
	// Topic is the outbox topic of the message; TopicDefault when empty.
	Topic string `json:"topic,omitempty"`
}

// SalesIssueRequest is POST /v1/sales-issues: goods issued from stock at
// their computed cost, posted Dr Cost of goods sold / Cr Inventory, with an
// outbox message, in one ledger transaction.
type SalesIssueRequest struct {
	Item             string `json:"item"`
	Location         string `json:"location"`
	Quantity         string `json:"quantity"`
	Date             string `json:"date"`
	Book             string `json:"book,omitempty"`
	CostAccount      string `json:"cost_account"`      // debited: cost of goods sold
	InventoryAccount string `json:"inventory_account"` // credited
	Reference        string `json:"reference,omitempty"`
	Topic            string `json:"topic,omitempty"`
}

// Defaults of the business events.
const (
	BookDefault  = "main"
	TopicDefault = "business-events"
)

// BusinessEvent is the answer of POST /v1/purchase-receipts and
// /v1/sales-issues: what the one transaction wrote (or, on a replay by
// the ledger, found).
type BusinessEvent struct {
	// Operation is the id every part's key is derived from.
	Operation string        `json:"operation"`
	Stock     StockResult   `json:"stock"`
	Valuation ValResult     `json:"valuation"`
	Posting   FinPosting    `json:"posting"`
	Message   OutboxMessage `json:"message"`
}

// BusinessMessage is the payload of a business event's outbox message.
type BusinessMessage struct {
	Event     string `json:"event"` // purchase_receipt or sales_issue
	Tenant    string `json:"tenant"`
	Operation string `json:"operation"`
	Item      string `json:"item"`
	Location  string `json:"location"`
	Quantity  string `json:"quantity"`
	Value     string `json:"value"`
	Currency  string `json:"currency"`
	Reference string `json:"reference,omitempty"`
}
