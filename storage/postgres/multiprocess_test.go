package postgres_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage/postgres"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// The child processes of TestMultiProcessAppends read these.
const (
	envChild     = "LEDGER_PG_CHILD"
	envSchema    = "LEDGER_PG_CHILD_SCHEMA"
	envOut       = "LEDGER_PG_CHILD_OUT"
	mpProcesses  = 4
	mpGoroutines = 8
	mpChains     = 4
	mpKeys       = 120 // single appends, each key on chain key%mpChains
	mpPairs      = 40  // two-chain transactions
)

// mpResult is what a child saw for one key.
type mpResult struct {
	Chain    string `json:"chain"`
	Key      string `json:"key"`
	Seq      uint64 `json:"seq"`
	Hash     string `json:"hash"`
	Replayed bool   `json:"replayed"`
	Retries  int    `json:"retries"`
}

func mpChain(i int) string { return fmt.Sprintf("mp/%d", i%mpChains) }

// TestMultiProcessAppends runs several OS processes (this test binary run
// again) that append the same keyed requests to the same chains of one
// database, at once: single appends and two-chain transactions. Each key
// must be stored exactly once, every process must have been handed that
// entry, and every chain must verify.
func TestMultiProcessAppends(t *testing.T) {
	dbURL := pgtest.URL(t)
	schema := pgtest.NewSchema(t, dbURL)
	dir := t.TempDir()

	var cmds []*exec.Cmd
	for p := range mpProcesses {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMultiProcessChild$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), envChild+"="+strconv.Itoa(p), envSchema+"="+schema,
			envOut+"="+filepath.Join(dir, fmt.Sprintf("child-%d.jsonl", p)), pgtest.EnvURL+"="+dbURL)
		out, err := os.Create(filepath.Join(dir, fmt.Sprintf("child-%d.log", p)))
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for p, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			log, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("child-%d.log", p)))
			t.Fatalf("child %d: %v\n%s", p, err, log)
		}
	}

	// What each process was handed, per (chain, key).
	seen := map[[2]string][]mpResult{}
	retries := 0
	for p := range mpProcesses {
		f, err := os.Open(filepath.Join(dir, fmt.Sprintf("child-%d.jsonl", p)))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		n := 0
		for sc.Scan() {
			var r mpResult
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatal(err)
			}
			seen[[2]string{r.Chain, r.Key}] = append(seen[[2]string{r.Chain, r.Key}], r)
			retries += r.Retries
			n++
		}
		f.Close()
		if want := mpKeys + 2*mpPairs; n != want {
			t.Fatalf("child %d reported %d results, want %d", p, n, want)
		}
	}

	ctx := context.Background()
	b, err := postgres.Open(ctx, dbURL, postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	db, err := chain.OpenBackend(b, chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	// Exactly one entry per key: each chain holds as many entries as keys.
	perChain := map[string]int{}
	for ck := range seen {
		perChain[ck[0]]++
	}
	total := 0
	for c, n := range perChain {
		h, err := db.Head(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if h.Seq != uint64(n) {
			t.Errorf("chain %s has %d entries for %d keys", c, h.Seq, n)
		}
		total += n
	}
	if want := mpKeys + 2*mpPairs; total != want {
		t.Fatalf("%d keys stored, want %d", total, want)
	}
	// Every process was handed the stored entry.
	for ck, rs := range seen {
		e, err := db.Lookup(ctx, ck[0], ck[1])
		if err != nil {
			t.Fatalf("lookup %v: %v", ck, err)
		}
		appended := 0
		for _, r := range rs {
			if r.Seq != e.Seq || r.Hash != e.Hash.String() {
				t.Fatalf("%v: a process was handed seq %d %s, stored is seq %d %s", ck, r.Seq, r.Hash, e.Seq, e.Hash)
			}
			if !r.Replayed {
				appended++
			}
		}
		if len(rs) != mpProcesses || appended != 1 {
			t.Fatalf("%v: %d results, %d of them not replays; want %d and 1", ck, len(rs), appended, mpProcesses)
		}
	}
	report, err := db.Verify(ctx, chain.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !report.OK() || report.Entries != int64(total) {
		t.Fatalf("verify: %d entries, failures %v", report.Entries, report.Failures)
	}
	t.Logf("%d processes stored %d entries on %d chains once each; %d transactions were run again after ErrRetryable",
		mpProcesses, total, len(perChain), retries)
}

// TestMultiProcessChild is one process of TestMultiProcessAppends.
func TestMultiProcessChild(t *testing.T) {
	if os.Getenv(envChild) == "" {
		t.Skip("run by TestMultiProcessAppends")
	}
	ctx := context.Background()
	b, err := postgres.Open(ctx, pgtest.URL(t), postgres.Options{Schema: os.Getenv(envSchema)})
	if err != nil {
		t.Fatal(err)
	}
	db, err := chain.OpenBackend(b, chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out, err := os.Create(os.Getenv(envOut))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	var mu sync.Mutex
	enc := json.NewEncoder(out)
	emit := func(r mpResult) {
		mu.Lock()
		defer mu.Unlock()
		if err := enc.Encode(r); err != nil {
			t.Error(err)
		}
	}
	// retry runs op again while it fails with ErrRetryable (a deadlock
	// between processes' group commits, a serialization failure).
	retry := func(op func() error) (int, error) {
		for n := 0; ; n++ {
			err := op()
			if !errors.Is(err, postgres.ErrRetryable) || n == 50 {
				return n, err
			}
			time.Sleep(time.Duration(n+1) * time.Millisecond)
		}
	}

	// Work is spread over goroutines, each process in another order, so
	// that the same keys are in flight in several processes at once.
	child, _ := strconv.Atoi(os.Getenv(envChild))
	work := make(chan int)
	go func() {
		for i := range mpKeys + mpPairs {
			work <- (i + child*37) % (mpKeys + mpPairs)
		}
		close(work)
	}()
	var wg sync.WaitGroup
	for range mpGoroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if i < mpKeys {
					req := chain.Request{Chain: mpChain(i), IdempotencyKey: fmt.Sprintf("op-%d", i),
						Type: "test/v1", Payload: []byte(fmt.Sprintf("payload %d", i))}
					var res chain.Result
					n, err := retry(func() (err error) { res, err = db.Append(ctx, req); return err })
					if err != nil {
						t.Errorf("append %s: %v", req.IdempotencyKey, err)
						continue
					}
					emit(mpResult{req.Chain, req.IdempotencyKey, res.Entry.Seq, res.Entry.Hash.String(), res.Replayed, n})
					continue
				}
				// A transfer-like pair: both halves or neither.
				p := i - mpKeys
				reqs := []chain.Request{
					{Chain: mpChain(p), IdempotencyKey: fmt.Sprintf("pair-%d:out", p), Type: "test/v1", Payload: []byte("out")},
					{Chain: mpChain(p + 1), IdempotencyKey: fmt.Sprintf("pair-%d:in", p), Type: "test/v1", Payload: []byte("in")},
				}
				var res [2]chain.Result
				n, err := retry(func() error {
					return db.Update(ctx, func(tx *chain.Tx) error {
						for j, r := range reqs {
							var err error
							if res[j], err = tx.Append(r); err != nil {
								return err
							}
						}
						return nil
					})
				})
				if err != nil {
					t.Errorf("pair %d: %v", p, err)
					continue
				}
				if res[0].Replayed != res[1].Replayed {
					t.Errorf("pair %d: one half replayed, the other appended", p)
				}
				for j, r := range reqs {
					emit(mpResult{r.Chain, r.IdempotencyKey, res[j].Entry.Seq, res[j].Entry.Hash.String(), res[j].Replayed, n})
				}
			}
		}()
	}
	wg.Wait()
}
