package chaintest

import (
	"context"
	"path/filepath"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/ledgerworks/ledger/chain"
)

// OpenTraced opens a fresh file ledger whose spans go to a tracer provider
// that records them all in the returned recorder. The ledger is closed,
// then the provider shut down, when the test ends.
func OpenTraced(t testing.TB) (*chain.DB, *sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	t.Helper()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	db, err := chain.Open(filepath.Join(t.TempDir(), "ledger.db"), chain.Options{TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, tp, sr
}
