package chain_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// gatedBackend hands out writable transactions whose asynchronous commits
// are real, but whose waits first wait for the gate and then fail with
// fail, when set.
type gatedBackend struct {
	storage.Backend
	gate    chan struct{}
	fail    atomic.Pointer[error]
	commits atomic.Int32
}

type gatedTx struct {
	storage.Tx
	b *gatedBackend
}

func (b *gatedBackend) Begin(ctx context.Context, writable bool) (storage.Tx, error) {
	stx, err := b.Backend.Begin(ctx, writable)
	if err != nil || !writable {
		return stx, err
	}
	return &gatedTx{Tx: stx, b: b}, nil
}

func (t *gatedTx) CommitAsync() (func() error, error) {
	wait, err := t.Tx.(storage.AsyncCommitter).CommitAsync()
	if err != nil {
		return nil, err
	}
	t.b.commits.Add(1)
	return func() error {
		<-t.b.gate
		if err := t.b.fail.Load(); err != nil {
			return *err
		}
		return wait()
	}, nil
}

func openGated(t *testing.T) (*chain.DB, *gatedBackend) {
	t.Helper()
	inner, err := bolt.Open(filepath.Join(t.TempDir(), "ledger.db"), bolt.Options{Log: bolt.LogOn})
	if err != nil {
		t.Fatal(err)
	}
	gated := &gatedBackend{Backend: inner, gate: make(chan struct{})}
	db, err := chain.OpenBackend(gated, chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return db, gated
}

func appendAsync(db *chain.DB, key string) chan error {
	done := make(chan error, 1)
	go func() {
		_, err := db.Append(context.Background(), chain.Request{Chain: "c", IdempotencyKey: key, Type: "t", Payload: []byte(key)})
		done <- err
	}()
	return done
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10s for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPipelinedGroupCommit holds the waits of asynchronous commits: the
// next group commits while the previous one is not durable, no more than
// two groups are in flight, no caller is answered before its wait returns,
// and readers see nothing until then.
func TestPipelinedGroupCommit(t *testing.T) {
	db, gated := openGated(t)
	defer db.Close()
	release := sync.OnceFunc(func() { close(gated.gate) })
	defer release() // before Close, which waits for the groups in flight
	first := appendAsync(db, "k1")
	waitFor(t, "the first group's commit", func() bool { return gated.commits.Load() == 1 })
	second := appendAsync(db, "k2")
	waitFor(t, "the second group's commit while the first is not durable", func() bool { return gated.commits.Load() == 2 })
	third := appendAsync(db, "k3")
	time.Sleep(50 * time.Millisecond)
	if n := gated.commits.Load(); n != 2 {
		t.Fatalf("%d groups committed while the first is not durable, want at most 2 in flight", n)
	}
	for i, done := range []chan error{first, second, third} {
		select {
		case err := <-done:
			t.Fatalf("append %d answered (%v) before its commit was durable", i+1, err)
		default:
		}
	}
	if _, err := db.Head(context.Background(), "c"); !errors.Is(err, chain.ErrNotFound) {
		t.Fatalf("a reader's head before any commit is durable: %v, want ErrNotFound", err)
	}
	release()
	for i, done := range []chan error{first, second, third} {
		if err := <-done; err != nil {
			t.Fatalf("append %d: %v", i+1, err)
		}
	}
	h, err := db.Head(context.Background(), "c")
	if err != nil || h.Seq != 3 {
		t.Fatalf("head after the waits: %+v, %v; want seq 3", h, err)
	}
}

// TestPipelinedGroupCommitFailedWait answers a group whose commit cannot be
// made durable with the store's error.
func TestPipelinedGroupCommitFailedWait(t *testing.T) {
	db, gated := openGated(t)
	defer db.Close()
	injected := fmt.Errorf("injected: %w", storage.ErrIO)
	gated.fail.Store(&injected)
	close(gated.gate)
	if err := <-appendAsync(db, "k1"); !errors.Is(err, storage.ErrIO) {
		t.Fatalf("append whose wait failed: %v, want storage.ErrIO", err)
	}
}
