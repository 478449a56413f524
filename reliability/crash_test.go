package reliability

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
)

// Crash test parameters.
const (
	crashRounds        = 30                     // LEDGER_CRASH_ROUNDS runs more (crash_engine_test.go)
	crashWorkers       = 4                      // goroutines of the child, so group commits carry several operations
	crashKillDelayMax  = 200 * time.Millisecond // the child is killed at a random moment up to this long after it is ready
	crashEarlyEvery    = 5                      // one round in this many is killed counting from the child's start
	crashEarlyDelayMax = 80 * time.Millisecond  // … at a random moment up to this long after it starts
	crashChildLifetime = 20 * time.Second       // a child that is never killed gives up
)

// Environment of the crash child.
const (
	crashPathEnvironment  = "LEDGER_RELIABILITY_PATH"
	crashRoundEnvironment = "LEDGER_RELIABILITY_ROUND"
	crashRetryEnvironment = "LEDGER_RELIABILITY_RETRY"
)

// crashOperation is one kind of operation the crash child runs. Every
// operation is identified by an id; run must be idempotent for one id (a
// retry after a crash replays what was written), and parts reports which of
// the operation's writes the ledger holds, so that a half-written operation
// shows as a mix of true and false.
type crashOperation struct {
	kind  string
	run   func(ctx context.Context, db *chain.DB, id string) error
	parts func(ctx context.Context, db *chain.DB, id string) ([]bool, error)
}

// crashSetups run in the child before any operation (definitions the
// operations need); each must write nothing when its work is done already.
var crashSetups []func(ctx context.Context, db *chain.DB) error

// crashOperations lists the operation kinds; the domain packages' kinds are
// added by crash_domain_test.go.
var crashOperations = []crashOperation{rawUpdateOperation()}

// crashChecks are the derived-state checks run after each round, by name.
var crashChecks = map[string]func(ctx context.Context, db *chain.DB) ([]chain.Failure, error){
	"raw": rawCheck,
}

// rawChainCount is how many chains the raw multi-chain operations spread over.
const rawChainCount = 6

func rawChain(i int) string { return crashChain("raw", i) }

// crashChain names chain i of a crash operation kind's domain.
func crashChain(domain string, i int) string {
	name, err := chain.ScopedName("crash", domain, "chain-"+strconv.Itoa(i))
	if err != nil {
		panic(err)
	}
	return name
}

// rawChains returns the two to four chains operation id writes to, derived
// from the id so that the parent can find them again.
func rawChains(id string) []string {
	h := fnv.New64a()
	h.Write([]byte(id))
	sum := h.Sum64()
	n := 2 + int(sum%3)
	var chains []string
	for i := range rawChainCount {
		if (sum>>(8+i))&1 == 1 || rawChainCount-i <= n-len(chains) {
			chains = append(chains, rawChain(i))
		}
		if len(chains) == n {
			break
		}
	}
	return chains
}

// rawCountKey holds the number of entries of a chain, kept by the raw
// operation in the same transaction as its entries: derived state that must
// always equal the chain's head seq.
func rawCountKey(chainName string) []byte { return []byte("raw/crash/count/" + chainName) }

// rawOperationKey records that an operation committed, beside its entries.
func rawOperationKey(id string) []byte { return []byte("raw/crash/op/" + id) }

// rawUpdateOperation appends one entry to each of two to four chains, keyed
// by the operation id, and updates a per-chain counter and an operation
// record in the state keyspace, all in one Update.
func rawUpdateOperation() crashOperation {
	return crashOperation{
		kind: "update",
		run: func(ctx context.Context, db *chain.DB, id string) error {
			return db.Update(ctx, func(tx *chain.Tx) error {
				chains := rawChains(id)
				for _, c := range chains {
					res, err := tx.Append(chain.Request{Chain: c, IdempotencyKey: id, Type: "crash.raw/v1",
						Payload: []byte(id + " -> " + c)})
					if err != nil {
						return err
					}
					count := binary.BigEndian.AppendUint64(nil, res.Entry.Seq)
					if h, err := tx.Head(c); err == nil {
						count = binary.BigEndian.AppendUint64(nil, h.Seq)
					}
					if err := tx.StatePut(rawCountKey(c), count); err != nil {
						return err
					}
				}
				return tx.StatePut(rawOperationKey(id), []byte(strings.Join(chains, ",")))
			})
		},
		parts: func(ctx context.Context, db *chain.DB, id string) ([]bool, error) {
			var parts []bool
			err := db.View(ctx, func(tx *chain.Tx) error {
				for _, c := range rawChains(id) {
					_, err := tx.Lookup(c, id)
					if err != nil && !errors.Is(err, chain.ErrNotFound) {
						return err
					}
					parts = append(parts, err == nil)
				}
				_, err := tx.StateGet(rawOperationKey(id))
				if err != nil && !errors.Is(err, chain.ErrNotFound) {
					return err
				}
				parts = append(parts, err == nil)
				return nil
			})
			return parts, err
		},
	}
}

// rawCheck compares the raw operations' derived state with the chains: each
// counter equals its chain's head seq, and every key of a chain is held by
// exactly one entry.
func rawCheck(ctx context.Context, db *chain.DB) ([]chain.Failure, error) {
	var failures []chain.Failure
	err := db.View(ctx, func(tx *chain.Tx) error {
		for i := range rawChainCount {
			c := rawChain(i)
			head, err := tx.Head(c)
			if errors.Is(err, chain.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			v, err := tx.StateGet(rawCountKey(c))
			if err != nil {
				return fmt.Errorf("counter of %s: %w", c, err)
			}
			if len(v) != 8 || binary.BigEndian.Uint64(v) != head.Seq {
				failures = append(failures, chain.Failure{Chain: c, Seq: head.Seq, Reason: chain.ReasonStateMismatch,
					Detail: fmt.Sprintf("counter %x, head seq %d", v, head.Seq)})
			}
			keys := map[string]uint64{}
			for e, err := range tx.Entries(c, 1) {
				if err != nil {
					return err
				}
				if first, ok := keys[e.IdempotencyKey]; ok || e.IdempotencyKey == "" {
					failures = append(failures, chain.Failure{Chain: c, Seq: e.Seq, Reason: chain.ReasonStateMismatch,
						Detail: fmt.Sprintf("key %q written twice (first at seq %d)", e.IdempotencyKey, first)})
				}
				keys[e.IdempotencyKey] = e.Seq
			}
		}
		return nil
	})
	return failures, err
}

// crashChild is the child process: it opens the ledger, retries the
// operations the previous round left unacknowledged, then runs random
// operations from several goroutines until it is killed. It prints
// "begin KIND ID" before and "ack KIND ID" after each operation.
func crashChild() int {
	path := os.Getenv(crashPathEnvironment)
	round, _ := strconv.Atoi(os.Getenv(crashRoundEnvironment))
	time.AfterFunc(crashChildLifetime, func() { os.Exit(3) })
	ctx := context.Background()
	db, err := chain.Open(path, chain.Options{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "open: %v\n", err)
		return 1
	}
	var printMutex sync.Mutex
	say := func(format string, args ...any) {
		printMutex.Lock()
		defer printMutex.Unlock()
		fmt.Fprintf(os.Stdout, format+"\n", args...) // one write per line
	}
	kinds := map[string]crashOperation{}
	for _, op := range crashOperations {
		kinds[op.kind] = op
	}
	for _, setup := range crashSetups {
		if err := setup(ctx, db); err != nil {
			fmt.Fprintf(os.Stderr, "setup: %v\n", err)
			return 1
		}
	}
	say("ready")
	runOne := func(op crashOperation, id string) bool {
		say("begin %s %s", op.kind, id)
		if err := op.run(ctx, db, id); err != nil {
			fmt.Fprintf(os.Stderr, "%s %s: %v\n", op.kind, id, err)
			return false
		}
		say("ack %s %s", op.kind, id)
		return true
	}
	if retry := os.Getenv(crashRetryEnvironment); retry != "" {
		for _, item := range strings.Split(retry, ",") {
			kind, id, _ := strings.Cut(item, " ")
			if !runOne(kinds[kind], id) {
				return 1
			}
		}
	}
	var wg sync.WaitGroup
	failed := make(chan struct{}, crashWorkers)
	for w := range crashWorkers {
		wg.Go(func() {
			random := rand.New(rand.NewPCG(uint64(round), uint64(w)))
			for n := 0; ; n++ {
				op := crashOperations[random.IntN(len(crashOperations))]
				if !runOne(op, fmt.Sprintf("r%d-w%d-%d", round, w, n)) {
					failed <- struct{}{}
					return
				}
			}
		})
	}
	<-failed
	return 1
}

// crashRecord is what the parent learned of one operation from the child.
type crashRecord struct {
	kind, id string
	acked    bool
}

// TestCrashAtomicity kills a child process that runs multi-chain
// transactions and domain operations at random moments, over many rounds on
// one file. After every round: each acknowledged operation is whole, no
// operation is partly written, every chain verifies and every derived-state
// check agrees with the chains. Unacknowledged operations are retried by the
// next child with the same ids, which must neither lose nor duplicate them.
func TestCrashAtomicity(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("crash rounds take several seconds")
	}
	path := filepath.Join(t.TempDir(), "ledger.db")
	random := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 9))
	ctx := context.Background()
	var retry []crashRecord
	stats := struct{ rounds, acked, begun, retried, killedBeforeReady int }{}
	ackedByKind := map[string]int{}
	started := time.Now()
	rounds := crashRoundCount(t)
	var entries int64
	for round := range rounds {
		// One round in crashEarlyEvery is killed at a random moment of its
		// start (opening, definitions, retries), the others while they run
		// operations.
		afterReady := round%crashEarlyEvery != 0
		delay := time.Duration(random.Int64N(int64(crashKillDelayMax)))
		if !afterReady {
			delay = time.Duration(random.Int64N(int64(crashEarlyDelayMax)))
		}
		records, ready := runCrashRound(t, path, round, retry, afterReady, delay)
		stats.rounds++
		if !ready {
			stats.killedBeforeReady++
		}
		stats.retried += len(retry)
		db, err := chain.Open(path, chain.Options{})
		if err != nil {
			t.Fatalf("round %d: reopen after SIGKILL: %v", round, err)
		}
		retry = retry[:0]
		for _, r := range records {
			stats.begun++
			op := operationOf(t, r.kind)
			parts, err := op.parts(ctx, db, r.id)
			if err != nil {
				t.Fatalf("round %d: %s %s: %v", round, r.kind, r.id, err)
			}
			all, none := !slices.Contains(parts, false), !slices.Contains(parts, true)
			switch {
			case !all && !none:
				t.Errorf("round %d: %s %s is half written: parts %v", round, r.kind, r.id, parts)
			case r.acked && !all:
				t.Errorf("round %d: %s %s was acknowledged and is lost: parts %v", round, r.kind, r.id, parts)
			}
			if r.acked {
				stats.acked++
				ackedByKind[r.kind]++
			} else {
				retry = append(retry, r)
			}
		}
		assertVerifies(t, db)
		for name, check := range crashChecks {
			failures, err := check(ctx, db)
			if err != nil {
				t.Fatalf("round %d: check %s: %v", round, name, err)
			}
			for _, f := range failures {
				t.Errorf("round %d: check %s: %v", round, name, f)
			}
		}
		if round == rounds-1 {
			ledger, err := db.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			entries = ledger.Entries
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	t.Logf("crash: %d rounds killed with SIGKILL (%d before the ledger was open) and survived in %v; %d operations begun, %d acknowledged (by kind %v), %d retried after a kill; %d entries in the ledger; nothing lost, written twice or half written",
		stats.rounds, stats.killedBeforeReady, time.Since(started).Round(time.Millisecond), stats.begun, stats.acked, ackedByKind, stats.retried, entries)
}

// runCrashRound starts a child, kills it after delay and returns what it
// reported. ready is false when it was killed before it opened the ledger.
// With afterReady the delay counts from the moment the child has opened the
// ledger and set up its definitions, else from its start.
func runCrashRound(t *testing.T, path string, round int, retry []crashRecord, afterReady bool, delay time.Duration) (records []crashRecord, ready bool) {
	t.Helper()
	var retryItems []string
	for _, r := range retry {
		retryItems = append(retryItems, r.kind+" "+r.id)
	}
	cmd := child(t, childCrash,
		crashPathEnvironment+"="+path,
		crashRoundEnvironment+"="+strconv.Itoa(round),
		crashRetryEnvironment+"="+strings.Join(retryItems, ","))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The retried operations must be checked whatever happens, so they
	// count as begun from the start.
	index := map[string]int{}
	for _, r := range retry {
		index[r.id] = len(records)
		records = append(records, crashRecord{kind: r.kind, id: r.id})
	}
	lines := make(chan []string, 1)
	readySeen := make(chan struct{})
	go func() {
		var got []string
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			if scanner.Text() == "ready" {
				close(readySeen)
			}
			got = append(got, scanner.Text())
		}
		lines <- got
	}()
	if afterReady {
		select {
		case <-readySeen:
		case <-time.After(crashChildLifetime / 2):
			t.Fatalf("round %d: child never opened the ledger:\n%s", round, stderr.String())
		}
	}
	time.Sleep(delay)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill: %v", err)
	}
	err = cmd.Wait()
	got := <-lines
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("round %d: child ended before the kill: %v\n%s", round, err, stderr.String())
	}
	if status, ok := exit.Sys().(syscall.WaitStatus); !ok || !status.Signaled() {
		t.Fatalf("round %d: child ended before the kill: %v\n%s", round, err, stderr.String())
	}
	for _, line := range got {
		fields := strings.Fields(line)
		switch {
		case len(fields) == 1 && fields[0] == "ready":
			ready = true
		case len(fields) == 3 && fields[0] == "begin":
			if _, ok := index[fields[2]]; !ok {
				index[fields[2]] = len(records)
				records = append(records, crashRecord{kind: fields[1], id: fields[2]})
			}
		case len(fields) == 3 && fields[0] == "ack":
			i, ok := index[fields[2]]
			if !ok {
				t.Fatalf("round %d: ack of %s that never began", round, fields[2])
			}
			records[i].acked = true
		default:
			t.Fatalf("round %d: child printed %q", round, line)
		}
	}
	return records, ready
}

func operationOf(t *testing.T, kind string) crashOperation {
	t.Helper()
	for _, op := range crashOperations {
		if op.kind == kind {
			return op
		}
	}
	t.Fatalf("unknown operation kind %q", kind)
	return crashOperation{}
}
