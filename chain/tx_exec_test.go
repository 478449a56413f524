package chain_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/chain/chaintest"
)

// Tx.Exec runs a statement in the transaction on PostgreSQL, where a failed
// statement fails the transaction and its appends with it, and is refused
// by the embedded default.
func TestTxExec(t *testing.T) {
	chaintest.ForEachBackend(t, func() chain.Options { return chain.Options{} }, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		var n int64
		err := db.Update(ctx, func(tx *chain.Tx) error {
			if _, err := tx.Append(chain.Request{Chain: "acme/x", Type: "t/v1", Payload: []byte("a")}); err != nil {
				return err
			}
			var err error
			n, err = tx.Exec(`SELECT 1 UNION ALL SELECT 2`)
			return err
		})
		if strings.HasSuffix(t.Name(), "/bolt") {
			if !errors.Is(err, chain.ErrExecUnsupported) {
				t.Fatalf("Exec on the embedded default: %v, want ErrExecUnsupported", err)
			}
			if _, err := db.Head(ctx, "acme/x"); !errors.Is(err, chain.ErrNotFound) {
				t.Fatalf("the refused transaction wrote: %v", err)
			}
			return
		}
		if err != nil || n != 2 {
			t.Fatalf("Exec: %d rows, %v; want 2", n, err)
		}
		err = db.Update(ctx, func(tx *chain.Tx) error {
			if _, err := tx.Append(chain.Request{Chain: "acme/x", Type: "t/v1", Payload: []byte("b")}); err != nil {
				return err
			}
			_, err := tx.Exec(`SELECT * FROM no_such_table`)
			return err
		})
		if err == nil {
			t.Fatal("a failed statement committed")
		}
		if h, err := db.Head(ctx, "acme/x"); err != nil || h.Seq != 1 {
			t.Fatalf("head %+v, %v: the failed statement's transaction must write nothing", h, err)
		}
	})
}
