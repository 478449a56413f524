package chain_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/storagetest"
)

// scriptedReader is a backend whose storage.KeyReader answers as read
// says, counting its calls and the read transactions begun beside it.
type scriptedReader struct {
	storage.Backend
	read         func(ctx context.Context, chain, key string) (uint64, []byte, bool, error)
	calls, reads atomic.Int64
}

func (s *scriptedReader) ReadKey(ctx context.Context, chain, key string) (uint64, []byte, bool, error) {
	s.calls.Add(1)
	return s.read(ctx, chain, key)
}

func (s *scriptedReader) Begin(ctx context.Context, writable bool) (storage.Tx, error) {
	if !writable {
		s.reads.Add(1)
	}
	return s.Backend.Begin(ctx, writable)
}

// forEachScriptedReader runs fn against every backend behind a
// scriptedReader whose read is set by fn.
func forEachScriptedReader(t *testing.T, opts chain.Options, fn func(t *testing.T, db *chain.DB, s *scriptedReader)) {
	t.Helper()
	for _, f := range storagetest.Factories(t) {
		t.Run(f.Name, func(t *testing.T) {
			opts.Clock = testClock()
			s := &scriptedReader{Backend: f.Open(t)}
			s.read = func(context.Context, string, string) (uint64, []byte, bool, error) {
				t.Fatal("ReadKey called before the test scripted it")
				return 0, nil, false, nil
			}
			db, err := chain.OpenBackend(s, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			fn(t, db, s)
		})
	}
}

// storedRecord reads the stored bytes of (chain, seq) from the backend.
func storedRecord(t *testing.T, b storage.Backend, chainID string, seq uint64) []byte {
	t.Helper()
	tx, err := b.Begin(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	data, err := tx.Entry(context.Background(), chainID, seq)
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), data...)
}

// TestReadKeyAnswersRetries checks that a KeyReader's answer is what
// Append returns: the stored entry for a retry, with no read transaction
// and no commit, a copy the caller may change, and a conflict for the same
// key with another payload.
func TestReadKeyAnswersRetries(t *testing.T) {
	metrics := &countingMetrics{}
	forEachScriptedReader(t, chain.Options{Metrics: metrics}, func(t *testing.T, db *chain.DB, s *scriptedReader) {
		s.read = func(context.Context, string, string) (uint64, []byte, bool, error) { return 0, nil, false, nil }
		req := chain.Request{Chain: "c", IdempotencyKey: "k", Type: "t/v1", Payload: []byte("payload")}
		original := mustAppend(t, db, req)
		mustAppend(t, db, chain.Request{Chain: "c", IdempotencyKey: "other", Type: "t/v1", Payload: []byte("later")})
		stored := storedRecord(t, s.Backend, "c", original.Entry.Seq)
		s.read = func(_ context.Context, chainID, key string) (uint64, []byte, bool, error) {
			if chainID != "c" || key != "k" {
				t.Errorf("ReadKey(%q, %q), want (c, k)", chainID, key)
			}
			return original.Entry.Seq, append([]byte(nil), stored...), true, nil
		}
		before := takeSnapshot(t, db)
		calls, reads, groups, replays := s.calls.Load(), s.reads.Load(), metrics.groups.Load(), metrics.replays.Load()
		for range 3 {
			res := mustAppend(t, db, req)
			if !res.Replayed || !reflect.DeepEqual(res.Entry, original.Entry) {
				t.Fatalf("retry: %+v, want the original entry %+v replayed", res, original.Entry)
			}
			res.Entry.Payload[0] ^= 0xFF // the caller's to change
		}
		if got := s.calls.Load() - calls; got != 3 {
			t.Fatalf("3 retries called ReadKey %d times", got)
		}
		if got := s.reads.Load() - reads; got != 0 {
			t.Fatalf("3 retries answered by ReadKey began %d read transactions", got)
		}
		if got := metrics.groups.Load() - groups; got != 0 {
			t.Fatalf("3 retries committed %d groups", got)
		}
		if got := metrics.replays.Load() - replays; got != 3 {
			t.Fatalf("3 retries counted %d replays", got)
		}
		conflict := req
		conflict.Payload = []byte("changed")
		var ce *chain.ConflictError
		if _, err := db.Append(context.Background(), conflict); !errors.As(err, &ce) || ce.ExistingSeq != original.Entry.Seq {
			t.Fatalf("same key, another payload: %v, want a *ConflictError at seq %d", err, original.Entry.Seq)
		}
		assertUnchanged(t, db, before)
	})
}

// TestReadKeyAbsentStillReplays checks that a KeyReader that finds
// nothing, the worst it can do, costs a trip through the write path and
// nothing else: every retry is still answered with its entry, and no
// second entry is written.
func TestReadKeyAbsentStillReplays(t *testing.T) {
	forEachScriptedReader(t, chain.Options{}, func(t *testing.T, db *chain.DB, s *scriptedReader) {
		s.read = func(context.Context, string, string) (uint64, []byte, bool, error) { return 0, nil, false, nil }
		req := chain.Request{Chain: "c", IdempotencyKey: "k", Type: "t/v1", Payload: []byte("p")}
		original := mustAppend(t, db, req)
		before := takeSnapshot(t, db)
		for range 3 {
			res := mustAppend(t, db, req)
			if !res.Replayed || !reflect.DeepEqual(res.Entry, original.Entry) {
				t.Fatalf("retry: %+v, want the original entry replayed", res)
			}
		}
		conflict := req
		conflict.Type = "t/v2"
		if _, err := db.Append(context.Background(), conflict); !errors.Is(err, chain.ErrIdempotencyConflict) {
			t.Fatalf("conflict through the write path: %v", err)
		}
		assertUnchanged(t, db, before)
		assertVerifies(t, db)
	})
}

// TestReadKeyWrongEntry checks that an entry a KeyReader returns for a key
// it does not hold (a digest collision, a damaged index) is ErrCorrupt,
// never a replay of another request, and that a reader's error reaches the
// caller; nothing is written either way.
func TestReadKeyWrongEntry(t *testing.T) {
	forEachScriptedReader(t, chain.Options{}, func(t *testing.T, db *chain.DB, s *scriptedReader) {
		s.read = func(context.Context, string, string) (uint64, []byte, bool, error) { return 0, nil, false, nil }
		first := mustAppend(t, db, chain.Request{Chain: "c", IdempotencyKey: "a", Type: "t/v1", Payload: []byte("p")})
		stored := storedRecord(t, s.Backend, "c", first.Entry.Seq)
		before := takeSnapshot(t, db)
		s.read = func(context.Context, string, string) (uint64, []byte, bool, error) {
			return first.Entry.Seq, append([]byte(nil), stored...), true, nil
		}
		// The same type and payload under another key: only the key
		// tells the entries apart.
		_, err := db.Append(context.Background(), chain.Request{Chain: "c", IdempotencyKey: "b", Type: "t/v1", Payload: []byte("p")})
		if !errors.Is(err, chain.ErrCorrupt) {
			t.Fatalf("an entry of another key: %v, want ErrCorrupt", err)
		}
		s.read = func(context.Context, string, string) (uint64, []byte, bool, error) {
			return first.Entry.Seq, []byte("not a record"), true, nil
		}
		if _, err := db.Append(context.Background(), chain.Request{Chain: "c", IdempotencyKey: "a", Type: "t/v1", Payload: []byte("p")}); !errors.Is(err, chain.ErrCorrupt) {
			t.Fatalf("a damaged record: %v, want ErrCorrupt", err)
		}
		s.read = func(context.Context, string, string) (uint64, []byte, bool, error) {
			return 0, nil, false, fmt.Errorf("read: %w", storage.ErrCorrupt)
		}
		if _, err := db.Append(context.Background(), chain.Request{Chain: "c", IdempotencyKey: "a", Type: "t/v1", Payload: []byte("p")}); !errors.Is(err, chain.ErrCorrupt) {
			t.Fatalf("a reader's error: %v, want ErrCorrupt", err)
		}
		assertUnchanged(t, db, before)
	})
}

// TestReadKeyOfTheBackend runs retries, conflicts and new keys through the
// backends' own KeyReader (a backend without one skips): every retry is
// answered by one ReadKey and no read transaction.
func TestReadKeyOfTheBackend(t *testing.T) {
	for _, f := range storagetest.Factories(t) {
		t.Run(f.Name, func(t *testing.T) {
			backend := f.Open(t)
			reader, ok := backend.(storage.KeyReader)
			if !ok {
				t.Skipf("%T is not a storage.KeyReader", backend)
			}
			s := &scriptedReader{Backend: backend, read: reader.ReadKey}
			db, err := chain.OpenBackend(s, chain.Options{Clock: testClock()})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var originals []chain.Result
			for i := range 40 {
				req := chain.Request{Chain: fmt.Sprintf("c%d", i%3), IdempotencyKey: fmt.Sprintf("k%d", i), Type: "t/v1", Payload: []byte{byte(i)}}
				res := mustAppend(t, db, req)
				if res.Replayed {
					t.Fatalf("new key %d replayed", i)
				}
				originals = append(originals, res)
			}
			before := takeSnapshot(t, db)
			reads := s.reads.Load()
			for i, original := range originals {
				e := original.Entry
				res := mustAppend(t, db, chain.Request{Chain: e.Chain, IdempotencyKey: e.IdempotencyKey, Type: e.Type, Payload: e.Payload})
				if !res.Replayed || !reflect.DeepEqual(res.Entry, e) {
					t.Fatalf("retry %d: %+v, want %+v replayed", i, res, e)
				}
				var ce *chain.ConflictError
				_, err := db.Append(context.Background(), chain.Request{Chain: e.Chain, IdempotencyKey: e.IdempotencyKey, Type: e.Type, Payload: []byte("other")})
				if !errors.As(err, &ce) || ce.ExistingSeq != e.Seq {
					t.Fatalf("conflict %d: %v", i, err)
				}
			}
			if got := s.reads.Load() - reads; got != 0 {
				t.Fatalf("%d retries and conflicts began %d read transactions", 2*len(originals), got)
			}
			assertUnchanged(t, db, before)
			// The same key on another chain is a new entry.
			if res := mustAppend(t, db, chain.Request{Chain: "other", IdempotencyKey: "k0", Type: "t/v1"}); res.Replayed {
				t.Fatalf("a key of another chain replayed: %+v", res)
			}
		})
	}
}
