package client_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/client"
)

// TestLoadBounded drives a served ledger from 32 callers over loopback
// with a mix of new appends over 8 chains, retries of finished intents
// (each must replay its first answer) and head reads, until it has sent
// its requests or its time budget ends, whichever comes first. It checks
// that every acknowledged append is in its chain exactly once, at the seq
// it was answered with. CLIENT_LOAD_REQUESTS and
// CLIENT_LOAD_BUDGET_SECONDS enlarge it (defaults 2,000 and 3).
func TestLoadBounded(t *testing.T) {
	t.Parallel()
	requests := envInt(t, "CLIENT_LOAD_REQUESTS", 2000)
	budget := time.Duration(envInt(t, "CLIENT_LOAD_BUDGET_SECONDS", 3)) * time.Second
	const callers, chains = 32, 8
	s, _, token := startLedger(t)
	c := newClient(t, s.URL, token, client.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	start := time.Now()

	type done struct {
		chain, key string
		req        api.AppendRequest
		res        api.AppendResponse
	}
	var mu sync.Mutex
	var finished []done
	var sent, replays, reads atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for w := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 25))
			for sent.Add(1) <= int64(requests) && ctx.Err() == nil {
				switch r := rng.IntN(10); {
				case r == 0: // a read
					if _, err := c.Head(ctx, fmt.Sprintf("load/c%d", rng.IntN(chains))); err != nil && client.ErrorCode(err) != api.CodeNotFound && ctx.Err() == nil {
						errs <- err
						return
					}
					reads.Add(1)
				case r == 1: // the retry of a finished intent
					mu.Lock()
					if len(finished) == 0 {
						mu.Unlock()
						continue
					}
					d := finished[rng.IntN(len(finished))]
					mu.Unlock()
					var info client.ResponseInfo
					res, err := c.AppendEntry(ctx, d.chain, d.req, client.WithIdempotencyKey(d.key), client.WithResponseInfo(&info))
					if ctx.Err() != nil {
						return
					}
					if err != nil || res != d.res || !info.Replayed {
						errs <- fmt.Errorf("retry of %s: %+v (replayed %v), %v; first answer %+v", d.key, res, info.Replayed, err, d.res)
						return
					}
					replays.Add(1)
				default: // a new intent
					d := done{chain: fmt.Sprintf("load/c%d", rng.IntN(chains)),
						req: api.AppendRequest{Type: "load/v1", Payload: fmt.Appendf(nil, `{"caller":%d,"n":%d}`, w, rng.Uint64())}}
					var info client.ResponseInfo
					res, err := c.AppendEntry(ctx, d.chain, d.req, client.WithResponseInfo(&info))
					if ctx.Err() != nil {
						return // the budget ended the call; its outcome is unknown
					}
					if err != nil {
						errs <- err
						return
					}
					d.key, d.res = info.Key, res
					mu.Lock()
					finished = append(finished, d)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d appends, %d replays, %d reads in %v", len(finished), replays.Load(), reads.Load(), time.Since(start).Round(time.Millisecond))
	if len(finished) == 0 {
		t.Fatal("no append finished")
	}
	check := context.Background()
	bySeq := map[string]map[uint64]done{}
	for _, d := range finished {
		if bySeq[d.chain] == nil {
			bySeq[d.chain] = map[uint64]done{}
		}
		if prev, dup := bySeq[d.chain][d.res.Seq]; dup {
			t.Fatalf("keys %s and %s both answered %s seq %d", prev.key, d.key, d.chain, d.res.Seq)
		}
		bySeq[d.chain][d.res.Seq] = d
	}
	for name, seqs := range bySeq {
		for seq, d := range seqs {
			e, err := c.Entry(check, name, seq)
			if err != nil || e.IdempotencyKey == "" || e.Hash != d.res.Hash || string(e.Payload) != string(d.req.Payload) {
				t.Fatalf("%s seq %d: %+v, %v; want the payload of key %s", name, seq, e, err, d.key)
			}
		}
	}
	report, err := c.Verify(check, api.VerifyRequest{})
	if err != nil || !report.OK {
		t.Fatalf("verify: %+v, %v", report, err)
	}
}

func envInt(t testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}
