package storagetest

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/storage"
)

// RunFork checks storage.Forker for the backends returned by open: a fork
// reads the receiver's snapshot (never a later commit), is read-only, can
// be read on its own goroutine while other forks are, and ends on
// Rollback. A backend whose transactions are not Forkers skips every test.
func RunFork(t *testing.T, open func(t testing.TB) storage.Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, b storage.Backend)
	}{
		{"ForkReadsTheSnapshot", testForkReadsTheSnapshot},
		{"ForkAfterACommit", testForkAfterACommit},
		{"ForkIsReadOnly", testForkIsReadOnly},
		{"ForkOfAWriteTx", testForkOfAWriteTx},
		{"ForksReadInParallel", testForksReadInParallel},
		{"ForkEnds", testForkEnds},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) { test.fn(t, open(t)) })
	}
}

// forkOf forks tx, skipping the test when the backend cannot fork.
func forkOf(t *testing.T, tx storage.Tx) storage.Tx {
	t.Helper()
	f := implementation[storage.Forker](t, tx)
	fork, err := f.Fork(ctx)
	if err != nil {
		t.Fatalf("fork: %v", err)
	}
	return fork
}

// readChain is everything a transaction reads of one chain.
type readChain struct {
	head    storage.Head
	entries []storage.Record
	keys    map[[storage.KeyDigestSize]byte]uint64
}

func readAll(t *testing.T, tx storage.Tx, chain string) readChain {
	t.Helper()
	var r readChain
	var err error
	if r.head, err = tx.Head(ctx, chain); err != nil {
		t.Fatalf("head of %q: %v", chain, err)
	}
	for rec, err := range tx.Entries(ctx, chain, 1) {
		if err != nil {
			t.Fatalf("entries of %q: %v", chain, err)
		}
		r.entries = append(r.entries, storage.Record{Seq: rec.Seq, Data: bytes.Clone(rec.Data)})
	}
	r.keys = map[[storage.KeyDigestSize]byte]uint64{}
	for ref, err := range tx.ScanKeys(ctx, chain) {
		if err != nil {
			t.Fatalf("keys of %q: %v", chain, err)
		}
		r.keys[ref.Digest] = ref.Seq
	}
	return r
}

func sameRead(t *testing.T, what string, got, want readChain) {
	t.Helper()
	if got.head != want.head || len(got.entries) != len(want.entries) || len(got.keys) != len(want.keys) {
		t.Fatalf("%s: head %+v, %d entries, %d keys; want %+v, %d, %d",
			what, got.head, len(got.entries), len(got.keys), want.head, len(want.entries), len(want.keys))
	}
	for i := range got.entries {
		if got.entries[i].Seq != want.entries[i].Seq || !bytes.Equal(got.entries[i].Data, want.entries[i].Data) {
			t.Fatalf("%s: entry %d is %d %q, want %d %q", what, i, got.entries[i].Seq, got.entries[i].Data,
				want.entries[i].Seq, want.entries[i].Data)
		}
	}
	for d, seq := range want.keys {
		if got.keys[d] != seq {
			t.Fatalf("%s: key %x at seq %d, want %d", what, d, got.keys[d], seq)
		}
	}
}

func testForkReadsTheSnapshot(t *testing.T, b storage.Backend) {
	appendN(t, b, "a", 1, 5)
	view(t, b, func(tx storage.Tx) {
		want := readAll(t, tx, "a")
		fork := forkOf(t, tx)
		defer fork.Rollback()
		if fork.Writable() {
			t.Fatal("fork says it is writable")
		}
		// A commit after the fork began: neither transaction sees it. It
		// runs on its own goroutine, as a store may make it wait for the
		// readers (bbolt does when the commit grows its memory map).
		written := commitAside(t, b)
		select {
		case err := <-written:
			written <- err
		case <-time.After(time.Second):
		}
		sameRead(t, "fork", readAll(t, fork, "a"), want)
		sameRead(t, "receiver", readAll(t, tx, "a"), want)
		if _, err := fork.Head(ctx, "b"); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("fork's head of a chain committed later: %v, want ErrNotFound", err)
		}
		fork.Rollback()
		tx.Rollback()
		if err := <-written; err != nil {
			t.Fatal(err)
		}
	})
}

// commitAside appends seqs 6 to 8 to chain "a" and starts chain "b" in one
// write transaction on another goroutine, and sends its outcome.
func commitAside(t *testing.T, b storage.Backend) chan error {
	t.Helper()
	written := make(chan error, 1)
	go func() {
		wtx, err := b.Begin(ctx, true)
		if err != nil {
			written <- err
			return
		}
		for seq := uint64(6); seq <= 8 && err == nil; seq++ {
			err = wtx.Append(ctx, "a", record(seq, ""), head(seq))
		}
		if err == nil {
			err = wtx.Append(ctx, "b", record(1, ""), head(1))
		}
		if err != nil {
			wtx.Rollback()
			written <- err
			return
		}
		written <- wtx.Commit()
	}()
	return written
}

// A fork begun after a commit landed may fail (ErrRetry) but never reads
// the newer data.
func testForkAfterACommit(t *testing.T, b storage.Backend) {
	appendN(t, b, "a", 1, 5)
	view(t, b, func(tx storage.Tx) {
		want := readAll(t, tx, "a")
		written := commitAside(t, b)
		select {
		case err := <-written:
			written <- err
		case <-time.After(time.Second):
		}
		defer func() {
			tx.Rollback() // a commit that waits for the readers goes on
			if err := <-written; err != nil {
				t.Fatal(err)
			}
		}()
		f := implementation[storage.Forker](t, tx)
		fork, err := f.Fork(ctx)
		if err != nil {
			if !errors.Is(err, storage.ErrRetry) {
				t.Fatalf("fork after a commit: %v, want nil or ErrRetry", err)
			}
			return
		}
		defer fork.Rollback()
		sameRead(t, "fork after a commit", readAll(t, fork, "a"), want)
	})
}

func testForkIsReadOnly(t *testing.T, b storage.Backend) {
	appendN(t, b, "a", 1, 2)
	view(t, b, func(tx storage.Tx) {
		fork := forkOf(t, tx)
		defer fork.Rollback()
		if err := fork.Append(ctx, "a", record(3, ""), head(3)); !errors.Is(err, storage.ErrReadOnly) {
			t.Errorf("Append in a fork: %v, want ErrReadOnly", err)
		}
		if err := fork.StatePut(ctx, []byte("k"), []byte("v")); !errors.Is(err, storage.ErrReadOnly) {
			t.Errorf("StatePut in a fork: %v, want ErrReadOnly", err)
		}
	})
	view(t, b, func(tx storage.Tx) {
		if h, err := tx.Head(ctx, "a"); err != nil || h.Seq != 2 {
			t.Fatalf("head after the fork's writes: %+v %v", h, err)
		}
	})
}

func testForkOfAWriteTx(t *testing.T, b storage.Backend) {
	tx, err := b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	f := implementation[storage.Forker](t, tx)
	if err := tx.Append(ctx, "a", record(1, "k"), head(1)); err != nil {
		t.Fatal(err)
	}
	if fork, err := f.Fork(ctx); !errors.Is(err, errors.ErrUnsupported) {
		if fork != nil {
			fork.Rollback()
		}
		t.Fatalf("fork of a write transaction: %v, want ErrUnsupported", err)
	}
}

// Forks read on their own goroutines at once, each its own part of the
// chain, as a verify does; the race detector watches.
func testForksReadInParallel(t *testing.T, b storage.Backend) {
	const entries, parts = 600, 3
	appendN(t, b, "a", 1, entries)
	view(t, b, func(tx storage.Tx) {
		want := readAll(t, tx, "a")
		forks := make([]storage.Tx, parts)
		for i := range forks {
			forks[i] = forkOf(t, tx)
		}
		got := make([][]storage.Record, parts)
		errs := make([]error, parts)
		var wg sync.WaitGroup
		for i, fork := range forks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer fork.Rollback()
				from, to := uint64(1+i*entries/parts), uint64(1+(i+1)*entries/parts)
				for rec, err := range fork.Entries(ctx, "a", from) {
					if err != nil {
						errs[i] = err
						return
					}
					if rec.Seq >= to {
						break
					}
					got[i] = append(got[i], storage.Record{Seq: rec.Seq, Data: bytes.Clone(rec.Data)})
				}
			}()
		}
		wg.Wait()
		var all []storage.Record
		for i := range got {
			if errs[i] != nil {
				t.Fatalf("part %d: %v", i, errs[i])
			}
			all = append(all, got[i]...)
		}
		sameRead(t, "parts read in parallel", readChain{head: want.head, entries: all, keys: want.keys}, want)
	})
}

func testForkEnds(t *testing.T, b storage.Backend) {
	appendN(t, b, "a", 1, 2)
	view(t, b, func(tx storage.Tx) {
		fork := forkOf(t, tx)
		if err := fork.Rollback(); err != nil {
			t.Fatalf("rollback: %v", err)
		}
		if err := fork.Rollback(); err != nil {
			t.Errorf("second rollback: %v", err)
		}
		if _, err := fork.Head(ctx, "a"); !errors.Is(err, storage.ErrTxDone) {
			t.Errorf("Head after the fork's rollback: %v, want ErrTxDone", err)
		}
		if err := fork.Commit(); !errors.Is(err, storage.ErrTxDone) {
			t.Errorf("Commit after the fork's rollback: %v, want ErrTxDone", err)
		}
		// The receiver outlives its forks.
		if h, err := tx.Head(ctx, "a"); err != nil || h.Seq != 2 {
			t.Fatalf("receiver after the fork ended: %+v %v", h, err)
		}
	})
	tx, err := b.Begin(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	f := implementation[storage.Forker](t, tx)
	if fork, err := f.Fork(ctx); !errors.Is(err, storage.ErrTxDone) {
		if fork != nil {
			fork.Rollback()
		}
		t.Fatalf("fork of an ended transaction: %v, want ErrTxDone", err)
	}
}
