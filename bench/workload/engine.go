package workload

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ledgerworks/ledger/chain"
)

// UpdateBatches appends entries 0..total-1 of a stream to one chain, batch
// appends per Update, each Update's with one Tx.AppendBatch (P1).
func UpdateBatches(ctx context.Context, db *chain.DB, chainID string, stream uint64, total, batch int) (Stream, error) {
	return updates(ctx, db, chainID, stream, total, batch, func(tx *chain.Tx, reqs []chain.Request, results []chain.Result) ([]chain.Result, error) {
		return tx.AppendBatch(reqs, results)
	})
}

// UpdateAppends is UpdateBatches with one Tx.Append per entry, the
// baseline of Tx.AppendBatch.
func UpdateAppends(ctx context.Context, db *chain.DB, chainID string, stream uint64, total, batch int) (Stream, error) {
	return updates(ctx, db, chainID, stream, total, batch, func(tx *chain.Tx, reqs []chain.Request, results []chain.Result) ([]chain.Result, error) {
		for _, r := range reqs {
			res, err := tx.Append(r)
			if err != nil {
				return results, err
			}
			results = append(results, res)
		}
		return results, nil
	})
}

// updates runs the Updates of UpdateBatches and UpdateAppends, each
// appending one batch of requests with appendAll.
func updates(ctx context.Context, db *chain.DB, chainID string, stream uint64, total, batch int,
	appendAll func(tx *chain.Tx, reqs []chain.Request, results []chain.Result) ([]chain.Result, error)) (Stream, error) {
	clock := newStreamClock(int64(total))
	reqs := make([]chain.Request, 0, batch)
	results := make([]chain.Result, 0, batch)
	for next := 0; next < total; {
		reqs = reqs[:0]
		for ; len(reqs) < batch && next < total; next++ {
			reqs = append(reqs, Request(chainID, stream, uint64(next)))
		}
		err := db.Update(ctx, func(tx *chain.Tx) error {
			var err error
			results, err = appendAll(tx, reqs, results[:0])
			if err != nil {
				return err
			}
			for i, res := range results {
				if res.Replayed {
					return fmt.Errorf("key %q replayed in a fresh stream", reqs[i].IdempotencyKey)
				}
			}
			return nil
		})
		if err != nil {
			return Stream{}, err
		}
		clock.advance(int64(len(reqs)))
	}
	return clock.result(), nil
}

// DurableAppends appends n entries one at a time, each waiting for its
// durable result (P3).
func DurableAppends(ctx context.Context, db *chain.DB, chainID string, stream uint64, n int) (Latencies, error) {
	ds := make([]time.Duration, 0, n)
	start := time.Now()
	for i := range n {
		req := Request(chainID, stream, uint64(i))
		t := time.Now()
		if _, err := db.Append(ctx, req); err != nil {
			return Latencies{}, err
		}
		ds = append(ds, time.Since(t))
	}
	return summarize(ds, time.Since(start)), nil
}

// budgetStop returns a flag that turns true when budget has passed (never
// for a zero budget), so that a long workload ends early on a slow machine.
func budgetStop(budget time.Duration) (*atomic.Bool, func()) {
	var stop atomic.Bool
	if budget <= 0 {
		return &stop, func() {}
	}
	t := time.AfterFunc(budget, func() { stop.Store(true) })
	return &stop, func() { t.Stop() }
}

// ConcurrentAppends runs goroutines appenders, each appending one entry at
// a time to its own chain (or all to one chain when shared) and waiting for
// its durable result, until total entries are written or the budget is
// spent (P2).
func ConcurrentAppends(ctx context.Context, db *chain.DB, chainPrefix string, stream uint64, goroutines, total int, shared bool, budget time.Duration) (Rate, error) {
	var next, done atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	stop, release := budgetStop(budget)
	defer release()
	start := time.Now()
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			chainID := fmt.Sprintf("%s-%02d", chainPrefix, g)
			if shared {
				chainID = chainPrefix
			}
			for {
				i := next.Add(1) - 1
				if i >= int64(total) || stop.Load() {
					return
				}
				if _, err := db.Append(ctx, Request(chainID, stream, uint64(i))); err != nil {
					errs <- err
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return Rate{}, err
	}
	return Rate{done.Load(), elapsed}, nil
}

// Replays retries total existing requests (entries 0..existing-1 of the
// stream, in a scattered order) from goroutines callers, or as many as the
// budget allows, and checks that each is answered as a replay (P4). A
// batch of 1 retries each with Append; a larger one retries that many at
// a time with DB.AppendBatch, as a client retries a batch it sent.
func Replays(ctx context.Context, db *chain.DB, chainID string, stream uint64, existing, goroutines, total, batch int, budget time.Duration) (Rate, error) {
	if batch < 1 || batch > ReplayBatchMax {
		return Rate{}, fmt.Errorf("replay batch of %d: want 1 to %d", batch, ReplayBatchMax)
	}
	var next, done atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	stop, release := budgetStop(budget)
	defer release()
	start := time.Now()
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var replayed int64
			defer func() { done.Add(replayed) }()
			r := newReplayer(db, chainID, stream, existing, batch)
			for from, to := claim(&next, total); from < to && !stop.Load(); from, to = claim(&next, total) {
				for n := from; n < to && !stop.Load(); n += int64(batch) {
					count, err := r.replay(ctx, n, min(n+int64(batch), to))
					if err != nil {
						errs <- err
						return
					}
					replayed += count
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return Rate{}, err
	}
	return Rate{done.Load(), elapsed}, nil
}

// ReplayBatchMax is the largest batch of Replays: a claim's worth.
const ReplayBatchMax = claimSize

// replayer is one caller of Replays, with its requests' memory.
type replayer struct {
	db       *chain.DB
	chainID  string
	stream   uint64
	existing int
	payloads [][]byte
	requests []chain.Request
	results  []chain.Result
}

func newReplayer(db *chain.DB, chainID string, stream uint64, existing, batch int) *replayer {
	r := &replayer{db: db, chainID: chainID, stream: stream, existing: existing,
		payloads: make([][]byte, batch), requests: make([]chain.Request, 0, batch), results: make([]chain.Result, 0, batch)}
	for i := range r.payloads {
		r.payloads[i] = make([]byte, PayloadSize)
	}
	return r
}

// replay retries the requests of indexes [from, to) and returns how many
// were replayed.
func (r *replayer) replay(ctx context.Context, from, to int64) (int64, error) {
	r.requests = r.requests[:0]
	for n := from; n < to; n++ {
		i := splitmix64(uint64(n)) % uint64(r.existing)
		r.requests = append(r.requests, chain.Request{Chain: r.chainID, IdempotencyKey: Key(r.stream, i), Type: EntryType,
			Payload: payloadInto(r.payloads[n-from], i)})
	}
	var err error
	if len(r.payloads) == 1 {
		var res chain.Result
		res, err = r.db.Append(ctx, r.requests[0])
		r.results = append(r.results[:0], res)
	} else {
		r.results, err = r.db.AppendBatch(ctx, r.requests, r.results[:0])
	}
	if err != nil {
		return 0, err
	}
	for i, res := range r.results {
		if !res.Replayed || res.Entry.Seq == 0 {
			return 0, fmt.Errorf("entry %d was not replayed", splitmix64(uint64(from)+uint64(i))%uint64(r.existing))
		}
	}
	return int64(len(r.results)), nil
}

// claimSize is how many operations a caller of Replays or RawGets takes
// at a time: counting each one in a word both callers write would put that
// word's cache misses into the figure.
const claimSize = 256

// claim takes the next claimSize indexes below total from next: [from, to),
// empty when none are left.
func claim(next *atomic.Int64, total int) (from, to int64) {
	from = next.Add(claimSize) - claimSize
	to = min(from+claimSize, int64(total))
	return min(from, to), to
}

// Verify verifies every chain and fails on any failure found (P5, P6).
func Verify(ctx context.Context, db *chain.DB) (Rate, error) {
	start := time.Now()
	report, err := db.Verify(ctx, chain.VerifyOptions{})
	elapsed := time.Since(start)
	if err != nil {
		return Rate{}, err
	}
	if !report.OK() {
		return Rate{}, fmt.Errorf("verify found %d failures, first %v", len(report.Failures), report.Failures[0])
	}
	return Rate{report.Entries, elapsed}, nil
}
