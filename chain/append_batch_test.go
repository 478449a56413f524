package chain_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ledgerworks/ledger/chain"
)

// TestAppendBatchStopsAtAnInvalidRequest appends a batch whose third
// request is invalid: the results of the two before it come back after the
// ones the caller passed, with the invalid request's error, and the
// function that returns that error leaves nothing written.
func TestAppendBatchStopsAtAnInvalidRequest(t *testing.T) {
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		reqs := []chain.Request{
			{Chain: "c", IdempotencyKey: "k1", Type: "t/v1", Payload: []byte("a")},
			{Chain: "c", IdempotencyKey: "k2", Type: "t/v1", Payload: []byte("b")},
			{Chain: "c", IdempotencyKey: "k3", Type: "", Payload: []byte("c")}, // a type is required
			{Chain: "c", IdempotencyKey: "k4", Type: "t/v1", Payload: []byte("d")},
		}
		passed := []chain.Result{{Replayed: true}}
		var results []chain.Result
		err := db.Update(ctx, func(tx *chain.Tx) error {
			var err error
			results, err = tx.AppendBatch(reqs, passed)
			return err
		})
		if !errors.Is(err, chain.ErrInvalid) {
			t.Fatalf("AppendBatch with an invalid request: %v, want ErrInvalid", err)
		}
		if len(results) != 3 || !results[0].Replayed || results[1].Entry.Seq != 1 || results[2].Entry.Seq != 2 {
			t.Fatalf("results %+v: want the one passed, then seqs 1 and 2", results)
		}
		if _, err := db.Head(ctx, "c"); !errors.Is(err, chain.ErrNotFound) {
			t.Fatalf("head after the failed Update: %v, want ErrNotFound (nothing written)", err)
		}
	})
}

// TestAppendBatchReadOnly refuses a batch in a View.
func TestAppendBatchReadOnly(t *testing.T) {
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		err := db.View(context.Background(), func(tx *chain.Tx) error {
			_, err := tx.AppendBatch([]chain.Request{{Chain: "c", Type: "t/v1"}}, nil)
			return err
		})
		if !errors.Is(err, chain.ErrReadOnly) {
			t.Fatalf("AppendBatch in a View: %v, want ErrReadOnly", err)
		}
	})
}
