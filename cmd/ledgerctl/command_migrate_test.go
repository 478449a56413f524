package main

import (
	"encoding/json"
	"testing"

	"github.com/ledgerworks/ledger/storage/postgres"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

func TestMigrateRefusesFiles(t *testing.T) {
	t.Parallel()
	l := newFileLedger(t)
	l.run("-o", "json", "migrate").expect(t, exitUsage, "PostgreSQL")
}

func TestMigrateAppliesTheSchemaOnce(t *testing.T) {
	t.Parallel()
	if !pgtest.Available(t) {
		t.Skip("needs PostgreSQL")
	}
	l := newPostgresLedger(t)
	// Commands that do not create refuse a database without the schema.
	l.run("-o", "json", "chains").expect(t, exitStorage, `"code":"STORAGE"`)
	var first, second migrateJSON
	if err := json.Unmarshal([]byte(l.must("-o", "json", "migrate")), &first); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(l.must("-o", "json", "migrate")), &second); err != nil {
		t.Fatal(err)
	}
	if len(first.Applied) == 0 || len(second.Applied) != 0 || second.SchemaVersion != postgres.SchemaVersion() {
		t.Fatalf("first %+v second %+v", first, second)
	}
	if got := l.must("-o", "json", "chains"); got != `{"chains":[]}`+"\n" {
		t.Fatalf("chains after migrate: %q", got)
	}
}
