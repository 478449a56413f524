package chain_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage/postgres"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// TestVerifyPostgresKeyColumnChanged: on PostgreSQL the index is the
// entries' key column. A key changed in a row is reported at that entry
// twice (its key is not in the index; the index names the entry for a key
// it does not hold), a key given to an unkeyed row once, and a key
// removed from its row once.
func TestVerifyPostgresKeyColumnChanged(t *testing.T) {
	if !pgtest.Available(t) {
		t.Skip("PostgreSQL is not configured")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := pgtest.URL(t)
	schema := pgtest.NewSchema(t, url)
	backend, err := postgres.Open(ctx, url, postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	db, err := chain.OpenBackend(backend, chain.Options{Clock: testClock()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(ctx, func(tx *chain.Tx) error {
		for i := 1; i <= 1500; i++ { // past one batch of the checker and one page of the scan
			key := fmt.Sprintf("k%d", i)
			if i%4 == 0 {
				key = ""
			}
			if _, err := tx.Append(chain.Request{Chain: "c", IdempotencyKey: key, Type: "t/v1"}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	assertVerifies(t, db)
	conn, err := pgtest.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	entries := pgx.Identifier{schema, "entries"}.Sanitize()
	for _, change := range []struct {
		seq int
		key *string // nil: the key is removed
	}{{2, keyPointer("k2-changed")}, {1200, keyPointer("ghost")}, {1401, nil}} {
		tag, err := conn.Exec(ctx, "UPDATE "+entries+" SET idempotency_key = $1 WHERE chain_id = 'c' AND seq = $2", change.key, change.seq)
		if err != nil || tag.RowsAffected() != 1 {
			t.Fatalf("change the key of seq %d: %v, %d rows", change.seq, err, tag.RowsAffected())
		}
	}
	report, err := db.Verify(ctx, chain.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	assertFailures(t, report.Failures,
		failureKey{"c", 2, chain.ReasonKeyIndexMismatch}, failureKey{"c", 2, chain.ReasonKeyIndexMismatch},
		failureKey{"c", 1200, chain.ReasonKeyIndexMismatch},
		failureKey{"c", 1401, chain.ReasonKeyIndexMismatch})
	if want := `key "k1401" is not in the key index`; report.Failures[3].Detail != want {
		t.Errorf("detail %q, want %q", report.Failures[3].Detail, want)
	}
}

func keyPointer(s string) *string { return &s }
