package apikey

import (
	"time"

	"github.com/ledgerworks/ledger/chain"
)

// Limits, checked on entry: a request beyond one is refused with an *Error
// and nothing is written.
const (
	// TenantLengthMax is the longest tenant, in bytes: a chain name
	// component, since the tenant scopes every chain the key reaches.
	TenantLengthMax = chain.NameComponentLengthMax
	// NameLengthMax is the longest key name (a label for people), in bytes.
	NameLengthMax = 128
	// ReasonLengthMax is the longest revocation reason, in bytes.
	ReasonLengthMax = 512
	// KeysMax is how many keys (valid or revoked) a ledger holds at most:
	// an Authenticator keeps them all in memory, about 200 bytes each.
	KeysMax = 1 << 20
	// AuthorizationLengthMax is the longest Authorization header value
	// BearerToken reads; a longer one is refused unread.
	AuthorizationLengthMax = 1024
)

// Authenticator defaults and bounds (AuthOptions).
const (
	// RevocationDelayDefault is AuthOptions.RevocationDelay when zero.
	RevocationDelayDefault = time.Second
	// RevocationDelayMin and RevocationDelayMax bound
	// AuthOptions.RevocationDelay.
	RevocationDelayMin = 10 * time.Millisecond
	RevocationDelayMax = time.Minute
)
