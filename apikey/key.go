package apikey

import (
	"slices"
	"strings"
)

// Scope is what a key may do. Scopes are explicit: admin does not imply
// write, nor write read, so a key's record lists exactly what it may do
// (a key that manages keys need not read the books).
type Scope string

// The scopes, in their canonical order.
const (
	ScopeRead  Scope = "read"
	ScopeWrite Scope = "write"
	ScopeAdmin Scope = "admin"
)

// scopeOrder is the canonical order of scopes in a key's record.
var scopeOrder = []Scope{ScopeRead, ScopeWrite, ScopeAdmin}

// Key is a key's public record; the secret is never part of it.
type Key struct {
	// ID is KeyIDLength lowercase hex digits; the token's prefix names it.
	ID     string
	Tenant string
	// Name is a label for people; it may be empty.
	Name string
	// Scopes are distinct, in the order read, write, admin.
	Scopes []Scope
	// CreatedUnixNano is the time of the key's creation entry.
	CreatedUnixNano int64
	// RevokedUnixNano is the time of its revocation entry; 0 while valid.
	RevokedUnixNano int64
	// RevokedReason is the reason its revocation gave.
	RevokedReason string
}

// Has reports whether the key carries the scope itself (scopes are
// explicit: admin implies neither write nor read).
func (k Key) Has(s Scope) bool { return slices.Contains(k.Scopes, s) }

// Revoked reports whether the key has been revoked.
func (k Key) Revoked() bool { return k.RevokedUnixNano != 0 }

// ParseScopes parses a comma-separated list such as "read,write" (spaces
// around names are ignored) into distinct scopes in canonical order.
func ParseScopes(s string) ([]Scope, error) {
	var scopes []Scope
	for _, part := range strings.Split(s, ",") {
		scopes = append(scopes, Scope(strings.TrimSpace(part)))
	}
	return normalizeScopes(scopes)
}

// normalizeScopes checks scopes (at least one, each known, none repeated)
// and returns them in canonical order.
func normalizeScopes(scopes []Scope) ([]Scope, error) {
	if len(scopes) == 0 {
		return nil, invalid("scopes", ErrInvalidScope, "a key needs at least one scope of read, write, admin")
	}
	if len(scopes) > len(scopeOrder) {
		return nil, invalid("scopes", ErrInvalidScope, "%d scopes given, there are %d", len(scopes), len(scopeOrder))
	}
	seen := map[Scope]bool{}
	for _, s := range scopes {
		if !slices.Contains(scopeOrder, s) {
			return nil, invalid("scopes", ErrInvalidScope, "scope %q: want read, write or admin", string(s))
		}
		if seen[s] {
			return nil, invalid("scopes", ErrInvalidScope, "scope %q given twice", string(s))
		}
		seen[s] = true
	}
	out := make([]Scope, 0, len(scopes))
	for _, s := range scopeOrder {
		if seen[s] {
			out = append(out, s)
		}
	}
	return out, nil
}

// ScopeStrings returns the scopes as strings, for printing.
func ScopeStrings(scopes []Scope) []string {
	out := make([]string, len(scopes))
	for i, s := range scopes {
		out[i] = string(s)
	}
	return out
}
