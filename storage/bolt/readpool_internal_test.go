package bolt

import (
	"context"
	"fmt"
	"github.com/ledgerworks/ledger/storage/bolt/internal/readpool"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// pooledLedger is a handle that runs the log, with helpers that commit
// and read state through it.
type pooledLedger struct {
	t *testing.T
	b *Backend
}

func newPooledLedger(t *testing.T, opts Options) *pooledLedger {
	t.Helper()
	opts.Log = LogOn
	b, err := Open(filepath.Join(t.TempDir(), "l.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// bbolt's check must not run beside a checkpoint's commit.
		if err := b.waitCheckpoint(context.Background()); err != nil {
			t.Error(err)
		}
		if err := b.Check(); err != nil {
			t.Error(err)
		}
		b.Close()
	})
	return &pooledLedger{t: t, b: b}
}

func (l *pooledLedger) commit(key string, value []byte) {
	l.t.Helper()
	ctx := context.Background()
	stx, err := l.b.Begin(ctx, true)
	if err != nil {
		l.t.Fatal(err)
	}
	if err := stx.StatePut(ctx, []byte(key), value); err != nil {
		l.t.Fatal(err)
	}
	if err := stx.Commit(); err != nil {
		l.t.Fatal(err)
	}
}

func (l *pooledLedger) checkpoint() {
	l.t.Helper()
	if err := l.b.forceCheckpoint(context.Background()); err != nil {
		l.t.Fatal(err)
	}
}

// begin starts a read transaction and returns it with its file transaction.
func (l *pooledLedger) begin() (*logTx, *tx) {
	l.t.Helper()
	stx, err := l.b.Begin(context.Background(), false)
	if err != nil {
		l.t.Fatal(err)
	}
	lt := stx.(*logTx)
	return lt, lt.base.t
}

// read reads key in a transaction of its own and returns the file
// transaction it used.
func (l *pooledLedger) read(key, want string) *tx {
	l.t.Helper()
	lt, ft := l.begin()
	defer lt.Rollback()
	v, err := lt.StateGet(context.Background(), []byte(key))
	if err != nil || string(v) != want {
		l.t.Fatalf("state %q = %q, %v; want %q", key, v, err, want)
	}
	return ft
}

func (l *pooledLedger) idle() int {
	return l.b.readers.IdleCount()
}

// TestReadPoolReusesBetweenCheckpoints: reads between two checkpoints share
// one file transaction, commits to the log included; a checkpoint empties
// the pool, and the next read reads the file it wrote.
func TestReadPoolReusesBetweenCheckpoints(t *testing.T) {
	l := newPooledLedger(t, Options{MemtableBytesMax: 1 << 40})
	l.commit("a", []byte("1"))
	l.checkpoint()
	first := l.read("a", "1")
	if l.idle() != 1 {
		t.Fatalf("%d idle file transactions after a read, want 1", l.idle())
	}
	if again := l.read("a", "1"); again != first {
		t.Fatal("the second read began a file transaction of its own")
	}
	l.commit("b", []byte("2")) // to the log: the file does not change
	if again := l.read("b", "2"); again != first {
		t.Fatal("a commit to the log retired the file transaction")
	}
	l.checkpoint()
	if l.idle() != 0 {
		t.Fatalf("%d idle file transactions after a checkpoint, want 0", l.idle())
	}
	after := l.read("b", "2")
	if after == first || after.tx.ID() <= first.tx.ID() {
		t.Fatalf("after a checkpoint the read used file transaction %d, before %d", after.tx.ID(), first.tx.ID())
	}
	l.read("a", "1")
}

// TestReadPoolKeepsNoStaleTransaction: a read that began before a
// checkpoint committed and ends after it is not kept: a later view, whose
// memory tables no longer hold what the checkpoint wrote, would not find it
// in that file transaction.
func TestReadPoolKeepsNoStaleTransaction(t *testing.T) {
	l := newPooledLedger(t, Options{MemtableBytesMax: 1 << 40})
	l.commit("a", []byte("1"))
	held, old := l.begin()
	l.commit("b", []byte("2"))
	l.checkpoint()
	held.Rollback()
	if l.idle() != 0 {
		t.Fatalf("a file transaction of snapshot %d was kept after the checkpoint", old.tx.ID())
	}
	if ft := l.read("b", "2"); ft.tx.ID() <= old.tx.ID() {
		t.Fatalf("read through file transaction %d, not newer than %d", ft.tx.ID(), old.tx.ID())
	}
}

// TestReadPoolCheckpointThatRemaps: idle file transactions would hold the
// file's map, and a checkpoint that grows the file past it waits for every
// read transaction to end: a checkpoint empties the pool before it begins.
func TestReadPoolCheckpointThatRemaps(t *testing.T) {
	l := newPooledLedger(t, Options{MemtableBytesMax: 1 << 40, InitialMmapSize: 1 << 20})
	l.commit("a", []byte("1"))
	l.checkpoint()
	var held []*logTx
	for range readpool.SizeMax {
		lt, _ := l.begin()
		held = append(held, lt)
	}
	for _, lt := range held {
		lt.Rollback()
	}
	if l.idle() == 0 {
		t.Fatal("no idle file transaction to hold the map")
	}
	value := make([]byte, 256<<10)
	for i := range 128 { // 32 MiB: far past the map
		l.commit(fmt.Sprintf("big%03d", i), value)
	}
	finished := make(chan error, 1)
	go func() { finished <- l.b.forceCheckpoint(context.Background()) }()
	select {
	case err := <-finished:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the checkpoint waits for the idle read transactions")
	}
	l.read("big127", string(value))
}

// TestReadPoolConcurrentReadersAndCheckpoints reads what was committed
// from several goroutines while checkpoints commit, under -race.
func TestReadPoolConcurrentReadersAndCheckpoints(t *testing.T) {
	l := newPooledLedger(t, Options{MemtableBytesMax: 4 << 10})
	const commits = 200
	var wg sync.WaitGroup
	done := make(chan struct{})
	var mu sync.Mutex
	committed := 0
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				mu.Lock()
				n := committed
				mu.Unlock()
				if n == 0 {
					continue
				}
				lt, err := l.b.Begin(context.Background(), false)
				if err != nil {
					t.Error(err)
					return
				}
				key := fmt.Sprintf("k%04d", n-1)
				v, err := lt.StateGet(context.Background(), []byte(key))
				lt.Rollback()
				if err != nil || string(v) != key {
					t.Errorf("state %q = %q, %v after it was committed", key, v, err)
					return
				}
			}
		}()
	}
	for i := range commits {
		key := fmt.Sprintf("k%04d", i)
		l.commit(key, []byte(key)) // a checkpoint every commit or two
		mu.Lock()
		committed = i + 1
		mu.Unlock()
	}
	close(done)
	wg.Wait()
}

// TestReadPoolEmptyWhileWriting: readers give back and take transactions
// from every processor's slot while writes begin and end; from the moment
// beginWrite returns until endWrite, the pool holds no transaction (one
// would hold the map a write's commit may grow), and after endWrite the
// readers' transactions are kept again. It fails when give stores without
// checking usable under the slot's mutex (a give racing beginWrite's drain
// leaves a transaction behind).
func TestReadPoolEmptyWhileWriting(t *testing.T) {
	l := newPooledLedger(t, Options{MemtableBytesMax: 1 << 40})
	l.commit("a", []byte("1"))
	l.checkpoint()
	pool := &l.b.readers
	var stop atomic.Bool
	var kept atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var own *tx
			for !stop.Load() {
				if own == nil {
					if own = pool.Take(); own == nil {
						btx, err := l.b.beginBolt(false)
						if err != nil {
							t.Error(err)
							return
						}
						own = &tx{tx: btx, path: l.b.path, cache: l.b.cache}
					}
				}
				if pool.Give(own) {
					kept.Add(1)
					own = nil
				}
			}
			if own != nil {
				own.tx.Rollback()
			}
		}()
	}
	for range 40 {
		pool.BeginWrite()
		for range 20 {
			if n := pool.IdleCount(); n != 0 {
				stop.Store(true)
				wg.Wait()
				pool.EndWrite(readpool.WriteRolledBack, 0)
				t.Fatalf("%d idle transactions while a write runs", n)
			}
			runtime.Gosched()
		}
		pool.EndWrite(readpool.WriteRolledBack, 0)
		before := kept.Load()
		for kept.Load() == before {
			runtime.Gosched()
		}
	}
	stop.Store(true)
	wg.Wait()
}
