// Package chaintest holds test helpers for packages built on the chain
// engine: running a test on a fresh ledger of every storage backend, a
// predictable clock, and a snapshot of everything a ledger holds, so that a
// test can check that a refused request wrote nothing.
package chaintest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
	"github.com/ledgerworks/ledger/storage/storagetest"
)

// SteppingClock returns a clock that starts at start and advances by step
// on every reading, so entry times are distinct and predictable.
func SteppingClock(start time.Time, step time.Duration) func() time.Time {
	var ticks atomic.Int64
	return func() time.Time { return start.Add(time.Duration(ticks.Add(1)) * step) }
}

// ForEachBackend runs fn as a subtest on a fresh ledger of every registered
// backend (storagetest.Factories), opened with the options opts returns;
// the ledger is closed when the subtest ends.
func ForEachBackend(t *testing.T, opts func() chain.Options, fn func(t *testing.T, db *chain.DB)) {
	t.Helper()
	for _, f := range storagetest.Factories(t) {
		t.Run(f.Name, func(t *testing.T) {
			db, err := chain.OpenBackend(f.Open(t), opts())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			fn(t, db)
		})
	}
}

// Snapshot is everything a ledger holds, read back through the public API.
type Snapshot struct {
	Heads   []chain.Head
	Entries map[string][]chain.Entry
	State   map[string]string
}

// TakeSnapshot reads every chain, entry and state pair of db.
func TakeSnapshot(t testing.TB, db *chain.DB) Snapshot {
	t.Helper()
	ctx := context.Background()
	s := Snapshot{Entries: map[string][]chain.Entry{}, State: map[string]string{}}
	for h, err := range db.Chains(ctx, "") {
		if err != nil {
			t.Fatalf("chains: %v", err)
		}
		s.Heads = append(s.Heads, h)
		for e, err := range db.Entries(ctx, h.Chain, 1) {
			if err != nil {
				t.Fatalf("entries of %q: %v", h.Chain, err)
			}
			s.Entries[h.Chain] = append(s.Entries[h.Chain], e)
		}
	}
	err := db.View(ctx, func(tx *chain.Tx) error {
		for kv, err := range tx.StateScan(nil, nil, false) {
			if err != nil {
				return err
			}
			s.State[string(kv.Key)] = string(kv.Value)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("state scan: %v", err)
	}
	return s
}

// OpenShared opens two ledgers on one fresh PostgreSQL schema, each with its
// own backend and connection pool, as two processes of one service would.
// It skips without LEDGER_TEST_POSTGRES_URL (fails under CI=true). The
// ledgers are closed when the test ends.
func OpenShared(t *testing.T) (*chain.DB, *chain.DB) {
	t.Helper()
	var dbs [2]*chain.DB
	for i, backend := range pgtest.OpenShared(t, len(dbs)) {
		db, err := chain.OpenBackend(backend, chain.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		dbs[i] = db
	}
	return dbs[0], dbs[1]
}

// rolledBackAttemptsMax bounds the runs of RetryRolledBack.
const rolledBackAttemptsMax = 10

// RetryRolledBack runs op, and runs it again while its error wraps
// storage.ErrRetry (the store rolled the whole transaction back: a
// PostgreSQL deadlock or serialization failure that outlasted the group
// committer's own reruns), up to rolledBackAttemptsMax times, waiting 1, 2,
// 4 … ms (at most 32) between runs. This is what a client does with an
// operation that carries an idempotency key (running it again appends it
// once or replays it) or that is idempotent itself, as a rebuild of
// derived state is.
func RetryRolledBack(op func() error) error {
	for attempt := 0; ; attempt++ {
		err := op()
		if !errors.Is(err, storage.ErrRetry) || attempt+1 == rolledBackAttemptsMax {
			return err
		}
		time.Sleep(time.Millisecond << min(attempt, 5))
	}
}
