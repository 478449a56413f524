package chain_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

var errNoRow = errors.New("no row to mark")

// TestExecAtCommit runs concurrent Updates that each append an entry and
// hold an UPDATE of their own row for the commit, so that they share group
// commits: the requests whose row is missing fail with their none error
// and write nothing; every other request commits
// its entry and its row. On the embedded default the call is refused.
func TestExecAtCommit(t *testing.T) {
	ctx := context.Background()
	bolt, err := chain.Open(t.TempDir()+"/ledger.db", chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer bolt.Close()
	err = bolt.Update(ctx, func(tx *chain.Tx) error { return tx.ExecAtCommit(nil, "DELETE FROM nothing") })
	if !errors.Is(err, chain.ErrExecUnsupported) {
		t.Fatalf("on bbolt: %v, want ErrExecUnsupported", err)
	}

	backend := pgtest.OpenShared(t, 1)[0]
	db, err := chain.OpenBackend(backend, chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	table := pgx.Identifier{backend.Schema(), "marks"}.Sanitize()
	const requests = 64
	conn, err := pgtest.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE "+table+" (id int PRIMARY KEY, marked bool NOT NULL DEFAULT false)"); err != nil {
		t.Fatal(err)
	}
	// Every third request's row is missing.
	if _, err := conn.Exec(ctx, "INSERT INTO "+table+" (id) SELECT i FROM generate_series(0, $1) i WHERE i % 3 <> 0", requests-1); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, requests)
	for i := range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = db.Update(ctx, func(tx *chain.Tx) error {
				if _, err := tx.Append(chain.Request{Chain: "acme/marks", IdempotencyKey: fmt.Sprint("mark-", i), Type: "mark/v1", Payload: []byte(`{}`)}); err != nil {
					return err
				}
				return tx.ExecAtCommit(errNoRow, "UPDATE "+table+" SET marked = true WHERE id = $1", i)
			})
		}()
	}
	wg.Wait()
	want := 0
	for i, err := range errs {
		if i%3 == 0 {
			if !errors.Is(err, errNoRow) {
				t.Errorf("request %d without a row: %v, want errNoRow", i, err)
			}
			continue
		}
		want++
		if err != nil {
			t.Errorf("request %d: %v", i, err)
		}
	}
	h, err := db.Head(ctx, "acme/marks")
	if err != nil || int(h.Seq) != want {
		t.Fatalf("head %+v, %v: want %d entries", h, err, want)
	}
	for e, err := range db.Entries(ctx, "acme/marks", 1) {
		if err != nil {
			t.Fatal(err)
		}
		var i int
		if _, err := fmt.Sscanf(e.IdempotencyKey, "mark-%d", &i); err != nil || i%3 == 0 {
			t.Errorf("entry %d: key %q of a refused request", e.Seq, e.IdempotencyKey)
		}
	}
	var marked int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE marked").Scan(&marked); err != nil || marked != want {
		t.Fatalf("%d rows marked, %v; want %d", marked, err, want)
	}
}
