package chain_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// crashChildEnv carries the ledger path to the child process of TestCrash.
const crashChildEnv = "LEDGER_CRASH_TEST_CHILD"

// Chains the crash child writes.
var crashMultiChains = []string{"multi-1", "multi-2", "multi-3"}

// crashBulkSize is the number of entries of one large Update of the crash
// child: more than a key index writes to its recent keys one by one.
const crashBulkSize = 300

// TestCrashChildProcess is the child of TestCrash: it appends until it is
// killed and prints each acknowledged entry as
// "ACK <chain> <seq> <hash> <key or ->". It does nothing in a normal run.
func TestCrashChildProcess(t *testing.T) {
	path := os.Getenv(crashChildEnv)
	if path == "" {
		t.Skip("the child process of TestCrash")
	}
	db, err := chain.Open(path, chain.Options{LockTimeout: 10 * time.Second})
	if err != nil {
		fmt.Println("ERR open:", err)
		os.Exit(3)
	}
	ctx := context.Background()
	var mu sync.Mutex // one whole line per write
	ack := func(e chain.Entry) {
		key := e.IdempotencyKey
		if key == "" {
			key = "-"
		}
		mu.Lock()
		fmt.Fprintf(os.Stdout, "ACK %s %d %s %s\n", e.Chain, e.Seq, e.Hash, key)
		mu.Unlock()
	}
	fail := func(format string, args ...any) {
		mu.Lock()
		fmt.Fprintf(os.Stdout, "ERR "+format+"\n", args...)
		os.Exit(3)
	}
	fmt.Println("READY")
	var wg sync.WaitGroup
	wg.Add(5)
	go func() { // single appends without a key
		defer wg.Done()
		for i := 0; ; i++ {
			res, err := db.Append(ctx, chain.Request{Chain: "single", Type: "t", Payload: []byte(strconv.Itoa(i))})
			if err != nil {
				fail("single %d: %v", i, err)
			}
			ack(res.Entry)
		}
	}()
	for range 2 { // two appenders racing on the same keys, which every run restarts from
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				key := fmt.Sprintf("k-%d", i)
				res, err := db.Append(ctx, chain.Request{Chain: "keyed", IdempotencyKey: key, Type: "t", Payload: []byte("p-" + key)})
				if err != nil {
					fail("keyed %s: %v", key, err)
				}
				ack(res.Entry)
			}
		}()
	}
	go func() { // large Updates: enough keys to be indexed as sorted runs
		defer wg.Done()
		for i := 0; ; i++ {
			var results []chain.Result
			err := db.Update(ctx, func(tx *chain.Tx) error {
				results = results[:0]
				for j := range crashBulkSize {
					key := fmt.Sprintf("b-%d-%d", i, j)
					res, err := tx.Append(chain.Request{Chain: "bulk", IdempotencyKey: key, Type: "t", Payload: []byte(key)})
					if err != nil {
						return err
					}
					results = append(results, res)
				}
				return nil
			})
			if err != nil {
				fail("bulk %d: %v", i, err)
			}
			for _, res := range results {
				ack(res.Entry)
			}
		}
	}()
	go func() { // multi-chain Updates with one key on every chain
		defer wg.Done()
		for i := 0; ; i++ {
			key := fmt.Sprintf("u-%d", i)
			var results []chain.Result
			err := db.Update(ctx, func(tx *chain.Tx) error {
				var err error
				results = results[:0]
				for _, ch := range crashMultiChains {
					var res chain.Result
					if res, err = tx.Append(chain.Request{Chain: ch, IdempotencyKey: key, Type: "t", Payload: []byte(key)}); err != nil {
						return err
					}
					results = append(results, res)
				}
				return nil
			})
			if err != nil {
				fail("update %s: %v", key, err)
			}
			for _, res := range results {
				ack(res.Entry)
			}
		}
	}()
	wg.Wait()
}

type crashAck struct {
	chain string
	seq   uint64
	hash  string
	key   string
}

// TestCrash kills a writing child process with SIGKILL at random moments and
// checks after each kill that every acknowledged entry survived, the file is
// consistent and the chains verify.
func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test skipped in -short mode")
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	const rounds = 24
	budget := time.Now().Add(20 * time.Second)
	var acks []crashAck
	kills := 0
	for ; kills < rounds; kills++ {
		if kills >= 20 && time.Now().After(budget) {
			break
		}
		fresh := runCrashChild(t, path, rng)
		// Each round checks its own acknowledgements and a sample of the
		// earlier ones; the last round checks them all.
		check := fresh
		for i := kills; i < len(acks); i += 10 {
			check = append(check, acks[i])
		}
		acks = append(acks, fresh...)
		checkAfterCrash(t, path, check)
	}
	checkAfterCrash(t, path, acks)
	if len(acks) == 0 {
		t.Fatal("the child acknowledged nothing in any round")
	}
	t.Logf("%d acknowledged entries survived %d kills", len(acks), kills)
}

// runCrashChild starts the child, kills it after a random delay and returns
// the entries it acknowledged.
func runCrashChild(t *testing.T, path string, rng *rand.Rand) []crashAck {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChildProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	lines := make(chan []string, 1)
	go func() {
		var got []string
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			line := scanner.Text()
			if line == "READY" {
				close(ready)
			}
			got = append(got, line)
		}
		lines <- got
	}()
	// Sometimes kill while the file is still being opened.
	if rng.IntN(6) > 0 {
		select {
		case <-ready:
		case <-time.After(10 * time.Second):
			t.Fatal("the child did not start")
		}
	}
	time.Sleep(time.Duration(rng.IntN(60_000)) * time.Microsecond)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	output := <-lines
	cmd.Wait()
	var acks []crashAck
	for _, line := range output {
		fields := strings.Fields(line)
		switch {
		case len(fields) > 0 && fields[0] == "ERR":
			t.Fatalf("child: %s", line)
		case len(fields) == 5 && fields[0] == "ACK":
			seq, err := strconv.ParseUint(fields[2], 10, 64)
			if err != nil {
				t.Fatalf("child line %q", line)
			}
			key := fields[4]
			if key == "-" {
				key = ""
			}
			acks = append(acks, crashAck{chain: fields[1], seq: seq, hash: fields[3], key: key})
		}
	}
	return acks
}

func checkAfterCrash(t *testing.T, path string, acks []crashAck) {
	t.Helper()
	if _, err := os.Stat(path); os.IsNotExist(err) {
		return // killed before the file was created
	}
	backend, err := bolt.Open(path, bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	if err := backend.Check(); err != nil {
		t.Fatalf("bbolt check after kill: %v", err)
	}
	backend.Close()

	db, err := chain.Open(path, chain.Options{})
	if err != nil {
		t.Fatalf("open after kill: %v", err)
	}
	defer db.Close()
	ctx := context.Background()
	for _, a := range acks {
		e, err := db.Get(ctx, a.chain, a.seq)
		if err != nil || e.Hash.String() != a.hash || e.IdempotencyKey != a.key {
			t.Fatalf("acknowledged %+v: stored %+v %v", a, e, err)
		}
		if a.key == "" {
			continue
		}
		if e, err := db.Lookup(ctx, a.chain, a.key); err != nil || e.Seq != a.seq {
			t.Fatalf("key of acknowledged %+v: lookup %+v %v", a, e, err)
		}
	}
	assertVerifies(t, db) // the stored Merkle trees included
	// Open for writing brought every tree to its chain's head, whatever
	// the kill left of the ranges that lag (treeRangeLagMax).
	if _, err := db.TreeHeads(ctx); err != nil {
		t.Fatalf("tree heads after kill: %v", err)
	}
	keysOf := func(ch string) []string {
		var keys []string
		seen := map[string]bool{}
		for e, err := range db.Entries(ctx, ch, 1) {
			if err != nil {
				t.Fatal(err)
			}
			if e.IdempotencyKey != "" && seen[e.IdempotencyKey] {
				t.Fatalf("chain %s holds key %q twice", ch, e.IdempotencyKey)
			}
			seen[e.IdempotencyKey] = true
			keys = append(keys, e.IdempotencyKey)
		}
		return keys
	}
	keysOf("keyed")
	keysOf("bulk")
	// Every multi-chain Update is whole: the three chains hold the same keys
	// in the same order.
	first := keysOf(crashMultiChains[0])
	for _, ch := range crashMultiChains[1:] {
		if other := keysOf(ch); strings.Join(other, ",") != strings.Join(first, ",") {
			t.Fatalf("multi-chain update half written: %s holds %d entries, %s %d", crashMultiChains[0], len(first), ch, len(other))
		}
	}
}
