package api

// Problem is the body of every refusal (RFC 9457, application/problem+json).
// Clients branch on Code, which never changes once published.
type Problem struct {
	// Type is "urn:ledgerworks:problem:" followed by Code.
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Code   string `json:"code"`
	Detail string `json:"detail,omitempty"`
	// ExistingSeq names the entry that holds a conflicting idempotency key
	// or operation id (IDEMPOTENCY_CONFLICT).
	ExistingSeq uint64 `json:"existing_seq,omitempty,string"`
}

// The codes of the API's refusals. Those the command line also prints in
// its JSON errors mean the same there.
const (
	CodeInvalidInput        = "INVALID_INPUT"          // 400: a field, parameter or body the route refuses
	CodeNotFound            = "NOT_FOUND"              // 404: the chain, entry, item, account, message or route does not exist
	CodeIdempotencyConflict = "IDEMPOTENCY_CONFLICT"   // 409: the ledger holds the derived key with another request
	CodeMethodNotAllowed    = "METHOD_NOT_ALLOWED"     // 405
	CodePayloadTooLarge     = "PAYLOAD_TOO_LARGE"      // 413: the body is larger than the server's limit
	CodeUnsupportedMedia    = "UNSUPPORTED_MEDIA_TYPE" // 415: a body that is not application/json
	CodeUnauthenticated     = "UNAUTHENTICATED"        // 401: missing, malformed, unknown or revoked API key
	CodeForbidden           = "FORBIDDEN"              // 403: the key lacks the route's scope
	CodeScopeNotHeld        = "SCOPE_NOT_HELD"         // 403: a key creating or revoking a key with a scope it lacks
	CodeRateLimited         = "RATE_LIMITED"           // 429, with Retry-After
	CodeIncomplete          = "INCOMPLETE_OPERATION"   // 500: a half-written valuation an operator must look at
	CodeLocked              = "LOCKED"                 // 503: the ledger is held by another process
	CodeCorrupt             = "CORRUPT"                // 500: the ledger cannot be read
	CodeStorage             = "STORAGE"                // 500/503: the ledger cannot be read or written
	CodeCanceled            = "CANCELED"               // 503: the request ended before the ledger answered
	CodeUnavailable         = "UNAVAILABLE"            // 503: the server is shutting down or not ready
	CodeBadSignature        = "BAD_SIGNATURE"          // 401: a webhook whose signature does not verify
	CodeNoEventID           = "NO_EVENT_ID"            // 400: a verified webhook that names no event id
	CodeEventIDReused       = "EVENT_ID_REUSED"        // 409: a webhook event id received before with another body
	CodeNotDead             = "NOT_DEAD"               // 409: a requeue of a message that is not dead
	CodeHeadersTooLarge     = "HEADERS_TOO_LARGE"      // 431: the request's headers exceed the server's limit
	CodeUnsupportedProtocol = "UNSUPPORTED_PROTOCOL"   // 417, 501, 505: an Expect, transfer coding or HTTP version the server does not implement

	// The replay guard's codes.
	CodeKeyRequired      = "KEY_REQUIRED"                      // 400: no Idempotency-Key on a state-changing route
	CodeKeyInvalid       = "KEY_INVALID"                       // 400
	CodeKeyReused        = "KEY_REUSED_WITH_DIFFERENT_REQUEST" // 409: never retry
	CodeInProgress       = "REQUEST_IN_PROGRESS"               // 409, with Retry-After: retry later
	CodeRequestFailed    = "REQUEST_FAILED"                    // 409: the key is poisoned by a permanent failure
	CodeStoreUnavailable = "STORE_UNAVAILABLE"                 // 503, with Retry-After
	CodeStoreRefused     = "STORE_REFUSED"                     // 500: the guard's store refused the server's credentials (never retry)
)

// Headers of the API.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderReplayed       = "Idempotent-Replayed" // "true" on a replayed response
	HeaderRequestID      = "X-Request-Id"
	MediaJSON            = "application/json"
	MediaProblem         = "application/problem+json"
)
