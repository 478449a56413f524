// Package api holds the wire types of the ledger's HTTP API (ledgerctl
// serve): every request and response body of every route, with its JSON
// names. The server and the Go client both import it, and the server's
// OpenAPI 3.1 document (/openapi.json) is generated from these types.
//
// Conventions, the same on every route:
//
//   - Chain names are relative to the caller's tenant, which comes from the
//     API key and never from the request.
//   - Decimal amounts, quantities, rates and unit costs are JSON strings
//     ("12.50"), never numbers; each is parsed exactly at the scale its item,
//     currency or rate declares.
//   - Times are int64 nanoseconds since the Unix epoch (*_unix_nano); dates
//     are YYYY-MM-DD strings.
//   - Every 64-bit integer (seqs, times, durations, counts, ids, tokens) is
//     a JSON string of decimal digits (the ,string tag option), as proto3's
//     JSON mapping writes them, since a JavaScript number is exact only up
//     to 2^53; a JSON number there is refused. Small bounded integers
//     (scales, exponents, attempts, a problem's status) are numbers.
//   - Payloads are standard, padded base64 ([]byte fields).
//   - Refusals are application/problem+json bodies (Problem) with a stable
//     code (the Code constants).
//
// A field that the server may omit is tagged omitempty; a field whose zero
// value means something is never omitted.
package api

// The routes, their scopes and their bodies (request → response). Every
// POST and DELETE requires Idempotency-Key except /v1/webhooks/{provider}
// (authenticated by the provider's signature, deduplicated by its event
// id) and /v1/verify (which writes nothing). {name} is a chain name
// relative to the tenant and may contain "/".
//
//	POST   /v1/chains/{name}/entries          write  AppendRequest → 201 AppendResponse
//	GET    /v1/chains/{name}/entries/{seq}    read   → Entry
//	GET    /v1/chains/{name}/entries          read   ?from=&limit= → EntryPage
//	GET    /v1/chains/{name}/head             read   → Head
//
//	POST   /v1/stock/items                    write  StockItemRequest → StockItem
//	GET    /v1/stock/items                    read   → StockItemList
//	POST   /v1/stock/locations                write  StockLocationRequest → StockLocation
//	GET    /v1/stock/locations                read   → StockLocationList
//	POST   /v1/stock/receipts                 write  StockMovementRequest → 201 StockResult
//	POST   /v1/stock/issues                   write  StockMovementRequest → 201 StockResult
//	POST   /v1/stock/adjustments              write  StockAdjustmentRequest → 201 StockResult
//	POST   /v1/stock/transfers                write  StockTransferRequest → 201 StockResult
//	POST   /v1/stock/reversals                write  StockReversalRequest → 201 StockResult
//	GET    /v1/stock/balances/{item}          read   → StockTotal
//	GET    /v1/stock/balances/{item}/{location}  read  ?at_seq=|at_time= → StockBalance
//	GET    /v1/stock/history/{item}/{location}   read  ?from=&limit= → StockHistory
//
//	POST   /v1/fin/books/{book}/accounts                write FinAccountRequest → FinAccount
//	POST   /v1/fin/books/{book}/accounts/{code}/close   write → FinAccount
//	GET    /v1/fin/books/{book}/accounts                read  → FinAccountList
//	POST   /v1/fin/books/{book}/currencies              write FinCurrencyRequest → FinCurrency
//	GET    /v1/fin/books/{book}/currencies              read  → FinCurrencyList
//	POST   /v1/fin/books/{book}/postings                write FinPostingRequest → 201 FinPosting
//	GET    /v1/fin/books/{book}/postings/{seq}          read  → FinPosting
//	GET    /v1/fin/books/{book}/postings                read  ?key= → FinPosting
//	POST   /v1/fin/books/{book}/reversals               write FinReversalRequest → 201 FinPosting
//	GET    /v1/fin/books/{book}/balances/{account}      read  → FinBalanceList
//	GET    /v1/fin/books/{book}/balances/{account}/{currency}  read ?at_seq=|as_of= → FinBalance
//	GET    /v1/fin/books/{book}/trial-balance           read  → FinTrialBalance
//
//	POST   /v1/val/items                      write  ValItemRequest → ValItem
//	GET    /v1/val/items                      read   → ValItemList
//	POST   /v1/val/receipts                   write  ValReceiptRequest → 201 ValResult
//	POST   /v1/val/issues                     write  ValIssueRequest → 201 ValResult
//	POST   /v1/val/adjustments                write  ValAdjustmentRequest → 201 ValResult
//	POST   /v1/val/transfers                  write  ValTransferRequest → 201 ValResult
//	POST   /v1/val/reversals                  write  ValReversalRequest → 201 ValResult
//	GET    /v1/val/balances/{item}            read   → ValBalanceList
//	GET    /v1/val/balances/{item}/{location} read   ?at_seq= → ValBalanceList
//	GET    /v1/val/layers/{item}/{location}   read   ?limit= → ValLayerList
//
//	POST   /v1/purchase-receipts              write  PurchaseReceiptRequest → 201 BusinessEvent
//	POST   /v1/sales-issues                   write  SalesIssueRequest → 201 BusinessEvent
//
//	GET    /v1/outbox/messages                admin  ?topic=&status=&limit= → OutboxMessageList
//	GET    /v1/outbox/messages/{id}           admin  → OutboxMessageHistory
//	GET    /v1/outbox/dead                    admin  ?topic= → OutboxMessageList
//	GET    /v1/outbox/stats                   admin  ?topic= → OutboxStats
//	POST   /v1/outbox/requeue                 admin  OutboxRequeueRequest → OutboxRequeueResponse
//	POST   /v1/webhooks/{provider}            (signature) provider's body → WebhookReceipt
//
//	POST   /v1/apikeys                        admin  APIKeyRequest → 201 APIKeyCreated
//	GET    /v1/apikeys                        admin  → APIKeyList
//	DELETE /v1/apikeys/{id}                   admin  → APIKey
//	POST   /v1/verify                         admin  VerifyRequest → VerifyReport
//
//	GET    /healthz, /readyz                  none   → Health
//	GET    /openapi.json                      none   the OpenAPI 3.1 document
