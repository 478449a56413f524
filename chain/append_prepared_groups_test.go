package chain_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt"
	"github.com/ledgerworks/ledger/storage/storagetest"
)

// preparedOutcome is one request of TestGroupPreparedKeysExactlyOnce and
// what the DB answered: a result (err nil) or an error.
type preparedOutcome struct {
	req chain.Request
	res chain.Result
	err error
}

// TestGroupPreparedKeysExactlyOnce appends keyed requests from several
// goroutines at once, so that the committer's groups hold many Append
// requests whose keys it looks up together (prepareGroup), beside Updates
// that append with AppendBatch (keys twice in one batch among them), ones
// that append one at a time, and ones that append and then fail, which
// make the group run again without them. Over bbolt the memory table is
// small, so that keys move to the file by checkpoints while the groups
// run. Then every (chain, key) is in its chain at most once, was appended
// by exactly one answer that was not a replay, and every answer agrees
// with the stored entry: a retry gets its entry, another payload under a
// taken key a conflict naming its seq; and verify finds nothing.
func TestGroupPreparedKeysExactlyOnce(t *testing.T) {
	backends := []struct {
		name string
		open func(t *testing.T) storage.Backend
	}{{"bolt-small-memtable", func(t *testing.T) storage.Backend {
		b, err := bolt.Open(filepath.Join(t.TempDir(), "ledger.db"), bolt.Options{Log: bolt.LogOn, MemtableBytesMax: 16 << 10})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}}}
	for _, f := range storagetest.Factories(t) {
		backends = append(backends, struct {
			name string
			open func(t *testing.T) storage.Backend
		}{f.Name, func(t *testing.T) storage.Backend { return f.Open(t) }})
	}
	for _, backend := range backends {
		t.Run(backend.name, func(t *testing.T) {
			db, err := chain.OpenBackend(backend.open(t), chain.Options{Clock: testClock()})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			outcomes := runPreparedWorkload(t, db)
			checkPreparedOutcomes(t, db, outcomes)
		})
	}
}

const (
	preparedWorkers     = 8
	preparedOperations  = 120
	preparedChainsCount = 3
	preparedKeysCount   = 48
)

// preparedRequest is the request for key i of chain c; deviant ones carry
// another payload under the same key.
func preparedRequest(c, i int, deviant bool) chain.Request {
	payload := fmt.Sprintf("payload-%d-%d", c, i)
	if deviant {
		payload = "deviant-" + payload
	}
	return chain.Request{Chain: fmt.Sprint("chain-", c), IdempotencyKey: fmt.Sprint("key-", i),
		Type: "t", Payload: []byte(payload)}
}

var errPreparedRefused = errors.New("refused after appending")

// runPreparedWorkload runs the workers and returns every answer of a call
// that succeeded, and every error.
func runPreparedWorkload(t *testing.T, db *chain.DB) []preparedOutcome {
	ctx := context.Background()
	var mu sync.Mutex
	var outcomes []preparedOutcome
	record := func(o ...preparedOutcome) {
		mu.Lock()
		outcomes = append(outcomes, o...)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for w := range preparedWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			random := rand.New(rand.NewPCG(uint64(w), 7))
			draw := func() chain.Request {
				return preparedRequest(random.IntN(preparedChainsCount), random.IntN(preparedKeysCount), random.IntN(12) == 0)
			}
			for range preparedOperations {
				switch op := random.IntN(10); {
				case op < 6:
					req := draw()
					res, err := db.Append(ctx, req)
					record(preparedOutcome{req: req, res: res, err: err})
				case op < 9:
					reqs := make([]chain.Request, 2+random.IntN(5))
					for i := range reqs {
						reqs[i] = draw()
						if i > 0 && random.IntN(4) == 0 {
							reqs[i] = reqs[random.IntN(i)] // a key twice in one batch
						}
					}
					batch, refuse := op == 6 || op == 7, op == 8 && random.IntN(2) == 0
					var results []chain.Result
					err := db.Update(ctx, func(tx *chain.Tx) error {
						results = results[:0]
						if batch {
							var err error
							if results, err = tx.AppendBatch(reqs, results); err != nil {
								return err
							}
						} else {
							for _, req := range reqs {
								res, err := tx.Append(req)
								if err != nil {
									return err
								}
								results = append(results, res)
							}
						}
						if refuse {
							return errPreparedRefused
						}
						return nil
					})
					switch {
					case refuse:
						if !errors.Is(err, errPreparedRefused) && !errors.Is(err, chain.ErrIdempotencyConflict) {
							t.Errorf("refused update %+v: %v", reqs, err)
						}
					case err != nil:
						// The request that failed is the one after the
						// results; the rest never ran.
						if len(results) >= len(reqs) {
							t.Errorf("update %+v: %v after %d results", reqs, err, len(results))
							continue
						}
						// A conflict with an append of the same batch names an
						// entry that was never committed: only a conflict with
						// a committed entry is checked.
						failed := reqs[len(results)]
						if !slices.ContainsFunc(reqs[:len(results)], func(r chain.Request) bool {
							return r.Chain == failed.Chain && r.IdempotencyKey == failed.IdempotencyKey
						}) {
							record(preparedOutcome{req: failed, err: err})
						}
					default:
						if len(results) != len(reqs) {
							t.Errorf("update %+v: %d results", reqs, len(results))
							continue
						}
						for i := range reqs {
							record(preparedOutcome{req: reqs[i], res: results[i]})
						}
					}
				default:
					req := draw()
					res, err := db.Append(ctx, req)
					record(preparedOutcome{req: req, res: res, err: err})
					res2, err2 := db.Append(ctx, req) // a retry, straight after
					record(preparedOutcome{req: req, res: res2, err: err2})
				}
			}
		}()
	}
	wg.Wait()
	return outcomes
}

// checkPreparedOutcomes compares the answers with the stored chains.
func checkPreparedOutcomes(t *testing.T, db *chain.DB, outcomes []preparedOutcome) {
	ctx := context.Background()
	type chainKey struct{ chain, key string }
	stored := map[chainKey]chain.Entry{}
	err := db.View(ctx, func(tx *chain.Tx) error {
		for c := range preparedChainsCount {
			name := fmt.Sprint("chain-", c)
			for e, err := range tx.Entries(name, 1) {
				if err != nil {
					return err
				}
				k := chainKey{name, e.IdempotencyKey}
				if first, ok := stored[k]; ok {
					t.Errorf("chain %q holds key %q twice: seq %d and %d", name, e.IdempotencyKey, first.Seq, e.Seq)
					continue
				}
				stored[k] = e
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	created := map[chainKey]int{}
	for _, o := range outcomes {
		k := chainKey{o.req.Chain, o.req.IdempotencyKey}
		e, ok := stored[k]
		var conflict *chain.ConflictError
		switch {
		case errors.As(o.err, &conflict):
			if !ok || bytes.Equal(e.Payload, o.req.Payload) || conflict.ExistingSeq != e.Seq {
				t.Errorf("%+v: conflict %+v; stored %v %+v", o.req, conflict, ok, e)
			}
		case o.err != nil:
			t.Errorf("%+v: %v", o.req, o.err)
		case !ok:
			t.Errorf("%+v: answered seq %d (replayed %v), but the chain does not hold the key", o.req, o.res.Entry.Seq, o.res.Replayed)
		default:
			if o.res.Entry.Seq != e.Seq || o.res.Entry.Hash != e.Hash || !bytes.Equal(e.Payload, o.req.Payload) {
				t.Errorf("%+v: answered seq %d hash %x (replayed %v), stored seq %d hash %x payload %q",
					o.req, o.res.Entry.Seq, o.res.Entry.Hash, o.res.Replayed, e.Seq, e.Hash, e.Payload)
			}
			if !o.res.Replayed {
				created[k]++
			}
		}
	}
	for k, e := range stored {
		if n := created[k]; n != 1 {
			t.Errorf("chain %q key %q (seq %d): appended by %d answers that were not replays", k.chain, k.key, e.Seq, n)
		}
	}
	report, err := db.Verify(ctx, chain.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !report.OK() {
		t.Fatalf("verify: %+v", report.Failures)
	}
	if len(stored) < preparedChainsCount*preparedKeysCount/2 {
		t.Fatalf("only %d keys stored: the workload did not run", len(stored))
	}
}
