package reliability

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/ledgerworks/ledger/chain"
)

// crashRoundsEnvironment sets how many SIGKILL rounds TestCrashAtomicity
// runs; without it the test runs crashRounds, which keeps CI short.
const crashRoundsEnvironment = "LEDGER_CRASH_ROUNDS"

// crashRoundsLimit bounds LEDGER_CRASH_ROUNDS: a round takes about a
// second, and the file grows with every one.
const crashRoundsLimit = 10_000

// crashRoundCount is how many rounds TestCrashAtomicity runs.
func crashRoundCount(t *testing.T) int {
	text := os.Getenv(crashRoundsEnvironment)
	if text == "" {
		return crashRounds
	}
	n, err := strconv.Atoi(text)
	if err != nil || n < 1 || n > crashRoundsLimit {
		t.Fatalf("%s=%q: want a number of rounds from 1 to %d", crashRoundsEnvironment, text, crashRoundsLimit)
	}
	return n
}

// appendChainCount is how many chains the single and batched appends spread
// over; they are apart from the raw Update chains, whose counters only the
// Update operation keeps.
const appendChainCount = 4

func appendChain(i int) string { return crashChain("append", i) }

// appendChains returns the chains a batch with this id writes to: two or
// three of them, derived from the id. A single append writes the first.
func appendChains(id string) []string {
	sum := idNumber(id)
	n := 2 + int(sum%2)
	chains := make([]string, n)
	for i := range chains {
		chains[i] = appendChain((int(sum>>8) + i) % appendChainCount)
	}
	return chains
}

func crashAppendRequest(c, id string) chain.Request {
	return chain.Request{Chain: c, IdempotencyKey: id, Type: "crash.append/v1", Payload: []byte(id + " -> " + c)}
}

// appendParts reports which of the chains hold an entry keyed id.
func appendParts(ctx context.Context, db *chain.DB, id string, chains []string) ([]bool, error) {
	parts := make([]bool, len(chains))
	for i, c := range chains {
		_, err := db.Lookup(ctx, c, id)
		if err != nil && !errors.Is(err, chain.ErrNotFound) {
			return nil, err
		}
		parts[i] = err == nil
	}
	return parts, nil
}

// singleAppendOperation is one DB.Append, through the group commit.
func singleAppendOperation() crashOperation {
	return crashOperation{
		kind: "append",
		run: func(ctx context.Context, db *chain.DB, id string) error {
			_, err := db.Append(ctx, crashAppendRequest(appendChains(id)[0], id))
			return err
		},
		parts: func(ctx context.Context, db *chain.DB, id string) ([]bool, error) {
			return appendParts(ctx, db, id, appendChains(id)[:1])
		},
	}
}

// batchAppendOperation is one DB.AppendBatch over two or three chains,
// all or nothing.
func batchAppendOperation() crashOperation {
	return crashOperation{
		kind: "batch",
		run: func(ctx context.Context, db *chain.DB, id string) error {
			var reqs []chain.Request
			for _, c := range appendChains(id) {
				reqs = append(reqs, crashAppendRequest(c, id+"-batch"))
			}
			_, err := db.AppendBatch(ctx, reqs, nil)
			return err
		},
		parts: func(ctx context.Context, db *chain.DB, id string) ([]bool, error) {
			return appendParts(ctx, db, id+"-batch", appendChains(id))
		},
	}
}

// appendCheck finds a key held by more than one entry of the append
// chains, or an entry without a key: a retry that wrote twice.
func appendCheck(ctx context.Context, db *chain.DB) ([]chain.Failure, error) {
	var failures []chain.Failure
	for i := range appendChainCount {
		c := appendChain(i)
		keys := map[string]uint64{}
		for e, err := range db.Entries(ctx, c, 1) {
			if errors.Is(err, chain.ErrNotFound) {
				break
			}
			if err != nil {
				return nil, err
			}
			if first, ok := keys[e.IdempotencyKey]; ok || e.IdempotencyKey == "" {
				failures = append(failures, chain.Failure{Chain: c, Seq: e.Seq, Reason: chain.ReasonStateMismatch,
					Detail: fmt.Sprintf("key %q written twice (first at seq %d)", e.IdempotencyKey, first)})
			}
			keys[e.IdempotencyKey] = e.Seq
		}
	}
	return failures, nil
}

func init() {
	crashOperations = append(crashOperations, singleAppendOperation(), batchAppendOperation())
	crashChecks["append"] = appendCheck
}
