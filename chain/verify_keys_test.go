package chain_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// TestTamperKeyIndexOfLongAndShortChains points index entries at other seqs
// in a chain with enough keys to be checked on the checker's goroutine
// (in a full batch and in the last, partial one) and in a short chain
// checked on the scanning goroutine: each is reported at its entry, and
// nothing else is.
func TestTamperKeyIndexOfLongAndShortChains(t *testing.T) {
	db, path := openFile(t, chain.Options{})
	ctx := context.Background()
	const long, short = "long", "short"
	const entries = 1500 // every third without a key: 1000 keyed entries, two batches
	err := db.Update(ctx, func(tx *chain.Tx) error {
		for i := 1; i <= entries; i++ {
			key := ""
			if i%3 != 0 {
				key = fmt.Sprintf("op-%d", i)
			}
			if _, err := tx.Append(chain.Request{Chain: long, IdempotencyKey: key, Type: "t/v1", Payload: fmt.Appendf(nil, "%d", i)}); err != nil {
				return err
			}
		}
		for i := 1; i <= 3; i++ {
			if _, err := tx.Append(chain.Request{Chain: short, IdempotencyKey: fmt.Sprintf("op-%d", i), Type: "t/v1", Payload: nil}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if report := assertVerifies(t, db); report.Entries != entries+3 {
		t.Fatalf("verified %d entries, want %d", report.Entries, entries+3)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	l := tamperLedger{path: path}
	l.tamper(t, func(r rawLedger) {
		for _, c := range []struct {
			chain string
			seq   uint64
		}{{long, 700}, {long, 1499}, {short, 2}} {
			if err := bolt.SetKeySeq(r.btx, c.chain, fmt.Sprintf("op-%d", c.seq), c.seq-1); err != nil {
				r.t.Fatal(err)
			}
		}
	})
	report := l.verify(t, chain.VerifyOptions{})
	assertFailures(t, report.Failures,
		failureKey{long, 700, chain.ReasonKeyIndexMismatch},
		failureKey{long, 1499, chain.ReasonKeyIndexMismatch},
		failureKey{short, 2, chain.ReasonKeyIndexMismatch})
	if want := `the key index maps key "op-700" to seq 699`; report.Failures[0].Detail != want {
		t.Errorf("detail %q, want %q", report.Failures[0].Detail, want)
	}
}

// TestTamperHeadTime changes only the time of a chain's stored head: the
// entries are intact, the head is reported.
func TestTamperHeadTime(t *testing.T) {
	l := newTamperLedger(t)
	last := l.entries["a"][len(l.entries["a"])-1]
	l.tamper(t, func(r rawLedger) {
		changed := last
		changed.TimeUnixNano += 1
		r.setHead(changed)
	})
	assertFailures(t, l.verify(t, chain.VerifyOptions{}).Failures, failureKey{"a", last.Seq, chain.ReasonHeadMismatch})
}

// TestVerifyKeyIndexOnEveryBackend: a chain with enough keys for the key
// workers verifies clean on every backend, and its keys were all looked up
// (a request with one of them replays).
func TestVerifyKeyIndexOnEveryBackend(t *testing.T) {
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		const keyed = 1200
		err := db.Update(ctx, func(tx *chain.Tx) error {
			for i := 1; i <= keyed; i++ {
				if _, err := tx.Append(chain.Request{Chain: "c", IdempotencyKey: fmt.Sprintf("k%d", i), Type: "t/v1"}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if report := assertVerifies(t, db); report.Entries != keyed {
			t.Fatalf("verified %d entries, want %d", report.Entries, keyed)
		}
		res, err := db.Append(ctx, chain.Request{Chain: "c", IdempotencyKey: "k1000", Type: "t/v1"})
		if err != nil || !res.Replayed || res.Entry.Seq != 1000 {
			t.Fatalf("retry of k1000: %+v, %v; want seq 1000 replayed", res, err)
		}
	})
}
