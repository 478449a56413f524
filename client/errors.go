package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"strconv"
	"strings"
	"time"
)

// The server's codes are the api package's Code constants (api.CodeKeyReused,
// api.CodeInProgress, …); an unknown code is passed through as is.

// Codes the client gives failures that carry no problem body; Status is 0
// for the first and the response's for the others.
const (
	// CodeNetworkError: no response arrived (connection refused or reset,
	// a timed-out attempt, a truncated body). The outcome is unknown.
	CodeNetworkError = "NETWORK_ERROR"
	// CodeUnexpectedResponse: a response that is neither the route's JSON
	// nor a problem body with a code (a proxy's HTML page, say).
	CodeUnexpectedResponse = "UNEXPECTED_RESPONSE"
	// CodeResponseTooLarge: a body over Options.ResponseSizeMax.
	CodeResponseTooLarge = "RESPONSE_TOO_LARGE"
)

// Errors returned before anything is sent.
var (
	// ErrInvalidOptions: Options that New refuses.
	ErrInvalidOptions = errors.New("client: invalid options")
	// ErrInvalidKey: a caller's Idempotency-Key outside the limits.
	ErrInvalidKey = errors.New("client: invalid idempotency key")
	// ErrInvalidArgument: a chain name, id or request the client cannot
	// send (empty, or not encodable).
	ErrInvalidArgument = errors.New("client: invalid argument")
)

// Error is the failure of a call: the last attempt's answer, or why no
// answer came.
type Error struct {
	// Method and Path name the call (Path without the query).
	Method, Path string
	// Status is the HTTP status; 0 when no response arrived.
	Status int
	// Code is the problem's stable code, or one of the client's own codes.
	Code string
	// Type, Title and Detail are the problem's members of those names.
	Type, Title, Detail string
	// Extra holds the problem's other members (existing_seq, say), raw.
	Extra map[string]json.RawMessage
	// RetryAfter is the response's Retry-After; 0 when absent.
	RetryAfter time.Duration
	// Retryable reports whether the same request with the same key may
	// succeed later: true for network errors, REQUEST_IN_PROGRESS, 429,
	// 502, 503 and 504. The outcome of a retryable failure is unknown.
	Retryable bool
	// Key is the call's Idempotency-Key ("" for reads): retry with it.
	Key string
	// Attempts is how many attempts the call made.
	Attempts int
	// RequestID is the server's X-Request-Id of the last response.
	RequestID string
	// Err is the cause of a client-side code (the transport's error).
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("client: ")
	b.WriteString(e.Method)
	b.WriteByte(' ')
	b.WriteString(e.Path)
	b.WriteString(": ")
	if e.Status != 0 {
		b.WriteString(strconv.Itoa(e.Status))
		b.WriteByte(' ')
	}
	b.WriteString(e.Code)
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " (after %d attempts)", e.Attempts)
	}
	return b.String()
}

// Unwrap returns the cause of a client-side code.
func (e *Error) Unwrap() error { return e.Err }

// Is matches another *Error by Code, so that errors.Is(err,
// &client.Error{Code: client.CodeNotFound}) works.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code != "" && t.Code == e.Code
}

// ErrorCode returns the Code of the *Error in err's chain, or "".
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// problemDetailMax bounds the text kept from a body that is not a problem.
const problemDetailMax = 256

// decodeProblem builds the Error of a non-2xx response from its
// Content-Type and body. A problem+json (or JSON) object with a string code
// gives its members; anything else is UNEXPECTED_RESPONSE with the start of
// the body as Detail. The response's status wins over the body's.
func decodeProblem(status int, contentType string, body []byte) *Error {
	e := &Error{Status: status}
	media, _, _ := mime.ParseMediaType(contentType)
	if media == "application/problem+json" || media == "application/json" {
		var members map[string]json.RawMessage
		if json.Unmarshal(body, &members) == nil {
			var code string
			if raw, ok := members["code"]; ok && json.Unmarshal(raw, &code) == nil && code != "" {
				e.Code = code
				for name, dst := range map[string]*string{"type": &e.Type, "title": &e.Title, "detail": &e.Detail} {
					if raw, ok := members[name]; ok {
						_ = json.Unmarshal(raw, dst) // a member of another type is left empty
					}
				}
				for _, name := range []string{"type", "title", "status", "code", "detail"} {
					delete(members, name)
				}
				if len(members) > 0 {
					e.Extra = members
				}
				return e
			}
		}
	}
	e.Code = CodeUnexpectedResponse
	e.Detail = printablePrefix(body, problemDetailMax)
	return e
}

// printablePrefix returns up to n bytes of b's start as text, with control
// characters and invalid UTF-8 replaced, for an error message.
func printablePrefix(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, strings.TrimRight(s, "\r\n"))
}

// ExtraInt64 returns the integer member name of the problem, and whether
// it is present and an integer: a JSON string of decimal digits, as the
// API writes 64-bit integers (existing_seq), or a JSON number.
func (e *Error) ExtraInt64(name string) (int64, bool) {
	var v int64
	return v, e.extraInteger(name, &v)
}

// ExtraUint64 is ExtraInt64 for an unsigned member (existing_seq).
func (e *Error) ExtraUint64(name string) (uint64, bool) {
	var v uint64
	return v, e.extraInteger(name, &v)
}

// extraInteger decodes the member name into v, quoted or not.
func (e *Error) extraInteger(name string, v any) bool {
	raw, ok := e.Extra[name]
	if !ok {
		return false
	}
	if s, err := strconv.Unquote(string(raw)); err == nil {
		raw = json.RawMessage(s)
	}
	return json.Unmarshal(raw, v) == nil
}

// checkKey applies the limits of a caller's key: 1 to KeySizeMax bytes of
// printable ASCII, without surrounding spaces or a leading quote (which
// the server would read as a quoted key). Every language's HTTP library
// sends such a value unchanged.
func checkKey(key string) error {
	if key == "" || len(key) > KeySizeMax {
		return fmt.Errorf("%w: %d bytes, want 1 to %d", ErrInvalidKey, len(key), KeySizeMax)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("%w: byte %d is not printable ASCII", ErrInvalidKey, i)
		}
	}
	if key[0] == ' ' || key[len(key)-1] == ' ' || key[0] == '"' {
		return fmt.Errorf("%w: it begins or ends with a space or begins with a quote", ErrInvalidKey)
	}
	return nil
}
