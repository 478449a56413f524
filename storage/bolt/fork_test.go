package bolt_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt"
	"github.com/ledgerworks/ledger/storage/storagetest"
)

func TestForkConformance(t *testing.T) {
	storagetest.RunFork(t, storagetest.OpenBolt)
}

// A commit that grows the file waits for every read transaction before it
// remaps, and a begin waits behind it: a fork asked for then, and the end
// of a fork, must not wait while the caller holds the receiver, or the
// caller, the commit and the begin wait for each other forever.
func TestForkWhileACommitRemaps(t *testing.T) {
	ctx := context.Background()
	b, err := bolt.Open(filepath.Join(t.TempDir(), "ledger.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	put := func(tx storage.Tx, i int, value []byte) error {
		return tx.StatePut(ctx, fmt.Appendf(nil, "k%06d", i), value)
	}
	wtx, err := b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := put(wtx, 0, []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := wtx.Commit(); err != nil {
		t.Fatal(err)
	}

	finished := make(chan error, 1)
	go func() { finished <- forkAroundARemap(ctx, b, put) }()
	select {
	case err := <-finished:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the reader, the fork and the growing commit wait for each other")
	}
}

func forkAroundARemap(ctx context.Context, b *bolt.Backend, put func(storage.Tx, int, []byte) error) error {
	receiver, err := b.Begin(ctx, false)
	if err != nil {
		return err
	}
	first, err := receiver.(storage.Forker).Fork(ctx)
	if err != nil {
		return fmt.Errorf("first fork: %w", err)
	}
	committed := make(chan error, 1)
	go func() { // 32 MiB: far past the map of a small file
		wtx, err := b.Begin(ctx, true)
		if err != nil {
			committed <- err
			return
		}
		value := make([]byte, 256<<10)
		for i := 1; i <= 128 && err == nil; i++ {
			err = put(wtx, i, value)
		}
		if err != nil {
			wtx.Rollback()
			committed <- err
			return
		}
		committed <- wtx.Commit()
	}()
	time.Sleep(300 * time.Millisecond) // the commit now waits for the readers
	other := make(chan error, 1)
	go func() { // another reader's begin, which waits behind the commit
		tx, err := b.Begin(ctx, false)
		if err == nil {
			err = tx.Rollback()
		}
		other <- err
	}()
	time.Sleep(50 * time.Millisecond)
	second, err := receiver.(storage.Forker).Fork(ctx)
	switch {
	case err == nil:
		second.Rollback()
	case !errors.Is(err, storage.ErrRetry):
		return fmt.Errorf("second fork: %v, want ErrRetry or a fork", err)
	}
	if err := first.Rollback(); err != nil {
		return err
	}
	if err := receiver.Rollback(); err != nil {
		return err
	}
	if err := <-committed; err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return <-other
}
