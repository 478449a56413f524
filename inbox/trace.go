package inbox

import (
	"context"
	"errors"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/ledgerworks/ledger/outbox/signature"
)

// TracerName is the instrumentation scope of the inbox's spans.
const TracerName = "github.com/ledgerworks/ledger/inbox"

// The attributes of the inbox's spans.
const (
	attrProvider  = attribute.Key("inbox.provider")
	attrVerdict   = attribute.Key("inbox.verdict")
	attrEventID   = attribute.Key("inbox.event_id")
	attrDuplicate = attribute.Key("inbox.duplicate")
)

// Verify is v.Verify within a span, "inbox.verify", a child of ctx's,
// that records the verdict (valid, bad_signature or no_event_id); without
// tp, v.Verify alone.
func Verify(ctx context.Context, tp trace.TracerProvider, v Verifier, provider string, h http.Header, body []byte, now time.Time) (string, error) {
	if tp == nil {
		return v.Verify(h, body, now)
	}
	_, span := tp.Tracer(TracerName).Start(ctx, "inbox.verify", trace.WithAttributes(attrProvider.String(provider)))
	defer span.End()
	id, err := v.Verify(h, body, now)
	switch {
	case errors.Is(err, signature.ErrInvalid):
		span.SetAttributes(attrVerdict.String("bad_signature"))
		span.SetStatus(codes.Error, "bad signature")
	case err != nil:
		span.SetAttributes(attrVerdict.String("no_event_id"))
		span.SetStatus(codes.Error, "no event id")
	default:
		span.SetAttributes(attrVerdict.String("valid"), attrEventID.String(id))
	}
	return id, err
}

// startRecordSpan starts the span of a receipt as a child of the
// transaction's span, with that span's provider; nil when it does not
// record.
func startRecordSpan(ctx context.Context, r *ReceiveRequest) trace.Span {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return nil
	}
	_, span := parent.TracerProvider().Tracer(TracerName).Start(ctx, "inbox.record",
		trace.WithAttributes(attrProvider.String(r.Provider), attrEventID.String(r.EventID)))
	return span
}

// endRecordSpan ends the span of a receipt.
func endRecordSpan(span trace.Span, rec *Receipt, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	} else {
		span.SetAttributes(attrDuplicate.Bool(rec.Duplicate))
	}
	span.End()
}
