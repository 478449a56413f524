package storagetest

import (
	"testing"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

func init() {
	factories = append(factories, Factory{Name: "postgres", Open: OpenPostgres})
	availability["postgres"] = pgtest.Available
}

// OpenPostgres opens a PostgreSQL backend on a fresh schema of the database
// named by LEDGER_TEST_POSTGRES_URL; at cleanup it closes the backend and
// drops the schema. Without the variable it skips the test (fails it under
// CI=true).
func OpenPostgres(t testing.TB) storage.Backend {
	t.Helper()
	return pgtest.Open(t)
}
