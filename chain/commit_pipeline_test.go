package chain_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
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
	// waited lists the commits (numbered from 1) whose waits were called,
	// in call order.
	waitedMu sync.Mutex
	waited   []int32
}

func (b *gatedBackend) waitedCommits() []int32 {
	b.waitedMu.Lock()
	defer b.waitedMu.Unlock()
	return slices.Clone(b.waited)
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
	n := t.b.commits.Add(1)
	return func() error {
		t.b.waitedMu.Lock()
		t.b.waited = append(t.b.waited, n)
		t.b.waitedMu.Unlock()
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
// next group commits while the previous one is not durable; once the
// acknowledger waits, the committer holds one more committed group and no
// third (a running group joins a wait only before it begins, see
// TestAcknowledgerMergesRunningGroup); no caller is answered before its
// wait returns, and readers see nothing until then.
func TestPipelinedGroupCommit(t *testing.T) {
	db, gated := openGated(t)
	defer db.Close()
	release := sync.OnceFunc(func() { close(gated.gate) })
	defer release() // before Close, which waits for the groups in flight
	first := appendAsync(db, "k1")
	waitFor(t, "the first group's commit", func() bool { return gated.commits.Load() == 1 })
	waitFor(t, "the first group's wait", func() bool { return len(gated.waitedCommits()) == 1 })
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

// updateHeld queues an Update whose function appends key and then blocks
// until hold is closed, so that the committer is running its group.
func updateHeld(db *chain.DB, key string, started chan<- struct{}, hold <-chan struct{}) chan error {
	done := make(chan error, 1)
	go func() {
		done <- db.Update(context.Background(), func(tx *chain.Tx) error {
			if _, err := tx.Append(chain.Request{Chain: "c", IdempotencyKey: key, Type: "t", Payload: []byte(key)}); err != nil {
				return err
			}
			select {
			case started <- struct{}{}:
			default:
			}
			<-hold
			return nil
		})
	}()
	return done
}

// TestAcknowledgerMergesRunningGroup: a group the committer runs when the
// acknowledger is about to wait for the previous one is made durable by
// the same wait (the later group's, which covers both), and both groups'
// callers are answered only then, each with its own result.
func TestAcknowledgerMergesRunningGroup(t *testing.T) {
	db, gated := openGated(t)
	defer db.Close()
	release := sync.OnceFunc(func() { close(gated.gate) })
	defer release()
	started1, hold1 := make(chan struct{}, 1), make(chan struct{})
	started2, hold2 := make(chan struct{}, 1), make(chan struct{})
	unhold1, unhold2 := sync.OnceFunc(func() { close(hold1) }), sync.OnceFunc(func() { close(hold2) })
	defer unhold1() // before Close, which waits for the committer
	defer unhold2()
	first := updateHeld(db, "k1", started1, hold1)
	<-started1 // the committer runs the first group
	second := updateHeld(db, "k2", started2, hold2)
	time.Sleep(20 * time.Millisecond) // let it queue behind the first group
	unhold1()                         // the first group commits; the committer takes the second at once
	<-started2
	waitFor(t, "the first group's commit", func() bool { return gated.commits.Load() == 1 })
	time.Sleep(20 * time.Millisecond)
	if w := gated.waitedCommits(); len(w) != 0 {
		t.Fatalf("waits %v called while the committer runs the next group, want the acknowledger to wait for it", w)
	}
	unhold2()
	waitFor(t, "the second group's commit", func() bool { return gated.commits.Load() == 2 })
	waitFor(t, "a wait", func() bool { return len(gated.waitedCommits()) > 0 })
	if w := gated.waitedCommits(); w[0] != 2 {
		t.Fatalf("waits called in the order %v, want the second group's first (one sync for both)", w)
	}
	for i, done := range []chan error{first, second} {
		select {
		case err := <-done:
			t.Fatalf("update %d answered (%v) before the wait returned", i+1, err)
		default:
		}
	}
	release()
	for i, done := range []chan error{first, second} {
		if err := <-done; err != nil {
			t.Fatalf("update %d: %v", i+1, err)
		}
	}
	if h, err := db.Head(context.Background(), "c"); err != nil || h.Seq != 2 {
		t.Fatalf("head: %+v, %v; want seq 2", h, err)
	}
}

// TestAcknowledgerMergedGroupsFailTogether: when the wait of merged groups
// fails, every merged group's callers get the store's error.
func TestAcknowledgerMergedGroupsFailTogether(t *testing.T) {
	db, gated := openGated(t)
	defer db.Close()
	injected := fmt.Errorf("injected: %w", storage.ErrIO)
	gated.fail.Store(&injected)
	started1, hold1 := make(chan struct{}, 1), make(chan struct{})
	first := updateHeld(db, "k1", started1, hold1)
	<-started1
	started2, hold2 := make(chan struct{}, 1), make(chan struct{})
	second := updateHeld(db, "k2", started2, hold2)
	time.Sleep(20 * time.Millisecond)
	close(hold1)
	<-started2
	close(hold2)
	close(gated.gate)
	for i, done := range []chan error{first, second} {
		if err := <-done; !errors.Is(err, storage.ErrIO) {
			t.Fatalf("update %d whose wait failed: %v, want storage.ErrIO", i+1, err)
		}
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
