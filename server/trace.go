package server

import (
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/ledgerworks/ledger/api"
)

// TracerName is the instrumentation scope of the server's spans.
const TracerName = "github.com/ledgerworks/ledger/server"

// traceContext reads and writes the W3C traceparent and tracestate
// headers; the server never reads the global propagator.
var traceContext = propagation.TraceContext{}

// The attributes of a request's span, after the HTTP semantic conventions.
const (
	attrMethod    = attribute.Key("http.request.method")
	attrRoute     = attribute.Key("http.route")
	attrStatus    = attribute.Key("http.response.status_code")
	attrPath      = attribute.Key("url.path")
	attrRequestID = attribute.Key("ledger.request_id")
	attrTenant    = attribute.Key("ledger.tenant")
	attrReplayed  = attribute.Key("ledger.replayed")
)

// startSpan starts the span of a request: a child of the traceparent the
// request carries (the sampler then follows the caller's decision), else
// the root of a trace.
func (s *Server) startSpan(r *http.Request, requestID string) (*http.Request, trace.Span) {
	ctx := traceContext.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := s.tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attrMethod.String(r.Method), attrPath.String(r.URL.Path), attrRequestID.String(requestID)))
	return r.WithContext(ctx), span
}

// endSpan names the span after its route ("POST /v1/receipts") and ends
// it with the response's status; a 5xx is an error.
func (s *Server) endSpan(span trace.Span, r *http.Request, in *info, sw *statusWriter) {
	status := sw.status
	if status == 0 {
		status = http.StatusOK
	}
	if span.IsRecording() {
		if in.route != nil {
			span.SetName(r.Method + " " + in.route.Path)
			span.SetAttributes(attrRoute.String(in.route.Path))
		}
		span.SetAttributes(attrStatus.Int(status))
		if in.tenant != "" {
			span.SetAttributes(attrTenant.String(in.tenant))
		}
		if sw.Header().Get(api.HeaderReplayed) == "true" {
			span.SetAttributes(attrReplayed.Bool(true))
		}
		if status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
	}
	span.End()
}
