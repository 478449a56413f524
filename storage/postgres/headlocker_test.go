package postgres_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// PrepareKeys of a HeadLocker locks the heads it names, those with an
// empty key included, in one call: another session cannot lock them until
// the transaction ends; LockedHeads names them; a chain without a row gets
// a placeholder that the rollback removes.
func TestLockHeadsTogether(t *testing.T) {
	b := pgtest.Open(t)
	ctx := context.Background()
	appendN(t, b, "b", 0, 2, true)
	appendN(t, b, "d", 0, 1, false)
	tx, err := b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	locker, ok := tx.(storage.HeadLocker)
	if !ok {
		t.Fatal("a writable transaction is not a storage.HeadLocker")
	}
	locker.PrepareKeys(ctx, []storage.ChainKey{{Chain: "d"}, {Chain: "a"}, {Chain: "b", Key: "k1"}})
	locked := locker.LockedHeads(nil)
	slices.Sort(locked)
	if !slices.Equal(locked, []string{"a", "b", "d"}) {
		t.Fatalf("LockedHeads %q, want a, b, d", locked)
	}
	if h, err := tx.Head(ctx, "b"); err != nil || h.Seq != 2 {
		t.Fatalf("head of b: %v, %v", h, err)
	}

	conn, err := pgtest.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	table := pgx.Identifier{b.Schema(), "chains"}.Sanitize()
	// a's placeholder is not committed: another session does not see it
	// (and would wait to insert its own).
	for _, chain := range []string{"b", "d"} {
		_, err := conn.Exec(ctx, "SELECT 1 FROM "+table+" WHERE chain_id = $1 FOR UPDATE NOWAIT", chain)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
			t.Errorf("head %s locked from another session: %v, want lock_not_available", chain, err)
		}
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE chain_id = 'a'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("placeholder of a after the rollback: %d rows, %v", n, err)
	}
	if _, err := conn.Exec(ctx, "SELECT 1 FROM "+table+" WHERE chain_id = ANY('{b,d}') FOR UPDATE NOWAIT"); err != nil {
		t.Fatalf("heads still locked after the rollback: %v", err)
	}
}
