package chain_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/ledgerworks/ledger/chain"
)

// TestStateDeleteRange deletes a range larger than one page of keys, keeps
// the keys on both sides of it, counts what it deleted, and refuses in a
// read transaction.
func TestStateDeleteRange(t *testing.T) {
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		const inside = 2500 // more than two pages of keys
		err := db.Update(ctx, func(tx *chain.Tx) error {
			for i := range inside {
				if err := tx.StatePut([]byte(fmt.Sprintf("r/%05d", i)), []byte("v")); err != nil {
					return err
				}
			}
			for _, k := range []string{"q/z", "r", "r0", "s/a"} {
				if err := tx.StatePut([]byte(k), []byte("keep")); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var deleted int64
		err = db.Update(ctx, func(tx *chain.Tx) error {
			var err error
			deleted, err = tx.StateDeleteRange([]byte("r/"), []byte("r0"))
			return err
		})
		if err != nil || deleted != inside {
			t.Fatalf("StateDeleteRange deleted %d (%v), want %d", deleted, err, inside)
		}
		err = db.View(ctx, func(tx *chain.Tx) error {
			var left []string
			for kv, err := range tx.StateScan(nil, nil, false) {
				if err != nil {
					return err
				}
				left = append(left, string(kv.Key))
			}
			if fmt.Sprint(left) != "[q/z r r0 s/a]" {
				return fmt.Errorf("left %v, want [q/z r r0 s/a]", left)
			}
			if _, err := tx.StateDeleteRange(nil, nil); !errors.Is(err, chain.ErrReadOnly) {
				return fmt.Errorf("StateDeleteRange in a read transaction: %v, want ErrReadOnly", err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}
