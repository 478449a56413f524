package idempotency

import (
	"errors"
	"net/http"
	"time"

	"github.com/ledgerworks/ledger/internal/problem"
)

// Code is the stable, machine-readable name of a refusal. Clients branch on
// it; it never changes once published.
type Code string

// The codes the guard answers with.
const (
	CodeKeyRequired      Code = "KEY_REQUIRED"
	CodeKeyInvalid       Code = "KEY_INVALID"
	CodeKeyReused        Code = "KEY_REUSED_WITH_DIFFERENT_REQUEST"
	CodeInProgress       Code = "REQUEST_IN_PROGRESS"
	CodeRequestFailed    Code = "REQUEST_FAILED"
	CodeStoreUnavailable Code = "STORE_UNAVAILABLE"
	CodeStoreRefused     Code = "STORE_REFUSED"
	CodeUnauthenticated  Code = "UNAUTHENTICATED"
	CodeBodyTooLarge     Code = "REQUEST_BODY_TOO_LARGE"
	CodeBodyUnreadable   Code = "REQUEST_BODY_UNREADABLE"
)

// Error is a refusal of the guard: its Code, a human-readable Detail, and
// for retryable refusals how long the client should wait.
type Error struct {
	Code       Code
	Detail     string
	RetryAfter int // seconds; 0 when the refusal is not worth retrying soon
	Err        error
}

func (e *Error) Error() string {
	msg := "idempotency: " + string(e.Code)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the cause (a store's error, for STORE_UNAVAILABLE).
func (e *Error) Unwrap() error { return e.Err }

// Is matches another *Error by Code, so that errors.Is(err,
// &Error{Code: CodeInProgress}) works.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// ErrorCode returns the Code of the *Error in err's chain, or "" when there
// is none.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// Sentinel errors of the stores.
var (
	// ErrNotFound: no record for the scope.
	ErrNotFound = errors.New("idempotency: record not found")
	// ErrLeaseLost: the record is no longer PROCESSING under the caller's
	// token (it finished, was recovered, or expired and was taken over).
	// A stale attempt gets this instead of changing the record.
	ErrLeaseLost = errors.New("idempotency: lease lost")
	// ErrStoreUnavailable wraps a store's failure to answer.
	ErrStoreUnavailable = errors.New("idempotency: store unavailable")
	// ErrTxUnsupported: the store cannot commit a record inside a ledger
	// transaction (see Context.SucceedTx).
	ErrTxUnsupported = errors.New("idempotency: store cannot commit in a ledger transaction")
	// ErrInvalidScope: an operation, user or key outside the limits.
	ErrInvalidScope = errors.New("idempotency: invalid scope")
)

// StatusMap maps codes to HTTP statuses. A route overrides entries of
// DefaultStatusMap with its own (for example 422 for CodeKeyReused, as the
// IETF draft suggests, or 425 for CodeInProgress); codes it lacks fall back
// to DefaultStatusMap.
type StatusMap map[Code]int

// DefaultStatusMap is the status of every code when a route sets none.
var DefaultStatusMap = StatusMap{
	CodeKeyRequired:      http.StatusBadRequest,
	CodeKeyInvalid:       http.StatusBadRequest,
	CodeKeyReused:        http.StatusConflict,
	CodeInProgress:       http.StatusConflict,
	CodeRequestFailed:    http.StatusConflict,
	CodeStoreUnavailable: http.StatusServiceUnavailable,
	CodeStoreRefused:     http.StatusInternalServerError,
	CodeUnauthenticated:  http.StatusUnauthorized,
	CodeBodyTooLarge:     http.StatusRequestEntityTooLarge,
	CodeBodyUnreadable:   http.StatusBadRequest,
}

// Status returns the status of code: m's entry, else DefaultStatusMap's,
// else 500.
func (m StatusMap) Status(code Code) int {
	if s, ok := m[code]; ok {
		return s
	}
	if s, ok := DefaultStatusMap[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

var titles = map[Code]string{
	CodeKeyRequired:      "Idempotency-Key header required",
	CodeKeyInvalid:       "Idempotency-Key header malformed",
	CodeKeyReused:        "Idempotency-Key reused with a different request",
	CodeInProgress:       "A request with this Idempotency-Key is in progress",
	CodeRequestFailed:    "The request with this Idempotency-Key failed permanently",
	CodeStoreUnavailable: "Idempotency store unavailable",
	CodeStoreRefused:     "Idempotency store refused the server's credentials",
	CodeUnauthenticated:  "Authentication required",
	CodeBodyTooLarge:     "Request body too large",
	CodeBodyUnreadable:   "Request body could not be read",
}

// WriteProblem writes e as an application/problem+json body (RFC 9457)
// with the status m gives its code, and Retry-After when set.
func WriteProblem(w http.ResponseWriter, m StatusMap, e *Error) {
	problem.Write(w, problem.Problem{Status: m.Status(e.Code), Code: string(e.Code), Title: titles[e.Code],
		Detail: e.Detail, RetryAfter: time.Duration(e.RetryAfter) * time.Second})
}
