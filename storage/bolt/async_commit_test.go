package bolt_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt"
)

var asyncOptions = bolt.Options{Log: bolt.LogOn, InitialMmapSize: 64 << 20, MemtableBytesMax: 1 << 40, LogSegmentSizeBytes: 64 << 10}

// secondCommitHeld opens a new ledger with opts, commits seq 1 durably,
// then commits seq 2 with the log's sync held until gate is closed; wait2
// waits for seq 2.
func secondCommitHeld(t *testing.T, opts bolt.Options) (b *bolt.Backend, path string, wait2 func() error, gate chan struct{}) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "ledger.db")
	b, err := bolt.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := commitAsync(t, b, 1)(); err != nil {
		t.Fatal(err)
	}
	gate = make(chan struct{})
	bolt.SetSyncHook(b, func() error { <-gate; return nil })
	return b, path, commitAsync(t, b, 2), gate
}

// commitAsync appends entry seq (keyed "k<seq>", with a state key) to
// chain "c" and commits it asynchronously.
func commitAsync(t *testing.T, b *bolt.Backend, seq uint64) func() error {
	t.Helper()
	tx, err := b.Begin(ctx, true)
	if err != nil {
		t.Fatalf("begin for seq %d: %v", seq, err)
	}
	if seq > 1 {
		h, err := tx.Head(ctx, "c")
		if err != nil || h.Seq != seq-1 {
			t.Fatalf("writer's head before seq %d: %+v, %v; want seq %d (the writer sees commits not yet durable)", seq, h, err, seq-1)
		}
	}
	key := fmt.Sprintf("k%d", seq)
	if err := tx.Append(ctx, "c", storage.Record{Seq: seq, IdempotencyKey: key, Data: []byte(key)}, testHead(seq)); err != nil {
		t.Fatalf("append seq %d: %v", seq, err)
	}
	if err := tx.StatePut(ctx, []byte(key), []byte(key)); err != nil {
		t.Fatalf("state put %d: %v", seq, err)
	}
	wait, err := tx.(storage.AsyncCommitter).CommitAsync()
	if err != nil {
		t.Fatalf("commit seq %d: %v", seq, err)
	}
	return wait
}

// readerSees reports the head seq a reader sees of chain "c" (0: none),
// checking that its key lookups, entries and state agree with it.
func readerSees(t *testing.T, b *bolt.Backend) uint64 {
	t.Helper()
	tx, err := b.Begin(ctx, false)
	if err != nil {
		t.Errorf("begin reader: %v", err)
		return 0
	}
	defer tx.Rollback()
	seen := uint64(0)
	h, err := tx.Head(ctx, "c")
	switch {
	case err == nil:
		seen = h.Seq
	case !errors.Is(err, storage.ErrNotFound):
		t.Errorf("reader's head: %v", err)
	}
	next := fmt.Sprintf("k%d", seen+1)
	if _, err := tx.LookupKey(ctx, "c", next); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("reader at seq %d looks up %s: %v, want ErrNotFound", seen, next, err)
	}
	if _, err := tx.Entry(ctx, "c", seen+1); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("reader at seq %d reads entry %d: %v, want ErrNotFound", seen, seen+1, err)
	}
	if _, err := tx.StateGet(ctx, []byte(next)); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("reader at seq %d reads state %s: %v, want ErrNotFound", seen, next, err)
	}
	n := uint64(0)
	for range tx.Entries(ctx, "c", 1) {
		n++
	}
	if n != seen {
		t.Errorf("reader at seq %d scans %d entries", seen, n)
	}
	return seen
}

// TestAsyncCommitReadersSeeOnlyDurable holds the log's syncs while two
// commits are in flight: writers see both at once, a reader polling all the
// while sees neither until the syncs are let through, and both once their
// waits return.
func TestAsyncCommitReadersSeeOnlyDurable(t *testing.T) {
	b, err := bolt.Open(filepath.Join(t.TempDir(), "ledger.db"), asyncOptions)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := commitAsync(t, b, 1)(); err != nil {
		t.Fatalf("wait of seq 1: %v", err)
	}

	gate := make(chan struct{})
	var released atomic.Bool
	var syncs atomic.Int32
	bolt.SetSyncHook(b, func() error {
		syncs.Add(1)
		<-gate
		return nil
	})
	wait2 := commitAsync(t, b, 2)
	wait3 := commitAsync(t, b, 3)

	stop := make(chan struct{})
	var polls atomic.Int64
	var polling sync.WaitGroup
	polling.Add(1)
	pollerEnded := make(chan struct{})
	go func() {
		defer polling.Done()
		defer close(pollerEnded)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if seen := readerSees(t, b); seen > 1 && !released.Load() {
				t.Errorf("a reader saw seq %d before its sync was let through", seen)
				return
			}
			polls.Add(1)
		}
	}()
	waited := make(chan error, 2)
	go func() { waited <- wait2(); waited <- wait3() }()
	for syncs.Load() == 0 || polls.Load() < 20 {
		select {
		case <-pollerEnded:
			close(gate)
			t.FailNow()
		case <-time.After(time.Millisecond):
		}
	}
	select {
	case err := <-waited:
		t.Fatalf("a wait returned (%v) while its sync was held", err)
	default:
	}
	if seen := readerSees(t, b); seen != 1 {
		t.Fatalf("reader sees seq %d while the syncs are held, want 1", seen)
	}
	released.Store(true)
	close(gate)
	for range 2 {
		if err := <-waited; err != nil {
			t.Fatalf("wait: %v", err)
		}
	}
	if seen := readerSees(t, b); seen != 3 {
		t.Fatalf("reader sees seq %d after both waits, want 3", seen)
	}
	close(stop)
	polling.Wait()
}

// TestAsyncCommitSyncFailure fails the sync of two commits in flight: both
// waits fail with storage.ErrIO, no reader ever sees them, the backend
// refuses more writes, and a reopen recovers exactly the durable prefix.
func TestAsyncCommitSyncFailure(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	b, err := bolt.Open(path, asyncOptions)
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 2; seq++ {
		if err := commitAsync(t, b, seq)(); err != nil {
			t.Fatalf("wait of seq %d: %v", seq, err)
		}
	}
	injected := errors.New("injected fdatasync failure")
	bolt.SetSyncHook(b, func() error { return injected })
	wait3 := commitAsync(t, b, 3)
	wait4 := commitAsync(t, b, 4)
	if seen := readerSees(t, b); seen != 2 {
		t.Fatalf("reader sees seq %d before the failed sync, want 2", seen)
	}
	for i, wait := range []func() error{wait3, wait4, wait3} {
		if err := wait(); !errors.Is(err, storage.ErrIO) || !errors.Is(err, injected) {
			t.Fatalf("wait %d: %v, want storage.ErrIO with the injected failure", i, err)
		}
	}
	bolt.SetSyncHook(b, nil)
	if seen := readerSees(t, b); seen != 2 {
		t.Fatalf("reader sees seq %d after the failed sync, want 2", seen)
	}
	if tx, err := b.Begin(ctx, true); !errors.Is(err, storage.ErrIO) {
		if err == nil {
			tx.Rollback()
		}
		t.Fatalf("begin a writer after the failed sync: %v, want storage.ErrIO", err)
	}
	if err := b.Close(); !errors.Is(err, storage.ErrIO) {
		t.Fatalf("close after the failed sync: %v, want storage.ErrIO (the log is kept)", err)
	}
	if _, err := os.Stat(bolt.LogDirectory(path)); err != nil {
		t.Fatalf("log after a failed close: %v", err)
	}

	b, err = bolt.Open(path, asyncOptions)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	if seen := readerSees(t, b); seen != 2 {
		t.Fatalf("reopened ledger holds seq %d, want the durable 2", seen)
	}
	if err := commitAsync(t, b, 3)(); err != nil {
		t.Fatalf("seq 3 after the reopen: %v", err)
	}
	if seen := readerSees(t, b); seen != 3 {
		t.Fatalf("reopened ledger holds seq %d after a new commit, want 3", seen)
	}
	closeAndCheck(t, b, path)
}

// TestAsyncCommitCheckpointWaitsForDurable freezes a table whose last
// commit is not durable yet: the checkpoint waits for it, and a reader
// never sees it before the sync is let through.
func TestAsyncCommitCheckpointWaitsForDurable(t *testing.T) {
	opts := asyncOptions
	opts.MemtableBytesMax = 1
	b, path, wait2, gate := secondCommitHeld(t, opts)
	// The next writer freezes the table holding seq 2 and starts its
	// checkpoint, which must wait for the held sync.
	tx, err := b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	tx.Rollback()
	time.Sleep(20 * time.Millisecond)
	if seen := readerSees(t, b); seen != 1 {
		t.Fatalf("reader sees seq %d while the sync is held, want 1", seen)
	}
	close(gate)
	if err := wait2(); err != nil {
		t.Fatal(err)
	}
	if err := bolt.Checkpoint(b); err != nil {
		t.Fatal(err)
	}
	if seen := readerSees(t, b); seen != 2 {
		t.Fatalf("reader sees seq %d after the checkpoint, want 2", seen)
	}
	closeAndCheck(t, b, path)
}
