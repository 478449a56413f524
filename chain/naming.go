package chain

import (
	"fmt"
	"strings"
	"unicode"
	"unsafe"
)

// NameSeparator separates the components of a scoped chain id.
const NameSeparator = "/"

// NameComponentLengthMax is the longest component of a scoped chain id.
const NameComponentLengthMax = 64

// The rules for new names. A chain id, idempotency key or type that a new
// request carries is text a ledger can hold (validateText: length, UTF-8, no
// control character) and, on top of that, safe to show and to put in a URL
// path: no Unicode format character (category Cf: zero-width and bidi
// controls such as U+202E, which make one name look like another), and for
// a chain id no empty, "." or ".." component and no leading separator, which
// a path would resolve away. Entries stored before these rules keep their
// names: reading, verifying, exporting and importing them uses validateText
// alone.

// validateNewText is validateText plus the refusal of format characters.
func validateNewText(field, s string, lengthMin, lengthMax int, sentinel error) error {
	// Printable ASCII, what names nearly always are, holds no format
	// character.
	if len(s) >= lengthMin && len(s) <= lengthMax && printableASCII(unsafe.Slice(unsafe.StringData(s), len(s))) {
		return nil
	}
	if err := validateTextRunes(field, s, lengthMin, lengthMax, sentinel); err != nil {
		return err
	}
	for i, r := range s {
		// U+00AD is the first format character.
		if r >= 0xad && unicode.Is(unicode.Cf, r) {
			return &InvalidError{Field: field, Err: sentinel, Rule: ErrUnsafeName,
				Reason: fmt.Sprintf("%s has format character %U at byte %d", field, r, i)}
		}
	}
	return nil
}

// validateNewChain checks a chain id of a new request.
func validateNewChain(chain string) error {
	if err := validateNewText("chain", chain, 1, ChainLengthMax, ErrInvalidChain); err != nil {
		return err
	}
	// A component is looked at only when it is empty or one or two bytes
	// that start and end with a dot.
	for start := 0; ; {
		end := strings.IndexByte(chain[start:], '/')
		if end < 0 {
			end = len(chain)
		} else {
			end += start
		}
		if n := end - start; n == 0 || n <= 2 && chain[start] == '.' && chain[end-1] == '.' {
			return chainComponentError(chain, start, end)
		}
		if end == len(chain) {
			return nil
		}
		start = end + 1
	}
}

// chainComponentError is the refusal of the component chain[start:end].
func chainComponentError(chain string, start, end int) error {
	if start == 0 && end == 0 {
		return &InvalidError{Field: "chain", Err: ErrInvalidChain, Rule: ErrUnsafeName,
			Reason: fmt.Sprintf("chain %q starts with %q", chain, NameSeparator)}
	}
	number := strings.Count(chain[:start], NameSeparator) + 1
	return &InvalidError{Field: "chain", Err: ErrInvalidChain, Rule: ErrUnsafeName,
		Reason: fmt.Sprintf("chain %q: component %d %s", chain, number, componentProblem(chain[start:end]))}
}

// componentProblem says why a component of a new chain id is refused, or
// returns "".
func componentProblem(component string) string {
	switch component {
	case "":
		return "is empty"
	case ".", "..":
		return fmt.Sprintf("is %q", component)
	}
	return ""
}

// ScopedName builds the chain id tenant/domain/part/… used by the domain
// packages. Components are refused, not escaped, when they could blur the
// boundary between scopes: each must be non-empty, at most
// NameComponentLengthMax bytes, valid UTF-8 without control or format
// characters, neither "." nor "..", and free of the separator. Two different
// component lists therefore never give the same id, so one tenant can never
// address another tenant's chains.
func ScopedName(tenant, domain string, parts ...string) (string, error) {
	components := append([]string{tenant, domain}, parts...)
	fields := append([]string{"tenant", "domain"}, make([]string, len(parts))...)
	for i := range parts {
		fields[2+i] = fmt.Sprintf("name part %d", i+1)
	}
	for i, c := range components {
		if err := validateNewText(fields[i], c, 1, NameComponentLengthMax, ErrInvalidChain); err != nil {
			return "", err
		}
		if strings.Contains(c, NameSeparator) {
			return "", &InvalidError{Field: fields[i], Err: ErrInvalidChain,
				Reason: fmt.Sprintf("%s %q contains %q", fields[i], c, NameSeparator)}
		}
		if reason := componentProblem(c); reason != "" {
			return "", &InvalidError{Field: fields[i], Err: ErrInvalidChain, Rule: ErrUnsafeName,
				Reason: fmt.Sprintf("%s %s", fields[i], reason)}
		}
	}
	name := strings.Join(components, NameSeparator)
	if err := validateNewChain(name); err != nil {
		return "", err
	}
	return name, nil
}

// SplitScopedName returns the components of a scoped chain id.
func SplitScopedName(name string) []string { return strings.Split(name, NameSeparator) }
