package chain_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
)

// blockCommitter queues an Update whose function waits for release, so that
// Updates queued meanwhile form the next group together. It returns once the
// blocking function runs, and a function that releases it and waits for its
// Update to finish.
func blockCommitter(t *testing.T, db *chain.DB) (release func()) {
	t.Helper()
	running, released := make(chan struct{}), make(chan struct{})
	var once sync.Once
	done := make(chan error, 1)
	go func() {
		done <- db.Update(context.Background(), func(tx *chain.Tx) error {
			once.Do(func() { close(running) })
			<-released
			_, err := tx.Append(chain.Request{Chain: "blocker", Type: "t"})
			return err
		})
	}()
	<-running
	return func() {
		close(released)
		if err := <-done; err != nil {
			t.Errorf("blocking update: %v", err)
		}
	}
}

// waitQueued gives n goroutines that are about to call Update time to queue.
// Only the grouping depends on it; every assertion holds whatever the timing.
func waitQueued(started *atomic.Int64, n int64) {
	for started.Load() < n {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
}

// One Update that fails after writing, and one that panics after writing,
// share a group commit with good Updates: the good ones commit all their
// entries, the failing ones none.
func TestGroupCommitIsolatesAFailingUpdate(t *testing.T) {
	metrics := &countingMetrics{}
	forEachBackend(t, chain.Options{Metrics: metrics}, func(t *testing.T, db *chain.DB) {
		metrics.groupSizeMax.Store(0) // the metrics are shared by the backends
		ctx := context.Background()
		errRefused := errors.New("refused after writing")
		const good = 6
		rerunSeen := false
		for round := 0; round < 20 && !rerunSeen; round++ {
			held := chain.Request{Chain: "shared", IdempotencyKey: fmt.Sprintf("held-%d", round), Type: "t"}
			mustAppend(t, db, held)
			before := takeSnapshot(t, db)
			release := blockCommitter(t, db)
			var started atomic.Int64
			var runs [good]atomic.Int64
			results := make([][]chain.Result, good)
			errs := make([]error, good+3)
			var panicValue any
			var wg sync.WaitGroup
			for i := range good {
				wg.Add(1)
				go func() {
					defer wg.Done()
					started.Add(1)
					errs[i] = db.Update(ctx, func(tx *chain.Tx) error {
						runs[i].Add(1)
						results[i] = results[i][:0]
						for _, ch := range []string{fmt.Sprintf("own-%d", i), "shared"} {
							res, err := tx.Append(chain.Request{Chain: ch, IdempotencyKey: fmt.Sprintf("r%d-g%d", round, i), Type: "t"})
							if err != nil {
								return err
							}
							results[i] = append(results[i], res)
						}
						return tx.StatePut(fmt.Appendf(nil, "good/%d/%d", round, i), []byte("v"))
					})
				}()
			}
			wg.Add(3)
			go func() { // fails after writing to three chains and the state
				defer wg.Done()
				started.Add(1)
				errs[good] = db.Update(ctx, func(tx *chain.Tx) error {
					for _, ch := range []string{"shared", "own-0", "bad"} {
						if _, err := tx.Append(chain.Request{Chain: ch, IdempotencyKey: fmt.Sprintf("r%d-bad", round), Type: "t"}); err != nil {
							return err
						}
					}
					tx.StatePut([]byte("bad"), []byte("v"))
					return errRefused
				})
			}()
			go func() { // panics after writing
				defer wg.Done()
				defer func() { panicValue = recover() }()
				started.Add(1)
				errs[good+1] = db.Update(ctx, func(tx *chain.Tx) error {
					tx.Append(chain.Request{Chain: "shared", Type: "panic"})
					panic("boom")
				})
			}()
			go func() { // conflicts without writing
				defer wg.Done()
				started.Add(1)
				conflicting := held
				conflicting.Type = "other"
				errs[good+2] = db.Update(ctx, func(tx *chain.Tx) error {
					_, err := tx.Append(conflicting)
					return err
				})
			}()
			waitQueued(&started, good+3)
			release()
			wg.Wait()

			if !errors.Is(errs[good], errRefused) {
				t.Fatalf("failing update: %v", errs[good])
			}
			if panicValue != "boom" {
				t.Fatalf("panicking update recovered %v", panicValue)
			}
			if !errors.Is(errs[good+2], chain.ErrIdempotencyConflict) {
				t.Fatalf("conflicting update: %v", errs[good+2])
			}
			for i := range good {
				if errs[i] != nil {
					t.Fatalf("good update %d: %v", i, errs[i])
				}
				if runs[i].Load() > 1 {
					rerunSeen = true
				}
				for _, res := range results[i] {
					got, err := db.Get(ctx, res.Entry.Chain, res.Entry.Seq)
					if err != nil || got.Hash != res.Entry.Hash || res.Replayed {
						t.Fatalf("good update %d: result %+v, stored %+v %v", i, res, got, err)
					}
				}
			}
			after := takeSnapshot(t, db)
			added := 0
			for ch, entries := range after.Entries {
				for _, e := range entries[len(before.Entries[ch]):] {
					added++
					if ch == "bad" || e.Type == "panic" || e.IdempotencyKey == fmt.Sprintf("r%d-bad", round) {
						t.Fatalf("entry of a failed update committed: %+v", e)
					}
				}
			}
			// good*2 entries and the blocker's.
			if added != good*2+1 {
				t.Fatalf("round %d: %d entries added, want %d", round, added, good*2+1)
			}
			if _, ok := after.State["bad"]; ok {
				t.Fatal("state of a failed update committed")
			}
			for i := range good {
				if _, ok := after.State[fmt.Sprintf("good/%d/%d", round, i)]; !ok {
					t.Fatalf("state of good update %d missing", i)
				}
			}
			assertVerifies(t, db)
		}
		if !rerunSeen {
			t.Fatal("no good update ran twice: the failing update never shared a group with one")
		}
		if metrics.groupSizeMax.Load() < 2 {
			t.Fatalf("largest group %d: appends were never grouped", metrics.groupSizeMax.Load())
		}
	})
}

// Two requests with one key in the same group yield one entry.
func TestGroupCommitSameKeyInOneGroup(t *testing.T) {
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		release := blockCommitter(t, db)
		var started atomic.Int64
		results := make([]chain.Result, 8)
		var wg sync.WaitGroup
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				started.Add(1)
				var err error
				results[i], err = db.Append(context.Background(), chain.Request{Chain: "c", IdempotencyKey: "k", Type: "t", Payload: []byte("p")})
				if err != nil {
					t.Error(err)
				}
			}()
		}
		waitQueued(&started, int64(len(results)))
		release()
		wg.Wait()
		created := 0
		for _, res := range results {
			if res.Entry.Seq != 1 || res.Entry.Hash != results[0].Entry.Hash {
				t.Fatalf("results differ: %+v vs %+v", res, results[0])
			}
			if !res.Replayed {
				created++
			}
		}
		if created != 1 {
			t.Fatalf("%d callers created the entry", created)
		}
		if head, _ := db.Head(context.Background(), "c"); head.Seq != 1 {
			t.Fatalf("head seq %d", head.Seq)
		}
	})
}

// An Update still queued when its context ends returns the context's error
// and its function never runs.
func TestQueuedUpdateCanceled(t *testing.T) {
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		before := takeSnapshot(t, db)
		release := blockCommitter(t, db)
		ctx, cancel := context.WithCancel(context.Background())
		var ran atomic.Bool
		done := make(chan error, 1)
		go func() {
			done <- db.Update(ctx, func(tx *chain.Tx) error {
				ran.Store(true)
				_, err := tx.Append(chain.Request{Chain: "canceled", Type: "t"})
				return err
			})
		}()
		time.Sleep(20 * time.Millisecond) // let it queue; either way it must not run
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("canceled update: %v", err)
		}
		release()
		// The committer has moved past the canceled request: a later Update
		// commits, and the canceled function never ran.
		mustAppend(t, db, chain.Request{Chain: "after", Type: "t"})
		if ran.Load() {
			t.Fatal("the canceled update's function ran")
		}
		after := takeSnapshot(t, db)
		if _, ok := after.Entries["canceled"]; ok {
			t.Fatal("the canceled update wrote")
		}
		if len(after.Heads) != len(before.Heads)+2 {
			t.Fatalf("heads %v", after.Heads)
		}
	})
}

func TestAppendWithCanceledContextWritesNothing(t *testing.T) {
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := db.Append(ctx, chain.Request{Chain: "c", IdempotencyKey: "k", Type: "t"})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("append with a canceled context: %v", err)
		}
		if _, err := db.Head(context.Background(), "c"); !errors.Is(err, chain.ErrNotFound) {
			t.Fatalf("head after a canceled append: %v", err)
		}
	})
}

// A group never takes more than Options.BatchSizeMax requests.
func TestGroupCommitRespectsBatchSizeMax(t *testing.T) {
	metrics := &countingMetrics{}
	forEachBackend(t, chain.Options{BatchSizeMax: 3, Metrics: metrics}, func(t *testing.T, db *chain.DB) {
		metrics.groupSizeMax.Store(0) // the metrics are shared by the backends
		const appenders = 16
		appended := 0
		// Grouping depends on timing; rounds repeat until groups formed.
		for round := 0; round < 10 && metrics.groupSizeMax.Load() < 2; round++ {
			release := blockCommitter(t, db)
			var started atomic.Int64
			var wg sync.WaitGroup
			for i := range appenders {
				wg.Add(1)
				go func() {
					defer wg.Done()
					started.Add(1)
					key := fmt.Sprintf("%d-%d", round, i)
					if _, err := db.Append(context.Background(), chain.Request{Chain: "c", IdempotencyKey: key, Type: "t"}); err != nil {
						t.Error(err)
					}
				}()
			}
			waitQueued(&started, appenders)
			release()
			wg.Wait()
			appended += appenders
			if got := metrics.groupSizeMax.Load(); got > 3 {
				t.Fatalf("a group of %d requests, BatchSizeMax is 3", got)
			}
		}
		if metrics.groupSizeMax.Load() < 2 {
			t.Fatal("appends were never grouped")
		}
		if head, _ := db.Head(context.Background(), "c"); head.Seq != uint64(appended) {
			t.Fatalf("head seq %d, want %d", head.Seq, appended)
		}
	})
}

// Readers run beside the committer: Verify, Export and Entries while
// appends and multi-chain Updates commit always see whole transactions.
func TestReadersDuringWrites(t *testing.T) {
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		done := make(chan struct{})
		var writers sync.WaitGroup
		for w := range 4 {
			writers.Add(1)
			go func() {
				defer writers.Done()
				for i := range 40 {
					err := db.Update(ctx, func(tx *chain.Tx) error {
						for _, ch := range []string{"x", "y"} {
							if _, err := tx.Append(chain.Request{Chain: ch, IdempotencyKey: fmt.Sprintf("w%d-%d", w, i), Type: "t"}); err != nil {
								return err
							}
						}
						return nil
					})
					if err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		go func() { writers.Wait(); close(done) }()
		for finished := false; !finished; {
			select {
			case <-done:
				finished = true
			default:
			}
			err := db.View(ctx, func(tx *chain.Tx) error {
				x, errX := tx.Head("x")
				y, errY := tx.Head("y")
				if (errX == nil) != (errY == nil) || x.Seq != y.Seq {
					return fmt.Errorf("half of an Update visible: x %+v %v, y %+v %v", x, errX, y, errY)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			report, err := db.Verify(ctx, chain.VerifyOptions{})
			if err != nil || !report.OK() {
				t.Fatalf("verify during writes: %+v %v", report, err)
			}
		}
		if head, _ := db.Head(ctx, "y"); head.Seq != 160 {
			t.Fatalf("y head seq %d", head.Seq)
		}
	})
}
