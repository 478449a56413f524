// Package pgtrace makes pgx's statements spans: a pgx.QueryTracer and
// pgx.BatchTracer that start a span per statement or batch under the span
// of the call's context. A call whose context holds no recording span
// makes none, so the pools' background work and unsampled requests cost a
// context lookup per statement.
package pgtrace

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of the statements' spans.
const TracerName = "github.com/ledgerworks/ledger/postgres"

// queryTextLengthMax bounds the statement text a span carries; the
// statements are the code's own, parameterised: no value is recorded.
const queryTextLengthMax = 2048

// The attributes, after the database semantic conventions.
var (
	attrSystem    = attribute.Key("db.system.name").String("postgresql")
	attrOperation = attribute.Key("db.operation.name")
	attrQueryText = attribute.Key("db.query.text")
	attrBatchSize = attribute.Key("db.operation.batch.size")
	attrRows      = attribute.Key("db.rows_affected") // the command tag's count
)

// Tracer is the pgx tracer of one provider.
type Tracer struct{ tracer trace.Tracer }

var (
	_ pgx.QueryTracer = (*Tracer)(nil)
	_ pgx.BatchTracer = (*Tracer)(nil)
)

// New returns the tracer of tp, or nil without one: set it as
// pgx.ConnConfig.Tracer only when it is not nil.
func New(tp trace.TracerProvider) *Tracer {
	if tp == nil {
		return nil
	}
	return &Tracer{tracer: tp.Tracer(TracerName)}
}

// operation is a statement's first keyword ("SELECT", "INSERT").
func operation(sql string) string {
	sql = strings.TrimSpace(sql)
	if i := strings.IndexFunc(sql, func(r rune) bool { return r == ' ' || r == '\n' || r == '\t' || r == '(' }); i > 0 {
		sql = sql[:i]
	}
	return strings.ToUpper(sql)
}

func queryText(sql string) string {
	if len(sql) > queryTextLengthMax {
		return sql[:queryTextLengthMax]
	}
	return sql
}

// TraceQueryStart starts a statement's span.
func (t *Tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx
	}
	op := operation(data.SQL)
	ctx, _ = t.tracer.Start(ctx, "postgres "+op, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attrSystem, attrOperation.String(op), attrQueryText.String(queryText(data.SQL))))
	return ctx
}

// TraceQueryEnd ends it.
func (t *Tracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	end(ctx, data.CommandTag.RowsAffected(), data.Err)
}

// TraceBatchStart starts a batch's span.
func (t *Tracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx
	}
	n := 0
	if data.Batch != nil {
		n = data.Batch.Len()
	}
	ctx, _ = t.tracer.Start(ctx, "postgres BATCH", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attrSystem, attrOperation.String("BATCH"), attrBatchSize.Int(n)))
	return ctx
}

// TraceBatchQuery records a failed statement of the batch on its span.
func (t *Tracer) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	if data.Err == nil {
		return
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.RecordError(data.Err, trace.WithAttributes(attrQueryText.String(queryText(data.SQL))))
	}
}

// TraceBatchEnd ends the batch's span.
func (t *Tracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchEndData) {
	end(ctx, -1, data.Err)
}

// end ends the span a start made. A start makes one exactly when the
// caller's span records, so a recording span here is the start's own.
func end(ctx context.Context, rows int64, err error) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	if rows >= 0 {
		span.SetAttributes(attrRows.Int64(rows))
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
