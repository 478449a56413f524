package chain_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// replayPayload is the payload of the entry of seq n: kilobytes and a few
// bytes by turns, five hundred entries each, so that some of the chain's
// segments hold an entry or two and others many, and a replay's guess of
// its segment from where its seq falls among the chain's is far off, too
// low or too high.
func replayPayload(n int) []byte {
	size := 1 + (n*7919)%29
	if n%1000 < 500 {
		size = 1500 + (n*7919)%900
	}
	return bytes.Repeat([]byte{byte('a' + n%26)}, size)
}

// TestReplaysBesideWritersAndCheckpoints retries the keys of a chain of
// entries of very different sizes from several goroutines (replays answered
// by the backend's ReadKey, without a transaction of the DB, through the
// pooled read transactions and their maps of the chain's segments), while
// a writer appends and the small memory table makes checkpoints commit
// beside the replays, and finally while the DB closes: every retry is
// answered with its own entry (seq, hash, payload), a request with another
// payload with a conflict that names the entry, and a retry during Close
// with its entry or ErrClosed.
func TestReplaysBesideWritersAndCheckpoints(t *testing.T) {
	const stored, replayers, replaysEach, writes = 3000, 3, 1500, 400
	ctx := context.Background()
	backend, err := bolt.Open(filepath.Join(t.TempDir(), "ledger.db"), bolt.Options{Log: bolt.LogOn, MemtableBytesMax: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	db, err := chain.OpenBackend(backend, chain.Options{Clock: testClock()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	request := func(chainName string, n int) chain.Request {
		return chain.Request{Chain: chainName, IdempotencyKey: fmt.Sprint("key-", n), Type: "t", Payload: replayPayload(n)}
	}
	entries := make([]chain.Entry, stored)
	for from := 0; from < stored; from += 100 {
		reqs := make([]chain.Request, 100)
		for i := range reqs {
			reqs[i] = request("c", from+i)
		}
		var results []chain.Result
		if err := db.Update(ctx, func(tx *chain.Tx) error {
			var err error
			results, err = tx.AppendBatch(reqs, results[:0])
			return err
		}); err != nil {
			t.Fatal(err)
		}
		for i, res := range results {
			entries[from+i] = res.Entry
		}
	}

	check := func(req chain.Request, res chain.Result, err error, want chain.Entry, closing bool) {
		t.Helper()
		if closing && errors.Is(err, chain.ErrClosed) {
			return
		}
		if !bytes.Equal(req.Payload, want.Payload) {
			var conflict *chain.ConflictError
			if !errors.As(err, &conflict) || conflict.ExistingSeq != want.Seq {
				t.Errorf("key %q with another payload: %v, want a conflict with seq %d", req.IdempotencyKey, err, want.Seq)
			}
			return
		}
		if err != nil || !res.Replayed || res.Entry.Seq != want.Seq || res.Entry.Hash != want.Hash ||
			!bytes.Equal(res.Entry.Payload, want.Payload) || res.Entry.TimeUnixNano != want.TimeUnixNano {
			t.Errorf("retry of key %q: %+v, %v; want seq %d hash %x, replayed", req.IdempotencyKey, res, err, want.Seq, want.Hash)
		}
	}
	replay := func(random *rand.Rand, closing bool) {
		n := random.IntN(stored)
		req := request("c", n)
		if random.IntN(10) == 0 {
			req.Payload = append(bytes.Clone(req.Payload), '!')
		}
		res, err := db.Append(ctx, req)
		check(req, res, err, entries[n], closing)
	}

	var wg sync.WaitGroup
	var writing atomic.Bool
	writing.Store(true)
	wg.Add(1)
	go func() { // the writer: new keys of two chains, which fill the memory table
		defer wg.Done()
		defer writing.Store(false)
		for n := range writes {
			if _, err := db.Append(ctx, request("d", n)); err != nil {
				t.Error(err)
				return
			}
			if _, err := db.Append(ctx, request("c", stored+n)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for r := range replayers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			random := rand.New(rand.NewPCG(uint64(r), 11))
			for i := 0; i < replaysEach || writing.Load(); i++ {
				replay(random, false)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	// Replays while the DB closes: the last checkpoint and bbolt's Close
	// run beside them.
	var closers sync.WaitGroup
	for r := range replayers {
		closers.Add(1)
		go func() {
			defer closers.Done()
			random := rand.New(rand.NewPCG(uint64(r), 13))
			for range 300 {
				replay(random, true)
			}
		}()
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	closers.Wait()
	if _, err := db.Append(ctx, request("c", 0)); !errors.Is(err, chain.ErrClosed) {
		t.Fatalf("a retry after Close: %v, want ErrClosed", err)
	}
}
