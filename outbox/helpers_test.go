package outbox_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/chain/chaintest"
	"github.com/ledgerworks/ledger/outbox"
)

// testClock is a clock a test moves forward by hand.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock {
	return &testClock{now: time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)}
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// fataler is what testing.TB and *rapid.T share.
type fataler interface {
	Helper()
	Fatal(args ...any)
}

func openBolt(t fataler, path string, clock func() time.Time) *chain.DB {
	t.Helper()
	db, err := chain.Open(path, chain.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func tempLedger(t testing.TB) string { return filepath.Join(t.TempDir(), "ledger.db") }

func forEachBackend(t *testing.T, clock func() time.Time, fn func(t *testing.T, db *chain.DB)) {
	chaintest.ForEachBackend(t, func() chain.Options { return chain.Options{Clock: clock} }, fn)
}

// mustCheck fails the test when the stored outbox state differs from the
// state the chains give, or a chain does not verify.
func mustCheck(t testing.TB, db *chain.DB) {
	t.Helper()
	ctx := context.Background()
	failures, err := outbox.Check(ctx, db)
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	for _, f := range failures {
		t.Errorf("check: %v", f)
	}
	report, err := db.Verify(ctx, chain.VerifyOptions{})
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if !report.OK() {
		t.Fatalf("verify: %v", report.Failures)
	}
}

func enqueue(t testing.TB, db *chain.DB, r outbox.EnqueueRequest) outbox.EnqueueResult {
	t.Helper()
	res, err := outbox.Enqueue(context.Background(), db, r)
	if err != nil {
		t.Fatalf("enqueue %+v: %v", r, err)
	}
	return res
}

func claim(t testing.TB, db *chain.DB, tenant, topic string, o outbox.ClaimOptions) outbox.Claim {
	t.Helper()
	var c outbox.Claim
	err := db.Update(context.Background(), func(tx *chain.Tx) error {
		var err error
		c, err = outbox.ClaimTx(tx, tenant, topic, o)
		return err
	})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return c
}

func record(t testing.TB, db *chain.DB, tenant, topic string, o outbox.RecordOptions, outcomes ...outbox.Outcome) []error {
	t.Helper()
	var rec outbox.Recorded
	err := db.Update(context.Background(), func(tx *chain.Tx) error {
		var err error
		rec, err = outbox.RecordTx(tx, tenant, topic, o, outcomes)
		return err
	})
	if err != nil {
		t.Fatalf("record: %v", err)
	}
	return rec.Errs
}

func outcomeOf(l outbox.Lease, err error) outbox.Outcome {
	return outbox.Outcome{ID: l.Message.ID, Token: l.Token, Attempt: l.Attempt, Err: err}
}

func envOr(name, value string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return value
}
