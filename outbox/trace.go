package outbox

import (
	"context"
	"errors"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of the outbox's spans.
const TracerName = "github.com/ledgerworks/ledger/outbox"

// traceParentLength is the length of a version-00 W3C traceparent:
// "00-" 32 hex digits "-" 16 hex digits "-" 2 hex digits.
const traceParentLength = 55

// The attributes of the outbox's spans.
const (
	attrTenant    = attribute.Key("outbox.tenant")
	attrTopic     = attribute.Key("messaging.destination.name")
	attrMessageID = attribute.Key("messaging.message.id")
	attrAttempt   = attribute.Key("outbox.attempt")
	attrOutcome   = attribute.Key("outbox.outcome")
	attrReplayed  = attribute.Key("outbox.replayed")
	attrSystem    = attribute.Key("messaging.system")
	attrStatus    = attribute.Key("http.response.status_code")
)

// traceParentOf is the traceparent of ctx's span, or "" when ctx has none.
func traceParentOf(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), sc), carrier)
	return carrier["traceparent"]
}

// spanContextOf parses a stored traceparent; an invalid one (never stored:
// decodeMessage refuses it) gives the zero SpanContext.
func spanContextOf(traceParent string) trace.SpanContext {
	if traceParent == "" {
		return trace.SpanContext{}
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceParent})
	return trace.SpanContextFromContext(ctx)
}

// validTraceParent reports whether s is a version-00 traceparent with a
// valid trace and span id, written as traceParentOf writes it (lower-case
// hex), so that a stored message has one encoding.
func validTraceParent(s string) bool {
	if len(s) != traceParentLength || s[:3] != "00-" || s[35] != '-' || s[52] != '-' {
		return false
	}
	for i := 3; i < traceParentLength; i++ {
		if i == 35 || i == 52 {
			continue
		}
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	sc := spanContextOf(s)
	return sc.IsValid() && traceParentOf(trace.ContextWithSpanContext(context.Background(), sc)) == s
}

// startEnqueueSpan starts the span of an enqueue as a child of the
// caller's span, with the tracer provider of that span; nothing when the
// caller's span does not record (no tracing, or not sampled).
func startEnqueueSpan(ctx context.Context, r *EnqueueRequest) trace.Span {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return nil
	}
	_, span := parent.TracerProvider().Tracer(TracerName).Start(ctx, "outbox.enqueue "+r.Topic,
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attrSystem.String("ledger.outbox"), attrTenant.String(r.Tenant), attrTopic.String(r.Topic)))
	return span
}

// endEnqueueSpan ends the span of an enqueue with its result.
func endEnqueueSpan(span trace.Span, res *EnqueueResult, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	} else {
		span.SetAttributes(attrMessageID.String(res.ID.String()), attrReplayed.Bool(res.Replayed))
	}
	span.End()
}

// startDeliverySpan starts the span of one delivery attempt: the root of a
// trace of its own, linked to the span that enqueued the message when the
// message carries its traceparent.
func startDeliverySpan(ctx context.Context, tracer trace.Tracer, tenant string, d *Delivery) (context.Context, trace.Span) {
	m := &d.Message
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attrSystem.String("ledger.outbox"), attrTenant.String(tenant), attrTopic.String(m.Topic),
			attrMessageID.String(m.ID.String()), attrAttempt.Int(d.Attempt))}
	if sc := spanContextOf(m.TraceParent); sc.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	return tracer.Start(ctx, "outbox.deliver "+m.Topic, opts...)
}

// endDeliverySpan ends the span of an attempt with its outcome.
func endDeliverySpan(span trace.Span, d *Delivery, err error) {
	outcome := Delivered
	switch {
	case errors.Is(err, ErrPermanent):
		outcome = Rejected
	case err != nil:
		outcome = Failed
	}
	span.SetAttributes(attrOutcome.String(outcome.String()))
	if err != nil {
		span.SetStatus(codes.Error, d.Detail)
	}
	span.End()
}

// traceWebhook marks the attempt's span with the receiver's answer.
func traceWebhook(ctx context.Context, status int) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attrStatus.Int(status))
	}
}

// injectTraceParent gives a webhook request the traceparent of the
// attempt's span, so that the receiver's trace continues it.
func injectTraceParent(ctx context.Context, h http.Header) {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
	}
}
