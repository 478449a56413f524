package chain

import (
	"fmt"
	"strings"
)

// NameSeparator separates the components of a scoped chain id.
const NameSeparator = "/"

// NameComponentLengthMax is the longest component of a scoped chain id.
const NameComponentLengthMax = 64

// ScopedName builds the chain id tenant/domain/part/… used by the domain
// packages. Components are refused, not escaped, when they could blur the
// boundary between scopes: each must be non-empty, at most
// NameComponentLengthMax bytes, valid UTF-8 without control characters, and
// free of the separator. Two different component lists therefore never give
// the same id, so one tenant can never address another tenant's chains.
func ScopedName(tenant, domain string, parts ...string) (string, error) {
	components := append([]string{tenant, domain}, parts...)
	fields := append([]string{"tenant", "domain"}, make([]string, len(parts))...)
	for i := range parts {
		fields[2+i] = fmt.Sprintf("name part %d", i+1)
	}
	for i, c := range components {
		if err := validateText(fields[i], c, 1, NameComponentLengthMax, ErrInvalidChain); err != nil {
			return "", err
		}
		if strings.Contains(c, NameSeparator) {
			return "", &InvalidError{Field: fields[i], Err: ErrInvalidChain,
				Reason: fmt.Sprintf("%s %q contains %q", fields[i], c, NameSeparator)}
		}
	}
	name := strings.Join(components, NameSeparator)
	if err := ValidateChain(name); err != nil {
		return "", err
	}
	return name, nil
}

// SplitScopedName returns the components of a scoped chain id.
func SplitScopedName(name string) []string { return strings.Split(name, NameSeparator) }
