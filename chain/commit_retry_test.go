package chain

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/storagetest"
)

// retryingBackend makes the first commits fail as a store that rolled the
// transaction back (a serialization failure) does.
type retryingBackend struct {
	storage.Backend
	failures int
}

type retryingTx struct {
	storage.Tx
	backend *retryingBackend
}

func (b *retryingBackend) Begin(ctx context.Context, writable bool) (storage.Tx, error) {
	stx, err := b.Backend.Begin(ctx, writable)
	if err != nil || !writable {
		return stx, err
	}
	return &retryingTx{Tx: stx, backend: b}, nil
}

func (t *retryingTx) Commit() error {
	if t.backend.failures > 0 {
		t.backend.failures--
		t.Tx.Rollback()
		return fmt.Errorf("serialization failure: %w", storage.ErrRetry)
	}
	return t.Tx.Commit()
}

// TestGroupRunsAgainAfterRetryableRollback: a group whose transaction the
// store rolled back runs again from Begin, a bounded number of times; then
// the callers get the error and nothing is written.
func TestGroupRunsAgainAfterRetryableRollback(t *testing.T) {
	ctx := context.Background()
	for _, failures := range []int{commitRetriesMax, commitRetriesMax + 1} {
		backend := &retryingBackend{Backend: storagetest.OpenBolt(t), failures: failures}
		db, err := OpenBackend(backend, Options{})
		if err != nil {
			t.Fatal(err)
		}
		runs := 0
		err = db.Update(ctx, func(tx *Tx) error {
			runs++
			_, err := tx.Append(Request{Chain: "c", IdempotencyKey: "k", Type: "t/v1", Payload: []byte("p")})
			return err
		})
		_, headErr := db.Head(ctx, "c")
		switch {
		case failures <= commitRetriesMax:
			if err != nil || headErr != nil || runs != failures+1 {
				t.Errorf("%d failures: Update %v, head %v, %d runs; want success after %d runs", failures, err, headErr, runs, failures+1)
			}
		default:
			if !errors.Is(err, storage.ErrRetry) || !errors.Is(headErr, ErrNotFound) || runs != commitRetriesMax+1 {
				t.Errorf("%d failures: Update %v, head %v, %d runs; want ErrRetry, nothing written, %d runs", failures, err, headErr, runs, commitRetriesMax+1)
			}
		}
		db.Close()
	}
}
