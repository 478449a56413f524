package idempotency_test

import (
	"path/filepath"
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/idempotency"
	"github.com/ledgerworks/ledger/idempotency/idempotencytest"
)

func TestMemoryStore(t *testing.T) {
	idempotencytest.Run(t, idempotencytest.Harness{
		Open: func(t *testing.T) idempotency.Store { return idempotency.NewMemoryStore() },
	})
}

// openLedger opens a fresh embedded ledger, closed when the test ends.
func openLedger(t testing.TB) *chain.DB {
	t.Helper()
	db, err := chain.Open(filepath.Join(t.TempDir(), "ledger.db"), chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func ledgerStore(t testing.TB, db *chain.DB) *idempotency.LedgerStore {
	t.Helper()
	s, err := idempotency.NewLedgerStore(db)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestLedgerStore(t *testing.T) {
	idempotencytest.Run(t, idempotencytest.Harness{
		Open: func(t *testing.T) idempotency.Store { return ledgerStore(t, openLedger(t)) },
		Unreachable: func(t *testing.T) idempotency.Store {
			db, err := chain.Open(filepath.Join(t.TempDir(), "closed.db"), chain.Options{})
			if err != nil {
				t.Fatal(err)
			}
			s := ledgerStore(t, db)
			db.Close()
			return s
		},
	})
}

func TestMemoryStoreMachine(t *testing.T) {
	idempotencytest.StateMachine(t, idempotencytest.Harness{
		Open: func(t *testing.T) idempotency.Store { return idempotency.NewMemoryStore() },
	})
}

func TestLedgerStoreMachine(t *testing.T) {
	// Each check's ledger is closed when the next check opens its own, not
	// only when the test ends, so that -rapid.checks=20000 does not run out
	// of file descriptors.
	var prev *chain.DB
	idempotencytest.StateMachine(t, idempotencytest.Harness{
		Open: func(t *testing.T) idempotency.Store {
			if prev != nil {
				if err := prev.Close(); err != nil {
					t.Fatal(err)
				}
			}
			prev = openLedger(t)
			return ledgerStore(t, prev)
		},
	})
}

func TestMemoryStoreLeaseMachine(t *testing.T) {
	idempotencytest.LeaseMachine(t, idempotencytest.Harness{
		Open: func(t *testing.T) idempotency.Store { return idempotency.NewMemoryStore() },
	})
}

func TestLedgerStoreLeaseMachine(t *testing.T) {
	idempotencytest.LeaseMachine(t, idempotencytest.Harness{
		Open: func(t *testing.T) idempotency.Store { return ledgerStore(t, openLedger(t)) },
	})
}
