package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/idempotency"
	"github.com/ledgerworks/ledger/internal/errcode"
	"github.com/ledgerworks/ledger/internal/problem"
	"github.com/ledgerworks/ledger/outbox"
	"github.com/ledgerworks/ledger/storage"
)

// httpError is a refusal of the server itself, with its status and code.
type httpError struct {
	status int
	code   string
	detail string
}

func (e *httpError) Error() string { return e.code + ": " + e.detail }

var (
	errNoRoute          = &httpError{status: http.StatusNotFound, code: api.CodeNotFound, detail: "no such route"}
	errMethodNotAllowed = &httpError{status: http.StatusMethodNotAllowed, code: api.CodeMethodNotAllowed, detail: "the route does not serve this method"}
)

// invalidf is a 400 INVALID_INPUT.
func invalidf(format string, args ...any) error {
	return &httpError{status: http.StatusBadRequest, code: api.CodeInvalidInput, detail: fmt.Sprintf(format, args...)}
}

// notFoundf is a 404 NOT_FOUND.
func notFoundf(format string, args ...any) error {
	return &httpError{status: http.StatusNotFound, code: api.CodeNotFound, detail: fmt.Sprintf(format, args...)}
}

// statusOf is the HTTP status of each code of errcode.
var statusOf = map[string]int{
	errcode.InvalidInput: http.StatusBadRequest,
	errcode.Usage:        http.StatusBadRequest,
	errcode.NotFound:     http.StatusNotFound,
	errcode.Conflict:     http.StatusConflict,
	errcode.Incomplete:   http.StatusInternalServerError,
	errcode.Locked:       http.StatusServiceUnavailable,
	errcode.Corrupt:      http.StatusInternalServerError,
	errcode.Storage:      http.StatusInternalServerError,
	errcode.Canceled:     http.StatusServiceUnavailable,
	errcode.ProofRefused: http.StatusUnprocessableEntity,
	errcode.TreeBehind:   http.StatusServiceUnavailable,
	errcode.Verification: http.StatusUnprocessableEntity,
}

// classify returns the status, code and detail of an error.
func classify(err error) (status int, code, detail string) {
	var he *httpError
	var ge *idempotency.Error
	switch {
	case errors.As(err, &he):
		return he.status, he.code, he.detail
	case errors.As(err, &ge):
		return idempotency.DefaultStatusMap.Status(ge.Code), string(ge.Code), ge.Detail
	case errors.Is(err, apikey.ErrUnauthenticated):
		return http.StatusUnauthorized, api.CodeUnauthenticated, "the API key does not authenticate"
	case errors.Is(err, apikey.ErrScopeNotHeld):
		return http.StatusForbidden, api.CodeScopeNotHeld, err.Error()
	case errors.Is(err, outbox.ErrNotDead):
		return http.StatusConflict, api.CodeNotDead, err.Error()
	}
	code = errcode.Of(err, errcode.Local{})
	status = statusOf[code]
	if status >= 500 && code == errcode.Storage {
		if storeOutage(err) {
			return http.StatusServiceUnavailable, code, "the ledger's store did not answer; retry with the same key"
		}
		return status, code, "the ledger could not be read or written"
	}
	return status, code, err.Error()
}

// storeOutage reports a failure of the store rather than of the request:
// a transaction the store rolled back (lock timeout, serialization
// failure, deadlock, a backend terminated or a connection lost before
// commit), an I/O failure (a full disk, a lost connection, a commit whose
// outcome is unknown), a ledger closed under the request, or an attempt
// that lost its key while it ran (its lease ended unextended, as when the
// store did not answer its heartbeats, and another attempt or the
// recovery took the key: its transaction wrote nothing). It is
// answered 503 with Retry-After: the same request may succeed later, and
// the replay guard frees the key without counting the attempt. A retry
// after an unknown commit outcome is answered by the guard's record or
// the ledger's key, whichever committed.
func storeOutage(err error) bool {
	return errors.Is(err, storage.ErrRetry) || errors.Is(err, storage.ErrIO) || errors.Is(err, chain.ErrClosed) ||
		errors.Is(err, storage.ErrClosed) || errors.Is(err, idempotency.ErrLeaseLost)
}

// problem answers err as application/problem+json. A 5xx is logged with
// its cause, which the body does not show.
func (s *Server) problem(w http.ResponseWriter, r *http.Request, err error) {
	status, code, detail := classify(err)
	if status >= 500 {
		s.log.LogAttrs(r.Context(), slog.LevelError, "request failed", slog.String("request_id", RequestIDFromContext(r.Context())),
			slog.String("code", code), slog.Any("error", err))
	}
	if k, ok := apikey.FromContext(r.Context()); ok {
		// The ledger's errors name chains in full; a tenant names its
		// chains without its own prefix.
		detail = strings.ReplaceAll(detail, `"`+k.Tenant+chain.NameSeparator, `"`)
	}
	p := problem.Problem{Status: status, Code: code, Detail: detail}
	if seq := errcode.ExistingSeq(err); seq != 0 {
		p.Extra = map[string]any{"existing_seq": strconv.FormatUint(seq, 10)} // a 64-bit integer: a string
	}
	if status == http.StatusServiceUnavailable {
		p.RetryAfter = idempotency.RetryAfterDefault
	}
	problem.Write(w, p)
}

// marshal encodes v as one line of JSON, without HTML escaping.
func marshal(v any) []byte {
	if a, ok := v.(api.AppendResponse); ok {
		return appendAppendResponse(make([]byte, 0, 160), a)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("server: a response does not encode: " + err.Error()) // api types always encode
	}
	return b.Bytes()
}

// jsonHeader is the header of a write's response. It is shared and read
// only: the guard never changes a response's header, and copies its
// values when it writes one.
var jsonHeader = http.Header{"Content-Type": {api.MediaJSON}}

// appendAppendResponse appends a as marshal encodes it (the same bytes as
// encoding/json's, without HTML escaping, and a newline), without
// reflection: the answer of every raw append.
func appendAppendResponse(b []byte, a api.AppendResponse) []byte {
	b = append(b, `{"chain":`...)
	b = appendJSONString(b, a.Chain)
	b = append(b, `,"seq":"`...)
	b = strconv.AppendUint(b, a.Seq, 10)
	b = append(b, `","hash":`...)
	b = appendJSONString(b, a.Hash)
	b = append(b, `,"time_unix_nano":"`...)
	b = strconv.AppendInt(b, a.TimeUnixNano, 10)
	return append(b, "\"}\n"...)
}

// appendJSONString appends s as a JSON string: as it is when it is
// printable ASCII without a quote or a backslash, else as encoding/json
// writes it (escapes, U+2028, invalid UTF-8).
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(s) // a string always encodes
			return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// writeJSON sends v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b := marshal(v)
	h := w.Header()
	h.Set("Content-Type", api.MediaJSON)
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// call is one request as a handler sees it: the authenticated key, its
// tenant, and the guard's context on guarded routes.
type call struct {
	s      *Server
	w      http.ResponseWriter
	r      *http.Request
	ctx    context.Context
	key    apikey.Key
	tenant string
	guard  *idempotency.Context
	// body is the request body once read: a write's transaction may run
	// more than once, and decodes it each time.
	body []byte
	read bool
}

// txn is the ledger transaction a write runs in.
type txn = *chain.Tx

// decode reads the body as exactly one JSON object of v's type: unknown
// fields, trailing data and other media types are refused.
func (c *call) decode(v any) error {
	// A body without Content-Type never gets here (checkRequest); an
	// empty one is refused below.
	if ct := c.r.Header.Get("Content-Type"); ct != "" {
		if err := checkMediaType(ct); err != nil {
			return err
		}
	}
	if err := c.readBody(); err != nil {
		return err
	}
	if len(bytes.TrimSpace(c.body)) == 0 {
		return invalidf("the route needs a JSON %s body", typeName(v))
	}
	// The members first: what the replay guard hashed must be what the
	// handler acts on (checkMembers).
	membersErr := checkMembers(c.body, reflect.TypeOf(v))
	if membersErr != nil && membersErr != errNotJSON {
		return membersErr
	}
	dec := json.NewDecoder(bytes.NewReader(c.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if membersErr != nil { // the decoder took what checkMembers could not read: refused all the same
		return invalidf("the body is not valid JSON")
	}
	if len(bytes.TrimSpace(c.body[dec.InputOffset():])) != 0 {
		return invalidf("the body holds more than one JSON value")
	}
	return nil
}

// readBody reads the request's body into c.body, once.
func (c *call) readBody() error {
	if c.read {
		return nil
	}
	if c.r.Body != nil {
		body, err := io.ReadAll(c.r.Body)
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				return &httpError{status: http.StatusRequestEntityTooLarge, code: api.CodePayloadTooLarge, detail: err.Error()}
			}
			return invalidf("reading the body: %v", err)
		}
		c.body = body
	}
	c.read = true
	return nil
}

// typeName names a body type in messages.
func typeName(v any) string {
	t := fmt.Sprintf("%T", v)
	return strings.TrimPrefix(strings.TrimPrefix(t, "*"), "api.")
}

// op returns the operation id of a guarded request, from which the keys
// of every entry it writes are derived: the same on every retry of the
// request, whoever answers it.
func (c *call) op() string { return c.guard.LedgerKey("req-") }

// full returns the ledger's name of a chain named relative to the tenant.
func (c *call) full(name string) string { return c.tenant + chain.NameSeparator + name }

// rel returns a chain name relative to the tenant.
func (c *call) rel(name string) string {
	return strings.TrimPrefix(name, c.tenant+chain.NameSeparator)
}

// uintQuery parses an unsigned query parameter; def when absent.
func (c *call) uintQuery(name string, def uint64) (uint64, bool, error) {
	v := c.r.URL.Query().Get(name)
	if v == "" {
		return def, false, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, false, invalidf("query %s=%q: want an unsigned integer", name, v)
	}
	return n, true, nil
}

// pathUint parses an unsigned path parameter.
func (c *call) pathUint(name string) (uint64, error) {
	v := c.r.PathValue(name)
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, invalidf("%s %q: want an unsigned integer", name, v)
	}
	return n, nil
}
