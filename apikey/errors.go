package apikey

import (
	"errors"
	"fmt"

	"github.com/ledgerworks/ledger/chain"
)

// Errors about a caller's input are *Error values that match one of these
// sentinels and chain.ErrInvalid (chain.ErrNotFound for ErrUnknownKey), so
// that callers and ledgerctl classify them like the engine's. Nothing is
// written when one is returned.
var (
	// ErrInvalidTenant: the tenant is not a valid chain name component, or
	// begins with ReservedPrefix.
	ErrInvalidTenant = errors.New("invalid tenant")
	// ErrInvalidName: the key's name is too long, not UTF-8 or holds a
	// control or format character.
	ErrInvalidName = errors.New("invalid key name")
	// ErrInvalidScope: a scope is not read, write or admin, is repeated, or
	// none is given.
	ErrInvalidScope = errors.New("invalid scope")
	// ErrInvalidReason: a revocation reason is too long, not UTF-8 or holds
	// a control character.
	ErrInvalidReason = errors.New("invalid revocation reason")
	// ErrInvalidID: a key id is not KeyIDLength lowercase hex digits.
	ErrInvalidID = errors.New("invalid key id")
	// ErrUnknownKey: no key has this id (in this tenant, for the calls that
	// take one).
	ErrUnknownKey = errors.New("unknown key")
	// ErrTooManyKeys: the ledger holds KeysMax keys already.
	ErrTooManyKeys = errors.New("too many keys")
	// ErrScopeNotHeld: the key asking to create or revoke a key lacks one
	// of that key's scopes (CreateRequest.By, RevokeRequest.By). Scopes
	// never widen: a key creates only keys no wider than itself and
	// revokes only keys no wider than itself.
	ErrScopeNotHeld = errors.New("scope not held by the asking key")
)

// ErrUnauthenticated is the answer of Authenticate for every token that
// does not authenticate: malformed, unknown, revoked, or with a wrong
// secret. The cases are not told apart, so the answer says nothing about
// which keys exist.
var ErrUnauthenticated = errors.New("apikey: unauthenticated")

// ErrMalformedToken is matched (beside ErrUnauthenticated) by the refusal
// of a token that does not parse, for logs and tests; it tells nothing a
// caller could not see from the token itself.
var ErrMalformedToken = errors.New("apikey: malformed token")

// ErrSystemChain is matched (beside chain.ErrCorrupt) when the system chain
// of keys does not decode or its entries do not link: the keys cannot be
// trusted, so Authenticate refuses every token until it is repaired.
var ErrSystemChain = errors.New("apikey: system chain damaged")

// Error is an error about a caller's input.
type Error struct {
	Field  string
	Reason string
	Err    error // one of the sentinels above
}

func (e *Error) Error() string { return fmt.Sprintf("apikey: %v: %s", e.Err, e.Reason) }

// Unwrap matches the sentinel and the engine's class of it.
func (e *Error) Unwrap() []error {
	if e.Err == ErrUnknownKey {
		return []error{e.Err, chain.ErrNotFound}
	}
	return []error{e.Err, chain.ErrInvalid}
}

func invalid(field string, sentinel error, format string, args ...any) error {
	return &Error{Field: field, Err: sentinel, Reason: fmt.Sprintf(format, args...)}
}

// systemChainError is a damaged system chain.
type systemChainError struct {
	seq    uint64
	reason string
}

func (e *systemChainError) Error() string {
	return fmt.Sprintf("apikey: system chain %s seq %d: %s", SystemChain, e.seq, e.reason)
}

func (e *systemChainError) Unwrap() []error { return []error{ErrSystemChain, chain.ErrCorrupt} }

func isNotFound(err error) bool { return errors.Is(err, chain.ErrNotFound) }
