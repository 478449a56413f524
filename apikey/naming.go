package apikey

import (
	"strings"

	"github.com/ledgerworks/ledger/chain"
)

// Domain is the state key prefix of the keys' derived state and the
// domain component of the system chain.
const Domain = "apikey"

// ReservedPrefix begins the tenants no key may belong to. The system
// chain's first component is SystemTenant, which begins with it; since a
// server builds every chain name of a request as "<key's tenant>/…", no
// request can name the system chain.
const ReservedPrefix = "_"

// SystemTenant is the first component of the system chains.
const SystemTenant = ReservedPrefix + "system"

// SystemChain holds every creation and revocation of a key, hash-chained
// like any chain, so `ledgerctl verify` covers it.
const SystemChain = SystemTenant + "/" + Domain

// Payload types of the system chain's entries.
const (
	TypeCreate = "apikey.create/v1" // a key was created
	TypeRevoke = "apikey.revoke/v1" // a key was revoked
)

// NotifyChannel is the commit notification channel of key changes
// (chain.Tx.Notify): an Authenticator that hears it reloads at its next
// call instead of after RevocationDelay.
const NotifyChannel = "apikey"

// ValidateNewTenant checks the tenant of a key being created:
// ValidateTenant's rules, and lowercase ASCII letters, digits, '-', '_'
// and '.', beginning with a letter or a digit, so that no two tenants look
// alike ("ACME" and "acme", a trailing space, a Cyrillic "а"). Keys stored
// before this rule keep their tenants, which ValidateTenant still reads.
func ValidateNewTenant(tenant string) error {
	if err := ValidateTenant(tenant); err != nil {
		return err
	}
	for i := 0; i < len(tenant); i++ {
		c := tenant[i]
		lowerOrDigit := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !lowerOrDigit && (i == 0 || c != '-' && c != '_' && c != '.') {
			return invalid("tenant", ErrInvalidTenant,
				"tenant %q: want lowercase ASCII letters, digits, '-', '_' and '.', beginning with a letter or a digit", tenant)
		}
	}
	return nil
}

// Idempotency keys of the system chain's entries: one creation and one
// revocation per key id.
func createKey(id string) string { return "create:" + id }
func revokeKey(id string) string { return "revoke:" + id }

// ValidateTenant checks a tenant a key may belong to: a valid chain name
// component (chain.ScopedName's rules) of at most TenantLengthMax bytes
// that does not begin with ReservedPrefix.
func ValidateTenant(tenant string) error {
	if strings.HasPrefix(tenant, ReservedPrefix) {
		return invalid("tenant", ErrInvalidTenant, "tenant %q: names beginning with %q are reserved", tenant, ReservedPrefix)
	}
	if _, err := chain.ScopedName(tenant, Domain); err != nil {
		return invalid("tenant", ErrInvalidTenant, "tenant %q: %v", tenant, err)
	}
	return nil
}

// State keys, all under "apikey/":
//
//	k/<id>            the key's record (recordCodec)
//	t/<tenant>/<id>   empty: the tenant's keys, for List
//	n                 how many keys exist (8 bytes, big-endian)
//
// Ids are hex and tenants hold no "/", so no two keys share a prefix.
const (
	stateRecord = "k"
	stateTenant = "t"
	stateCount  = "n"
)

var statePrefix = []byte(Domain + "/")

func recordKey(id string) []byte { return []byte(Domain + "/" + stateRecord + "/" + id) }
func recordPrefix() []byte       { return []byte(Domain + "/" + stateRecord + "/") }
func tenantKey(tenant, id string) []byte {
	return []byte(Domain + "/" + stateTenant + "/" + tenant + "/" + id)
}
func tenantPrefix(tenant string) []byte {
	return []byte(Domain + "/" + stateTenant + "/" + tenant + "/")
}
func countKey() []byte { return []byte(Domain + "/" + stateCount) }

// prefixEnd is the smallest key above every key with the prefix.
func prefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
