package chain_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
)

func TestNotifyFiresAfterCommitOnly(t *testing.T) {
	ctx := context.Background()
	db, err := chain.Open(filepath.Join(t.TempDir(), "ledger.db"), chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sub, err := db.Subscribe(ctx, "orders_1")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	other, err := db.Subscribe(ctx, "orders_2")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	refused := errors.New("refused")
	err = db.Update(ctx, func(tx *chain.Tx) error {
		if _, err := tx.Append(chain.Request{Chain: "c", Type: "t", Payload: []byte("x")}); err != nil {
			return err
		}
		if err := tx.Notify("orders_1"); err != nil {
			return err
		}
		return refused
	})
	if !errors.Is(err, refused) {
		t.Fatal(err)
	}
	select {
	case <-sub.C:
		t.Fatal("a rolled-back transaction notified")
	case <-time.After(20 * time.Millisecond):
	}
	if err := db.Update(ctx, func(tx *chain.Tx) error { return tx.Notify("orders_1") }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sub.C:
	case <-time.After(5 * time.Second):
		t.Fatal("no notification after the commit")
	}
	select {
	case <-other.C:
		t.Fatal("another channel was notified")
	default:
	}
	for _, bad := range []string{"", "Upper", "with-dash", string(make([]byte, 64))} {
		if err := db.Update(ctx, func(tx *chain.Tx) error { return tx.Notify(bad) }); !errors.Is(err, chain.ErrInvalid) {
			t.Errorf("Notify(%q): %v, want ErrInvalid", bad, err)
		}
	}
	if err := db.View(ctx, func(tx *chain.Tx) error { return tx.Notify("orders_1") }); !errors.Is(err, chain.ErrReadOnly) {
		t.Errorf("Notify in View: %v", err)
	}
}
