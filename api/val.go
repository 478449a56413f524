package api

// ValItemRequest is POST /v1/val/items: define an item's valuation, or
// change its method (only at quantity zero) or negative-stock policy.
type ValItemRequest struct {
	ID            string `json:"id"`
	Method        string `json:"method"` // moving_average or fifo
	QuantityScale uint8  `json:"quantity_scale"`
	Currency      string `json:"currency"`
	MinorUnit     uint8  `json:"minor_unit"`
	AllowNegative bool   `json:"allow_negative"`
}

// ValItem is a valued item.
type ValItem struct {
	Tenant        string `json:"tenant"`
	ID            string `json:"id"`
	Method        string `json:"method"`
	QuantityScale uint8  `json:"quantity_scale"`
	Currency      string `json:"currency"`
	MinorUnit     uint8  `json:"minor_unit"`
	AllowNegative bool   `json:"allow_negative"`
	Seq           uint64 `json:"seq,omitempty,string"`
	Unchanged     bool   `json:"unchanged,omitempty"`
}

// ValItemList is GET /v1/val/items.
type ValItemList struct {
	Items []ValItem `json:"items"`
}

// ValReceiptRequest is POST /v1/val/receipts: exactly one of UnitCost and
// Value. The operation id is derived from the Idempotency-Key.
type ValReceiptRequest struct {
	Item     string `json:"item"`
	Location string `json:"location"`
	Quantity string `json:"quantity"`
	UnitCost string `json:"unit_cost,omitempty"`
	Value    string `json:"value,omitempty"`
}

// ValIssueRequest is POST /v1/val/issues.
type ValIssueRequest struct {
	Item         string `json:"item"`
	Location     string `json:"location"`
	Quantity     string `json:"quantity"`
	EstimateRate string `json:"estimate_rate,omitempty"`
}

// ValAdjustmentRequest is POST /v1/val/adjustments: exactly one of Amount
// (signed, at the currency's minor unit) and UnitCost (revalue).
type ValAdjustmentRequest struct {
	Item     string `json:"item"`
	Location string `json:"location"`
	Amount   string `json:"amount,omitempty"`
	UnitCost string `json:"unit_cost,omitempty"`
}

// ValTransferRequest is POST /v1/val/transfers.
type ValTransferRequest struct {
	Item         string `json:"item"`
	From         string `json:"from"`
	To           string `json:"to"`
	Quantity     string `json:"quantity"`
	EstimateRate string `json:"estimate_rate,omitempty"`
}

// ValReversalRequest is POST /v1/val/reversals: the opposite of the
// operation Reverses (an earlier ValResult.Operation) at Location (a
// transfer's source).
type ValReversalRequest struct {
	Item     string `json:"item"`
	Location string `json:"location"`
	Reverses string `json:"reverses"`
}

// ValSettlement is one corrected estimate in a leg.
type ValSettlement struct {
	Operation  string `json:"operation"`
	Quantity   string `json:"quantity"`
	Estimated  string `json:"estimated"`
	Actual     string `json:"actual"`
	Correction string `json:"correction"`
}

// ValLeg is what an operation did at one location.
type ValLeg struct {
	Location       string          `json:"location"`
	QuantityChain  string          `json:"quantity_chain"`
	QuantitySeq    uint64          `json:"quantity_seq,string"`
	ValueChain     string          `json:"value_chain"`
	ValueSeq       uint64          `json:"value_seq,string"`
	QuantityChange string          `json:"quantity_change"`
	ValueChange    string          `json:"value_change"`
	Quantity       string          `json:"quantity"`
	Value          string          `json:"value"`
	Rate           string          `json:"rate,omitempty"`
	Settlements    []ValSettlement `json:"settlements,omitempty"`
}

// ValResult is the answer of every valuation operation.
type ValResult struct {
	Tenant    string   `json:"tenant"`
	Item      string   `json:"item"`
	Operation string   `json:"operation"`
	Replayed  bool     `json:"replayed"`
	Legs      []ValLeg `json:"legs"`
}

// ValPending is an issue awaiting settlement.
type ValPending struct {
	Operation string `json:"operation"`
	Quantity  string `json:"quantity"`
	Estimate  string `json:"estimate"`
}

// ValBalance is the valuation of an item at a location.
type ValBalance struct {
	Tenant      string       `json:"tenant"`
	Item        string       `json:"item"`
	Location    string       `json:"location"`
	Method      string       `json:"method"`
	Quantity    string       `json:"quantity"`
	Value       string       `json:"value"`
	Rate        string       `json:"rate,omitempty"`
	QuantitySeq uint64       `json:"quantity_seq,string"`
	ValueSeq    uint64       `json:"value_seq,string"`
	Pending     []ValPending `json:"pending,omitempty"`
}

// ValBalanceList is GET /v1/val/balances/{item}[/{location}[?at_seq=]].
type ValBalanceList struct {
	Balances []ValBalance `json:"balances"`
}

// ValLayer is one open FIFO layer.
type ValLayer struct {
	// Number is the layer's readable number, ID its id in the state
	// keyspace.
	Number   int64  `json:"number,string"`
	ID       uint64 `json:"id,string"`
	Quantity string `json:"quantity"`
	Value    string `json:"value"`
}

// ValLayerList is GET /v1/val/layers/{item}/{location}?limit=.
type ValLayerList struct {
	Layers []ValLayer `json:"layers"`
}
