package outboxprom_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/outbox"
	"github.com/ledgerworks/ledger/outbox/outboxprom"
)

// A worker's outcomes show up in the series.
func TestWorkerMetrics(t *testing.T) {
	ctx := context.Background()
	db, err := chain.Open(filepath.Join(t.TempDir(), "ledger.db"), chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reg := prometheus.NewRegistry()
	m := outboxprom.New(reg)
	for _, key := range []string{"ok-1", "ok-2", "bad"} {
		if _, err := outbox.Enqueue(ctx, db, outbox.EnqueueRequest{Tenant: "acme", Topic: "email", IdempotencyKey: key}); err != nil {
			t.Fatal(err)
		}
	}
	handler := func(ctx context.Context, d *outbox.Delivery) error {
		if d.Message.IdempotencyKey == "bad" {
			return outbox.Permanent(nil)
		}
		return nil
	}
	w, err := outbox.NewWorker(db, outbox.WorkerOptions{Tenant: "acme", Topics: map[string]outbox.Topic{"email": {Handler: handler}},
		Metrics: m.Tenant("acme"), BacklogInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for testutil.ToFloat64(m.AttemptsCounter("acme", "email", outbox.Delivered))+testutil.ToFloat64(m.AttemptsCounter("acme", "email", outbox.Rejected)) < 3 {
		if time.Now().After(deadline) {
			t.Fatal("attempts not counted")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // a backlog sample
	w.Stop(ctx)
	want := `
# HELP outbox_dead_total Messages dead-lettered, by reason.
# TYPE outbox_dead_total counter
outbox_dead_total{reason="rejected",tenant="acme",topic="email"} 1
# HELP outbox_due Messages due and not yet claimed.
# TYPE outbox_due gauge
outbox_due{tenant="acme",topic="email"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "outbox_dead_total", "outbox_due"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(reg, "outbox_pickup_seconds"); n != 1 {
		t.Fatalf("pickup histogram series: %d", n)
	}
}
