package api

// StockItemRequest is POST /v1/stock/items: define an item, or record a
// change to its definition (its scale is fixed once defined).
type StockItemRequest struct {
	ID            string `json:"id"`
	Name          string `json:"name,omitempty"`
	Scale         uint8  `json:"scale"`
	AllowNegative bool   `json:"allow_negative"`
}

// StockItem is an item of the stock catalog.
type StockItem struct {
	Tenant        string `json:"tenant"`
	ID            string `json:"id"`
	Name          string `json:"name"`
	Scale         uint8  `json:"scale"`
	AllowNegative bool   `json:"allow_negative"`
	Seq           uint64 `json:"seq,string"`
	// Unchanged: the definition was already recorded; nothing was written.
	Unchanged bool `json:"unchanged"`
}

// StockItemList is GET /v1/stock/items.
type StockItemList struct {
	Items []StockItem `json:"items"`
}

// StockLocationRequest is POST /v1/stock/locations.
type StockLocationRequest struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
}

// StockLocation is a location of the stock catalog.
type StockLocation struct {
	Tenant    string `json:"tenant"`
	ID        string `json:"id"`
	Name      string `json:"name"`
	Seq       uint64 `json:"seq,string"`
	Unchanged bool   `json:"unchanged"`
}

// StockLocationList is GET /v1/stock/locations.
type StockLocationList struct {
	Locations []StockLocation `json:"locations"`
}

// StockMovementRequest is POST /v1/stock/receipts and /v1/stock/issues.
// Quantity is a positive decimal at the item's scale.
type StockMovementRequest struct {
	Item      string `json:"item"`
	Location  string `json:"location"`
	Quantity  string `json:"quantity"`
	Reference string `json:"reference,omitempty"`
	Note      string `json:"note,omitempty"`
}

// StockAdjustmentRequest is POST /v1/stock/adjustments: Quantity is signed.
type StockAdjustmentRequest struct {
	Item      string `json:"item"`
	Location  string `json:"location"`
	Quantity  string `json:"quantity"`
	Reason    string `json:"reason"`
	Reference string `json:"reference,omitempty"`
	Note      string `json:"note,omitempty"`
}

// StockTransferRequest is POST /v1/stock/transfers: both locations in one
// transaction.
type StockTransferRequest struct {
	Item      string `json:"item"`
	From      string `json:"from"`
	To        string `json:"to"`
	Quantity  string `json:"quantity"`
	Reference string `json:"reference,omitempty"`
	Note      string `json:"note,omitempty"`
}

// StockReversalRequest is POST /v1/stock/reversals: cancel the movement
// at Chain (relative to the tenant, as StockEntry.Chain) and Seq.
type StockReversalRequest struct {
	Chain     string `json:"chain"`
	Seq       uint64 `json:"seq,string"`
	Reference string `json:"reference,omitempty"`
	Note      string `json:"note,omitempty"`
}

// StockEntry is a movement entry.
type StockEntry struct {
	Tenant         string `json:"tenant"`
	Item           string `json:"item"`
	Location       string `json:"location"`
	Chain          string `json:"chain"`
	Seq            uint64 `json:"seq,string"`
	TimeUnixNano   int64  `json:"time_unix_nano,string"`
	IdempotencyKey string `json:"idempotency_key"`
	Kind           string `json:"kind"`
	Quantity       string `json:"quantity"`
	Balance        string `json:"balance"`
	Reference      string `json:"reference,omitempty"`
	Note           string `json:"note,omitempty"`
	Reason         string `json:"reason,omitempty"`
	Counterpart    string `json:"counterpart,omitempty"`
	OriginalChain  string `json:"original_chain,omitempty"`
	OriginalSeq    uint64 `json:"original_seq,omitempty,string"`
}

// StockResult is the answer of every movement route.
type StockResult struct {
	// Replayed: the ledger held the movement already; nothing was written.
	Replayed bool         `json:"replayed"`
	Entries  []StockEntry `json:"entries"`
}

// StockBalance is GET /v1/stock/balances/{item}/{location}[?at_seq=|at_time=].
type StockBalance struct {
	Tenant       string `json:"tenant"`
	Item         string `json:"item"`
	Location     string `json:"location"`
	Quantity     string `json:"quantity"`
	Seq          uint64 `json:"seq,string"`
	TimeUnixNano int64  `json:"time_unix_nano,string"`
}

// StockTotal is GET /v1/stock/balances/{item}: every location and the total.
type StockTotal struct {
	Tenant   string         `json:"tenant"`
	Item     string         `json:"item"`
	Total    string         `json:"total"`
	Balances []StockBalance `json:"balances"`
}

// StockHistory is GET /v1/stock/history/{item}/{location}?from=&limit=.
type StockHistory struct {
	Chain   string       `json:"chain"`
	Entries []StockEntry `json:"entries"`
	// NextSeq is the from of the next page, 0 when there is no more.
	NextSeq uint64 `json:"next_seq,string"`
}
