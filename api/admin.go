package api

// APIKeyRequest is POST /v1/apikeys: a key of the caller's tenant.
type APIKeyRequest struct {
	Name   string   `json:"name"`
	Scopes []string `json:"scopes"` // read, write, admin
}

// APIKey is a key's public record (never its secret).
type APIKey struct {
	ID              string   `json:"id"`
	Tenant          string   `json:"tenant"`
	Name            string   `json:"name"`
	Scopes          []string `json:"scopes"`
	CreatedUnixNano int64    `json:"created_unix_nano,string"`
	RevokedUnixNano int64    `json:"revoked_unix_nano,omitempty,string"`
}

// APIKeyCreated is the answer (201) of POST /v1/apikeys: Token is shown
// this once; the ledger keeps only its digest.
type APIKeyCreated struct {
	Key   APIKey `json:"key"`
	Token string `json:"token"`
}

// APIKeyList is GET /v1/apikeys.
type APIKeyList struct {
	Keys []APIKey `json:"keys"`
}

// VerifyRequest is POST /v1/verify. Chains (relative to the tenant) limits
// the check; every chain of the tenant when empty.
type VerifyRequest struct {
	Chains []string `json:"chains,omitempty"`
	// Trees also checks each chain's stored Merkle tree against the tree
	// of its entries (as ledgerctl verify --trees).
	Trees bool `json:"trees,omitempty"`
	// ExpectHeads are heads saved earlier: each chain must still hold an
	// entry at that seq with that hash (as ledgerctl verify --expect-head),
	// which catches truncation and wholesale rewrites. Their chains are
	// verified too.
	ExpectHeads []VerifyHead `json:"expect_heads,omitempty"`
}

// VerifyHead is a head saved earlier: a chain (relative to the tenant),
// a seq and the entry's hash in hex.
type VerifyHead struct {
	Chain string `json:"chain"`
	Seq   uint64 `json:"seq,string"`
	Hash  string `json:"hash"`
}

// VerifyFailure is one problem verify found.
type VerifyFailure struct {
	Chain      string `json:"chain"`
	Seq        uint64 `json:"seq,string"`
	Reason     string `json:"reason"`
	Detail     string `json:"detail"`
	Expected   string `json:"expected,omitempty"`
	Calculated string `json:"calculated,omitempty"`
}

// VerifyReport is the answer of POST /v1/verify (200 whether or not it
// found failures; OK says which).
type VerifyReport struct {
	OK        bool            `json:"ok"`
	Chains    int64           `json:"chains,string"`
	Entries   int64           `json:"entries,string"`
	Failures  []VerifyFailure `json:"failures"`
	Truncated bool            `json:"truncated"`
}

// Health is GET /healthz and GET /readyz.
type Health struct {
	Status string `json:"status"` // ok, or not_ready
	// Detail says why a server is not ready.
	Detail string `json:"detail,omitempty"`
	// Version is the server's build (GET /healthz only).
	Version *Version `json:"version,omitempty"`
}

// Version is a build of the ledger and the formats it reads and writes
// (ledgerctl version -o json, GET /healthz).
type Version struct {
	// Module is the module path; Version its version, "(devel)" for a build
	// from a checkout.
	Module  string `json:"module"`
	Version string `json:"version"`
	// VCSRevision and VCSTime are the commit the build was made from, when
	// the build recorded them; VCSModified says the work tree had changes.
	VCSRevision string `json:"vcs_revision,omitempty"`
	VCSTime     string `json:"vcs_time,omitempty"`
	VCSModified bool   `json:"vcs_modified,omitempty"`
	GoVersion   string `json:"go_version"`
	// Format is the version of the entry hashing and export format
	// (docs/FORMAT.md).
	Format string `json:"format"`
	// FileFormat is the layout of the bolt files this build writes;
	// FileFormatsRead every layout it opens (older ones are upgraded when
	// opened for writing).
	FileFormat      string   `json:"file_format"`
	FileFormatsRead []string `json:"file_formats_read"`
	// PostgresSchema is the PostgreSQL schema version this build migrates to
	// and reads.
	PostgresSchema int `json:"postgres_schema"`
}

// InboxList is GET /v1/inbox: the webhook providers of the caller's
// tenant, each with its recorded events and the refusals counted since
// the server started.
type InboxList struct {
	Providers []InboxProvider `json:"providers"`
}

// InboxProvider is one provider of the tenant. Events and LastEvent come
// from its inbox chain; the refusals are this server's counts since it
// started (nothing is written for them).
type InboxProvider struct {
	Name              string `json:"name"`
	Kind              string `json:"kind"`
	Topic             string `json:"topic,omitempty"`
	Chain             string `json:"chain"`
	Events            uint64 `json:"events,string"`
	LastEventUnixNano int64  `json:"last_event_unix_nano,omitempty,string"`
	// Duplicates are redeliveries answered "duplicate" (applied once).
	Duplicates int64 `json:"duplicates,string"`
	// EventIDReused are events refused 409 EVENT_ID_REUSED.
	EventIDReused int64 `json:"event_id_reused,string"`
	// BadSignatures are requests refused 401 BAD_SIGNATURE.
	BadSignatures int64 `json:"bad_signatures,string"`
	// Recent are the newest events, newest first.
	Recent []InboxEvent `json:"recent"`
}

// InboxEvent is one recorded event: its entry, the provider's event id
// and the body's digest (BLAKE3, as inbox.Digest) and size.
type InboxEvent struct {
	Seq          uint64 `json:"seq,string"`
	EventID      string `json:"event_id"`
	TimeUnixNano int64  `json:"time_unix_nano,string"`
	BodyDigest   string `json:"body_digest"`
	BodySize     uint64 `json:"body_size,string"`
}

// GuardRecord is GET /v1/idempotency/records: the replay guard's record of
// one request of the tenant.
type GuardRecord struct {
	Operation string `json:"operation"` // method and path, "POST /v1/stock/receipts"
	KeyID     string `json:"key_id"`    // the API key that sent it
	Key       string `json:"key"`       // its Idempotency-Key
	// Status is PROCESSING (an attempt runs), SUCCESS (its response is
	// replayed) or FAILED (poisoned after repeated transient failures).
	Status               string `json:"status"`
	Attempt              int    `json:"attempt"`
	RequestHash          string `json:"request_hash"`
	CreatedUnixNano      int64  `json:"created_unix_nano,string"`
	UpdatedUnixNano      int64  `json:"updated_unix_nano,string"`
	LeaseExpiresUnixNano int64  `json:"lease_expires_unix_nano,omitempty,string"`
	ExpiresUnixNano      int64  `json:"expires_unix_nano,omitempty,string"`
	Failure              string `json:"failure,omitempty"`
	// Response is the stored response of a SUCCESS record; its body is
	// withheld (BodyWithheld) for the route that creates keys, whose
	// answer holds a token.
	Response *GuardResponse `json:"response,omitempty"`
}

// GuardResponse is a stored response.
type GuardResponse struct {
	Status       int               `json:"status"`
	Headers      map[string]string `json:"headers,omitempty"`
	Body         string            `json:"body"`
	BodyWithheld bool              `json:"body_withheld,omitempty"`
}
