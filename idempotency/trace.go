package idempotency

import (
	"encoding/binary"
	"encoding/hex"
	"net/http"

	"github.com/zeebo/blake3"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of the guard's spans.
const TracerName = "github.com/ledgerworks/ledger/idempotency"

// scopeDigestDomain separates ScopeDigest's input from every other hash.
const scopeDigestDomain = "ledger/idempotency/scope-digest/v1\x00"

// The attributes of the guard's span. The key itself is never recorded: a
// client may use a secret as its key; the scope's digest identifies it.
const (
	attrOutcome   = attribute.Key("idempotency.outcome")
	attrOperation = attribute.Key("idempotency.operation")
	attrScope     = attribute.Key("idempotency.scope_digest")
	attrAttempt   = attribute.Key("idempotency.attempt")
	attrStatus    = attribute.Key("http.response.status_code")
)

// ScopeDigest identifies a scope without revealing its key or user: the
// first 16 bytes of BLAKE3-256 over a domain prefix and the operation,
// user and key, each length-prefixed, in hex. The same scope always has
// the same digest, so the spans of a request's retries can be found
// together.
func ScopeDigest(s Scope) string {
	b := make([]byte, 0, len(scopeDigestDomain)+12+len(s.Operation)+len(s.User)+len(s.Key))
	b = append(b, scopeDigestDomain...)
	for _, f := range [...]string{s.Operation, s.User, s.Key} {
		b = binary.BigEndian.AppendUint32(b, uint32(len(f)))
		b = append(b, f...)
	}
	sum := blake3.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// serveTraced is serve within the guard's span, a child of the request's.
func (g *Guard) serveTraced(w http.ResponseWriter, r *http.Request, next http.Handler) {
	ctx, span := g.tracer.Start(r.Context(), "idempotency.guard")
	defer span.End()
	g.serve(w, r.WithContext(ctx), next)
}

// traceOutcome records c's outcome on the guard's span, the span of r's
// context.
func (g *Guard) traceOutcome(r *http.Request, c *Context, outcome Outcome, status int) {
	span := trace.SpanFromContext(r.Context())
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrOutcome.String(string(outcome)), attrStatus.Int(status))
	if c.Operation != "" {
		span.SetAttributes(attrOperation.String(c.Operation))
	}
	if c.Key != "" {
		span.SetAttributes(attrScope.String(ScopeDigest(c.Scope)))
	}
	if c.Attempt > 0 {
		span.SetAttributes(attrAttempt.Int(c.Attempt))
	}
	switch outcome {
	case OutcomeFailedPermanent, OutcomeFailedTransient, OutcomePoisoned, OutcomeStoreUnavailable, OutcomeStoreError:
		span.SetStatus(codes.Error, string(outcome))
	}
}
