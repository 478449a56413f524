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
	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/storagetest"
)

// TestReplaysBesideClose replays from 4 goroutines while the DB closes, on
// every backend (bbolt's replays take no lock, PostgreSQL's hold Close off
// with the DB's lock): every answer is the key's entry, Replayed, or
// ErrClosed, and a replay that begins after Close returned is ErrClosed.
// Under -race it checks the unlocked path's reads against Close.
func TestReplaysBesideClose(t *testing.T) {
	const keys, callers, before = 64, 4, 200
	for _, f := range storagetest.Factories(t) {
		t.Run(f.Name, func(t *testing.T) {
			ctx := context.Background()
			db, err := chain.OpenBackend(f.Open(t), chain.Options{Clock: testClock()})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			requests := make([]chain.Request, keys)
			seqs := make([]uint64, keys)
			for i := range requests {
				requests[i] = chain.Request{Chain: "c", IdempotencyKey: fmt.Sprint("k", i), Type: "t", Payload: []byte(fmt.Sprint("p", i))}
				seqs[i] = mustAppend(t, db, requests[i]).Entry.Seq
			}
			var closedReturned atomic.Bool
			var started sync.WaitGroup
			started.Add(callers)
			errs := make(chan error, callers)
			for c := range callers {
				go func() {
					replays := 0
					for i := c; ; i++ {
						if replays == before {
							started.Done()
						}
						after := closedReturned.Load()
						req := requests[i%keys]
						res, err := db.Append(ctx, req)
						switch {
						case errors.Is(err, chain.ErrClosed):
							if replays < before {
								started.Done()
							}
							errs <- nil
							return
						case err != nil:
							errs <- fmt.Errorf("replay of %s beside Close: %v", req.IdempotencyKey, err)
						case after:
							errs <- fmt.Errorf("replay of %s begun after Close returned: %+v, want ErrClosed", req.IdempotencyKey, res)
						case !res.Replayed || res.Entry.Seq != seqs[i%keys] || string(res.Entry.Payload) != string(req.Payload):
							errs <- fmt.Errorf("replay of %s beside Close: %+v", req.IdempotencyKey, res)
						default:
							replays++
							continue
						}
						if replays < before {
							started.Done()
						}
						return
					}
				}()
			}
			started.Wait()
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			closedReturned.Store(true)
			for range callers {
				if err := <-errs; err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// gatedReader is a backend whose next ReadKey, once armed, waits for a
// gate before it reads, and that says whether its ReadKey may run beside
// Close.
type gatedReader struct {
	storage.Backend
	besideClose bool
	armed       atomic.Bool
	entered     chan struct{}
	gate        chan struct{}
}

func (g *gatedReader) ReadKey(ctx context.Context, chainID, key string) (uint64, []byte, bool, error) {
	if g.armed.CompareAndSwap(true, false) {
		close(g.entered)
		<-g.gate
	}
	return g.Backend.(storage.KeyReader).ReadKey(ctx, chainID, key)
}

func (g *gatedReader) ReadKeyBesideClose() bool { return g.besideClose }

// TestCloseBesideReplay holds a replay inside ReadKey while the DB
// closes. Over a reader that may run beside Close, Close returns without
// waiting for it, and the replay then answers ErrClosed from the closed
// backend; over one that may not, Close waits until the replay has
// returned its entry.
func TestCloseBesideReplay(t *testing.T) {
	for _, besideClose := range []bool{true, false} {
		t.Run(fmt.Sprint("besideClose=", besideClose), func(t *testing.T) {
			ctx := context.Background()
			g := &gatedReader{Backend: storagetest.OpenBolt(t), besideClose: besideClose,
				entered: make(chan struct{}), gate: make(chan struct{})}
			db, err := chain.OpenBackend(g, chain.Options{Clock: testClock()})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			req := chain.Request{Chain: "c", IdempotencyKey: "k", Type: "t", Payload: []byte("p")}
			seq := mustAppend(t, db, req).Entry.Seq
			g.armed.Store(true)
			type answer struct {
				res chain.Result
				err error
			}
			replayed := make(chan answer, 1)
			go func() {
				res, err := db.Append(ctx, req)
				replayed <- answer{res, err}
			}()
			<-g.entered
			closed := make(chan error, 1)
			go func() { closed <- db.Close() }()
			if besideClose {
				select {
				case err := <-closed:
					if err != nil {
						t.Fatal(err)
					}
				case <-time.After(30 * time.Second):
					close(g.gate)
					t.Fatal("Close waited for a replay whose reader may run beside it")
				}
				close(g.gate)
				if a := <-replayed; !errors.Is(a.err, chain.ErrClosed) {
					t.Fatalf("replay that read after Close = %+v, %v; want ErrClosed", a.res, a.err)
				}
				return
			}
			select {
			case err := <-closed:
				close(g.gate)
				t.Fatalf("Close returned (%v) while a replay it must wait for was reading", err)
			case <-time.After(50 * time.Millisecond):
			}
			close(g.gate)
			if a := <-replayed; a.err != nil || !a.res.Replayed || a.res.Entry.Seq != seq {
				t.Fatalf("replay that Close waited for = %+v, %v", a.res, a.err)
			}
			if err := <-closed; err != nil {
				t.Fatal(err)
			}
		})
	}
}
