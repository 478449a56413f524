package bolt

import (
	"context"
	"errors"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage"
)

// A fork is a second bbolt read transaction begun while the receiver is
// open. bbolt gives every read transaction the newest committed meta page,
// so the fork sees the receiver's snapshot exactly when both carry the same
// transaction id: no commit landed in between. A later attempt could only
// see a newer meta page, so a mismatch is not retried.
//
// Two read transactions held by one caller can deadlock inside bbolt: a
// commit that grows the file waits for every read transaction to end before
// it remaps, a begin waits behind that commit (holding bbolt's meta lock),
// and the end of a read transaction waits for the meta lock. So a fork is
// begun on its own goroutine and given up after forkBeginWaitMax (the late
// transaction is rolled back when it arrives), and a fork is rolled back on
// its own goroutine: neither ever waits while the caller holds the
// receiver, which the commit waits for.
const forkBeginWaitMax = 100 * time.Millisecond

var _ storage.Forker = (*guardedTx)(nil)

// Fork begins a read transaction on the receiver's snapshot (see
// storage.Forker).
func (g *guardedTx) Fork(ctx context.Context) (storage.Tx, error) {
	if g.broken != nil {
		return nil, g.broken
	}
	if err := g.t.usable(false); err != nil {
		return nil, err
	}
	if g.t.tx.Writable() {
		return nil, fmt.Errorf("fork %s: a write transaction's own writes: %w", g.t.path, errors.ErrUnsupported)
	}
	btx, err := beginForkWithin(ctx, g.t.tx.DB(), forkBeginWaitMax)
	if err != nil {
		return nil, fmt.Errorf("fork %s: %w", g.t.path, err)
	}
	if forkID, id := btx.ID(), g.t.tx.ID(); forkID != id {
		go btx.Rollback()
		return nil, fmt.Errorf("fork %s: transaction %d committed since the receiver's %d: %w",
			g.t.path, forkID, id, storage.ErrRetry)
	}
	return &forkedTx{guardedTx: &guardedTx{t: &tx{tx: btx, path: g.t.path, cache: g.t.cache}}}, nil
}

// beginForkWithin begins a read transaction on its own goroutine and waits
// for it at most wait; a transaction that arrives later is rolled back.
func beginForkWithin(ctx context.Context, db *bbolt.DB, wait time.Duration) (*bbolt.Tx, error) {
	type begun struct {
		btx *bbolt.Tx
		err error
	}
	arrived := make(chan begun)
	abandoned := make(chan struct{})
	go func() {
		btx, err := db.Begin(false)
		select {
		case arrived <- begun{btx, err}:
		case <-abandoned:
			if err == nil {
				btx.Rollback()
			}
		}
	}()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case b := <-arrived:
		if b.err != nil {
			return nil, fmt.Errorf("%w: %v", storage.ErrRetry, b.err)
		}
		return b.btx, nil
	case <-timer.C:
		close(abandoned)
		return nil, fmt.Errorf("begin waited %v for a commit that remaps the file: %w", wait, storage.ErrRetry)
	case <-ctx.Done():
		close(abandoned)
		return nil, ctx.Err()
	}
}

// forkedTx is a fork: a guardedTx whose bbolt transaction ends on its own
// goroutine (see forkBeginWaitMax).
type forkedTx struct {
	*guardedTx
}

// Rollback ends the fork at once for its caller (its reads are no longer
// valid, later calls return storage.ErrTxDone); bbolt's transaction ends on
// its own goroutine right after.
func (f *forkedTx) Rollback() error {
	if f.t.done {
		return nil
	}
	f.t.done = true
	go f.t.tx.Rollback()
	return nil
}

// Commit is Rollback: a fork is read-only.
func (f *forkedTx) Commit() error {
	if f.t.done {
		return storage.ErrTxDone
	}
	return f.Rollback()
}
