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
