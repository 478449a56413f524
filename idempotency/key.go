package idempotency

import (
	"strings"
	"unicode/utf8"
)

// Limits of a scope, checked on entry.
const (
	// KeySizeMax bounds an Idempotency-Key in bytes (after unquoting).
	KeySizeMax = 255
	// OperationSizeMax bounds an operation name in bytes.
	OperationSizeMax = 255
	// UserSizeMax bounds a user id in bytes.
	UserSizeMax = 255
)

// ParseKey parses the value of an Idempotency-Key header. It accepts the
// bare form (`abc-123`) and the structured-field string form of the IETF
// draft (`"abc-123"`, with `\"` and `\\` escapes). The key must be 1 to
// KeySizeMax bytes of valid UTF-8 (printable ASCII in the quoted form) with
// no control characters. Optional whitespace around the value is ignored.
func ParseKey(value string) (string, error) {
	v := strings.Trim(value, " \t")
	if v == "" {
		return "", &Error{Code: CodeKeyInvalid, Detail: "key is empty"}
	}
	if v[0] == '"' {
		return parseQuotedKey(v)
	}
	if !utf8.ValidString(v) {
		return "", &Error{Code: CodeKeyInvalid, Detail: "key is not valid UTF-8"}
	}
	for _, r := range v {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return "", &Error{Code: CodeKeyInvalid, Detail: "key holds a control character"}
		}
	}
	if len(v) > KeySizeMax {
		return "", &Error{Code: CodeKeyInvalid, Detail: "key is longer than 255 bytes"}
	}
	return v, nil
}

// parseQuotedKey parses an RFC 8941 sf-string.
func parseQuotedKey(v string) (string, error) {
	if len(v) < 2 || v[len(v)-1] != '"' {
		return "", &Error{Code: CodeKeyInvalid, Detail: "quoted key lacks its closing quote"}
	}
	var b strings.Builder
	inner := v[1 : len(v)-1]
	for i := 0; i < len(inner); i++ {
		c := inner[i]
		switch {
		case c == '\\':
			i++
			if i == len(inner) || (inner[i] != '"' && inner[i] != '\\') {
				return "", &Error{Code: CodeKeyInvalid, Detail: `quoted key holds an escape other than \" or \\`}
			}
			b.WriteByte(inner[i])
		case c == '"':
			return "", &Error{Code: CodeKeyInvalid, Detail: "quoted key holds an unescaped quote"}
		case c < 0x20 || c > 0x7e:
			return "", &Error{Code: CodeKeyInvalid, Detail: "quoted key holds a character outside printable ASCII"}
		default:
			b.WriteByte(c)
		}
		if b.Len() > KeySizeMax {
			return "", &Error{Code: CodeKeyInvalid, Detail: "key is longer than 255 bytes"}
		}
	}
	if b.Len() == 0 {
		return "", &Error{Code: CodeKeyInvalid, Detail: "key is empty"}
	}
	return b.String(), nil
}

// validName checks an operation or user id: 1..max bytes of UTF-8 without
// control characters.
func validName(s string, max int) bool {
	if s == "" || len(s) > max || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// Validate checks the scope's limits; the error wraps ErrInvalidScope.
func (s Scope) Validate() error { return s.validate(false, false) }

// validate is Validate of a scope whose operation is known to be valid
// when opValid is set, and whose key ParseKey returned when keyParsed is
// (ParseKey's rules are stricter than a scope's).
func (s Scope) validate(opValid, keyParsed bool) error {
	switch {
	case !opValid && !validName(s.Operation, OperationSizeMax):
		return &scopeError{"operation", s.Operation}
	case !validName(s.User, UserSizeMax):
		return &scopeError{"user", s.User}
	case !keyParsed && !validName(s.Key, KeySizeMax):
		return &scopeError{"key", s.Key}
	}
	return nil
}

type scopeError struct{ field, value string }

func (e *scopeError) Error() string {
	return "idempotency: invalid scope: " + e.field + " " + strconvQuote(e.value)
}
func (e *scopeError) Unwrap() error { return ErrInvalidScope }

func strconvQuote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return "\"" + strings.ToValidUTF8(s, "?") + "\""
}
