package idempotencyprom_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ledgerworks/ledger/idempotency"
	"github.com/ledgerworks/ledger/idempotency/idempotencyprom"
	"github.com/ledgerworks/ledger/idempotency/idempotencytest"
)

func TestMetricsCountTheGuard(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := idempotencyprom.New(reg)
	clock := idempotencytest.NewClock()
	store := idempotency.NewMemoryStore()
	g, err := idempotency.New(idempotency.Options{Store: store, Metrics: m, Clock: clock.Now, Cache: idempotencytest.DownCache{},
		User: func(*http.Request) (string, error) { return "alice", nil }, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })))
	defer srv.Close()
	for _, body := range []string{"a", "a", "b"} {
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(body))
		req.Header.Set("Idempotency-Key", "k")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	clock.Advance(2 * time.Hour)
	if _, err := g.Jobs().CleanupExpiredRecords(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP idempotency_requests_total Guarded requests by outcome (executed, replayed, conflict, in_progress, store_unavailable, ...).
# TYPE idempotency_requests_total counter
idempotency_requests_total{outcome="conflict"} 1
idempotency_requests_total{outcome="executed"} 1
idempotency_requests_total{outcome="replayed"} 1
# HELP idempotency_duplicates_total Requests that found an existing record, by the record's status.
# TYPE idempotency_duplicates_total counter
idempotency_duplicates_total{status="SUCCESS"} 2
# HELP idempotency_cache_errors_total Failed cache calls (swallowed).
# TYPE idempotency_cache_errors_total counter
idempotency_cache_errors_total 4
# HELP idempotency_cleaned_total Expired records deleted by cleanup.
# TYPE idempotency_cleaned_total counter
idempotency_cleaned_total 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "idempotency_requests_total", "idempotency_duplicates_total",
		"idempotency_cache_errors_total", "idempotency_cleaned_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(reg, "idempotency_store_duration_seconds"); n == 0 {
		t.Fatal("no store latency recorded")
	}
}
