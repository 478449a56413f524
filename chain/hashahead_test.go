package chain_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"testing"

	"github.com/ledgerworks/ledger/chain"
)

// atLeastTwoProcs lets a helper goroutine run beside the committer, which
// hashing ahead needs, until the test ends.
func atLeastTwoProcs(t *testing.T) {
	old := runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0)))
	t.Cleanup(func() { runtime.GOMAXPROCS(old) })
}

// TestAppendBatchHashedAhead appends a batch of 1,000 fresh keyed requests
// to a chain that holds entries, large enough to be hashed ahead: every
// entry links to the one before, carries the hash of its fields, is stored
// as returned, and the new entries share one time no earlier than the
// chain's newest entry.
func TestAppendBatchHashedAhead(t *testing.T) {
	atLeastTwoProcs(t)
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		var head chain.Entry
		for i := range 3 {
			head = mustAppend(t, db, chain.Request{Chain: "c", IdempotencyKey: fmt.Sprint("old-", i), Type: "t/v1"}).Entry
		}
		reqs := make([]chain.Request, 1000)
		for i := range reqs {
			reqs[i] = chain.Request{Chain: "c", IdempotencyKey: fmt.Sprint("new-", i), Type: "t/v1", Payload: fmt.Appendf(nil, "payload %d", i)}
		}
		var results []chain.Result
		err := db.Update(ctx, func(tx *chain.Tx) error {
			var err error
			results, err = tx.AppendBatch(reqs, nil)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		prev := head
		for i, res := range results {
			e := res.Entry
			switch {
			case res.Replayed || e.Seq != head.Seq+1+uint64(i) || e.PrevHash != prev.Hash:
				t.Fatalf("result %d: %+v, want a new entry at seq %d after hash %v", i, res, head.Seq+1+uint64(i), prev.Hash)
			case e.Hash != e.ComputeHash():
				t.Fatalf("result %d: hash %v, its fields hash to %v", i, e.Hash, e.ComputeHash())
			case e.TimeUnixNano != results[0].Entry.TimeUnixNano || e.TimeUnixNano < head.TimeUnixNano:
				t.Fatalf("result %d: time %d, want the batch's one time %d, not before %d", i, e.TimeUnixNano, results[0].Entry.TimeUnixNano, head.TimeUnixNano)
			}
			prev = e
		}
		assertStoredAsReturned(t, db, results)
		assertVerifies(t, db)
	})
}

// assertStoredAsReturned fails unless each new entry of results is stored
// exactly as returned.
func assertStoredAsReturned(t *testing.T, db *chain.DB, results []chain.Result) {
	t.Helper()
	err := db.View(context.Background(), func(tx *chain.Tx) error {
		for _, res := range results {
			stored, err := tx.Get(res.Entry.Chain, res.Entry.Seq)
			if err != nil {
				return err
			}
			if !reflect.DeepEqual(res.Entry, stored) {
				return fmt.Errorf("entry %s/%d: stored differs from returned:\nreturned %+v\nstored   %+v", res.Entry.Chain, res.Entry.Seq, res.Entry, stored)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAppendBatchHashedAheadDiverges runs small batches through hashing
// ahead (its threshold lowered) whose requests do not all become new
// entries on at most four chains, so that the hashes assumed ahead stop
// matching: a replay of a stored key, a key twice, a conflict, an invalid
// request, a payload over the limit, a new chain, five chains. Each
// outcome must be what one Append per request gives.
func TestAppendBatchHashedAheadDiverges(t *testing.T) {
	atLeastTwoProcs(t)
	defer chain.LowerHashAheadPartMin(2)()
	req := func(chainID, key, payload string) chain.Request {
		return chain.Request{Chain: chainID, IdempotencyKey: key, Type: "t/v1", Payload: []byte(payload)}
	}
	cases := []struct {
		name string
		reqs []chain.Request
		// want is each result's chain/seq, "r" after a replay; err the
		// error expected after them.
		want []string
		err  error
	}{
		{"replay-of-stored-key", []chain.Request{req("a", "n1", "x"), req("a", "old", "old"), req("a", "n2", "y"), req("a", "n3", "z")},
			[]string{"a/3", "a/1r", "a/4", "a/5"}, nil},
		{"key-twice", []chain.Request{req("a", "n1", "x"), req("a", "n2", "y"), req("a", "n1", "x"), req("a", "n3", "z")},
			[]string{"a/3", "a/4", "a/3r", "a/5"}, nil},
		{"key-twice-other-payload", []chain.Request{req("a", "n1", "x"), req("a", "n2", "y"), req("a", "n1", "other"), req("a", "n3", "z")},
			[]string{"a/3", "a/4"}, chain.ErrIdempotencyConflict},
		{"invalid-request", []chain.Request{req("a", "n1", "x"), req("a", "n2", "y"), {Chain: "a", IdempotencyKey: "n3"}, req("a", "n4", "z")},
			[]string{"a/3", "a/4"}, chain.ErrInvalidType},
		{"payload-over-limit", []chain.Request{req("a", "n1", "x"), req("a", "n2", string(make([]byte, 65))), req("a", "n3", "z")},
			[]string{"a/3"}, chain.ErrPayloadTooLarge},
		{"four-chains-one-new", []chain.Request{req("a", "n1", "x"), req("b", "n1", "x"), req("new", "n1", "x"), req("a", "n2", "y"), req("c", "", "z"), req("new", "", "w")},
			[]string{"a/3", "b/3", "new/1", "a/4", "c/3", "new/2"}, nil},
		{"five-chains", []chain.Request{req("a", "n1", "x"), req("b", "n1", "x"), req("c", "n1", "x"), req("d", "n1", "x"), req("e", "n1", "x"), req("a", "n2", "y")},
			[]string{"a/3", "b/3", "c/3", "d/3", "e/3", "a/4"}, nil},
		{"no-keys", []chain.Request{req("a", "", "x"), req("a", "", "x"), req("b", "", "y")},
			[]string{"a/3", "a/4", "b/3"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			forEachBackend(t, chain.Options{PayloadSizeMax: 64}, func(t *testing.T, db *chain.DB) {
				for _, c := range []string{"a", "b", "c", "d", "e"} {
					mustAppend(t, db, req(c, "old", "old"))
					mustAppend(t, db, req(c, "", "second"))
				}
				var results []chain.Result
				err := db.Update(context.Background(), func(tx *chain.Tx) error {
					var err error
					results, err = tx.AppendBatch(tc.reqs, nil)
					if tc.err != nil && errors.Is(err, tc.err) {
						return nil // keep what came before, to check it is stored as returned
					}
					return err
				})
				if err != nil {
					t.Fatalf("AppendBatch: %v, want %v", err, tc.err)
				}
				var got []string
				var fresh []chain.Result
				for _, res := range results {
					s := fmt.Sprintf("%s/%d", res.Entry.Chain, res.Entry.Seq)
					if res.Replayed {
						s += "r"
					} else {
						fresh = append(fresh, res)
					}
					got = append(got, s)
					if e := res.Entry; e.Hash != e.ComputeHash() {
						t.Errorf("%s: hash %v, its fields hash to %v", s, e.Hash, e.ComputeHash())
					}
				}
				if !reflect.DeepEqual(tc.want, got) {
					t.Fatalf("results %q, want %q", got, tc.want)
				}
				assertStoredAsReturned(t, db, fresh)
				assertVerifies(t, db)
			})
		})
	}
}
