package chain

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of the engine's spans.
const TracerName = "github.com/ledgerworks/ledger/chain"

// The attributes of a transaction's span: the group commit it joined.
const (
	// attrGroup numbers the committer's groups: the spans of the callers
	// that shared one commit carry the same number.
	attrGroup = attribute.Key("ledger.group_commit.id")
	// attrGroupSize is how many callers the commit carried.
	attrGroupSize = attribute.Key("ledger.group_commit.size")
	// attrWait is the time from queueing to the committer taking the
	// request, in nanoseconds.
	attrWait = attribute.Key("ledger.group_commit.wait_ns")
	// attrCommit is the time from the commit's start to the answer (the
	// fsync included), in nanoseconds.
	attrCommit = attribute.Key("ledger.group_commit.commit_ns")
)

// requestTrace is what the committer notes for a traced request (see
// submitTraced); an untraced request has none, and costs the committer
// one test of a nil pointer.
type requestTrace struct {
	queuedAt    time.Time
	claimedAt   time.Time
	commitStart time.Time
	answeredAt  time.Time
	group       uint64
	groupSize   int
}

// submitTraced is submit within a span of its own, a child of the caller's
// span, which the transaction's context (Tx.Context) carries; the group
// commit the request joined is recorded on it. A caller without a
// recording span (background work, an unsampled request) is submitted as
// if there were no tracing: the ledger's spans are never roots.
func (db *DB) submitTraced(r *request, name string) error {
	if !trace.SpanFromContext(r.ctx).IsRecording() {
		return db.submitQueued(r)
	}
	ctx, span := db.tracer.Start(r.ctx, name)
	if !span.IsRecording() {
		span.End()
		return db.submitQueued(r)
	}
	r.ctx = ctx
	t := &requestTrace{queuedAt: time.Now()}
	r.trace = t
	defer span.End() // also when the function's panic is raised again
	err := db.submitQueued(r)
	if !t.claimedAt.IsZero() {
		span.SetAttributes(attrWait.Int64(t.claimedAt.Sub(t.queuedAt).Nanoseconds()))
	}
	if t.groupSize > 0 {
		span.SetAttributes(attrGroup.Int64(int64(t.group)), attrGroupSize.Int(t.groupSize),
			attrCommit.Int64(t.answeredAt.Sub(t.commitStart).Nanoseconds()))
	}
	failure := err
	if failure == nil {
		failure = r.err
	}
	if failure != nil {
		span.RecordError(failure)
		span.SetStatus(codes.Error, failure.Error())
	}
	return err
}

// spanName is the name of a request's span.
func (r *request) spanName() string {
	if r.fn == nil {
		return "chain.append"
	}
	return "chain.transaction"
}

// tracerOf is the tracer of a provider, nil without one.
func tracerOf(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(TracerName)
}
