package chain_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/ledgerworks/ledger/chain"
)

// linkedEntries builds n linked entries of one chain without a database.
func linkedEntries(chainID string, n int) []chain.Entry {
	entries := make([]chain.Entry, n)
	prev := chain.Genesis(chainID)
	for i := range entries {
		e := chain.Entry{Chain: chainID, Seq: uint64(i + 1), PrevHash: prev, TimeUnixNano: int64(i), Type: "t", Payload: []byte{byte(i)}}
		e.Hash = e.ComputeHash()
		entries[i], prev = e, e.Hash
	}
	return entries
}

func TestChainVerifier(t *testing.T) {
	entries := linkedEntries("c", 5)
	run := func(feed func(v *chain.ChainVerifier), stored *chain.Head) ([]chain.Failure, chain.Head) {
		var failures []chain.Failure
		v := chain.NewChainVerifier("c", func(f chain.Failure) { failures = append(failures, f) })
		feed(v)
		v.Finish(stored)
		return failures, v.Last()
	}
	all := func(v *chain.ChainVerifier) {
		for i := range entries {
			v.Entry(&entries[i])
		}
	}
	stored := entries[4].Head()
	failures, last := run(all, &stored)
	assertFailures(t, failures)
	if last != stored {
		t.Fatalf("last %+v, want %+v", last, stored)
	}
	// An empty chain ends at seq 0 with the genesis.
	failures, last = run(func(*chain.ChainVerifier) {}, nil)
	if len(failures) != 0 || last != (chain.Head{Chain: "c", Hash: chain.Genesis("c")}) {
		t.Fatalf("empty: %v %+v", failures, last)
	}
	// A stored head that is ahead of the entries.
	ahead := chain.Head{Chain: "c", Seq: 6, Hash: entries[4].Hash}
	failures, _ = run(all, &ahead)
	assertFailures(t, failures, failureKey{"c", 6, chain.ReasonHeadMismatch})
	// An entry of another chain.
	failures, _ = run(func(v *chain.ChainVerifier) {
		other := linkedEntries("d", 1)[0]
		v.Entry(&entries[0])
		v.Entry(&other)
	}, nil)
	assertFailures(t, failures, failureKey{"c", 1, chain.ReasonSeqGap})
	// An undecodable entry in the middle: the next entry is hashed but its
	// link cannot be checked; an undecodable last entry is compared with the
	// head by seq only.
	failures, last = run(func(v *chain.ChainVerifier) {
		v.Entry(&entries[0])
		v.Undecodable(2, errors.New("cut"))
		v.Entry(&entries[2])
		v.Entry(&entries[3])
		v.Undecodable(5, errors.New("cut"))
	}, &stored)
	assertFailures(t, failures, failureKey{"c", 2, chain.ReasonUndecodable}, failureKey{"c", 5, chain.ReasonUndecodable})
	if last.Seq != 5 {
		t.Fatalf("last %+v", last)
	}
	// An undecodable entry after a gap reports the gap too.
	failures, _ = run(func(v *chain.ChainVerifier) {
		v.Entry(&entries[0])
		v.Undecodable(4, errors.New("cut"))
	}, nil)
	assertFailures(t, failures, failureKey{"c", 2, chain.ReasonSeqGap}, failureKey{"c", 4, chain.ReasonUndecodable})
	// Hash mismatch and broken link carry the stored and computed hashes.
	bad := entries[1]
	bad.PrevHash = chain.Hash{1}
	failures, _ = run(func(v *chain.ChainVerifier) { v.Entry(&entries[0]); v.Entry(&bad) }, nil)
	assertFailures(t, failures, failureKey{"c", 2, chain.ReasonHashMismatch}, failureKey{"c", 2, chain.ReasonBrokenLink})
	if failures[0].Expected != bad.Hash || failures[0].Calculated != bad.ComputeHash() ||
		failures[1].Expected != bad.PrevHash || failures[1].Calculated != entries[0].Hash {
		t.Fatalf("failure hashes %+v", failures)
	}
}

// Reads inside Update see the transaction's own appends.
func TestTxReadsSeeOwnWrites(t *testing.T) {
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		mustAppend(t, db, chain.Request{Chain: "a", Type: "t"})
		err := db.Update(context.Background(), func(tx *chain.Tx) error {
			res, err := tx.Append(chain.Request{Chain: "b", IdempotencyKey: "k", Type: "t", Payload: []byte("p")})
			if err != nil {
				return err
			}
			if h, err := tx.Head("b"); err != nil || h != res.Entry.Head() {
				return fmt.Errorf("head %+v %v", h, err)
			}
			if e, err := tx.Get("b", 1); err != nil || !reflect.DeepEqual(e, res.Entry) {
				return fmt.Errorf("get %+v %v", e, err)
			}
			if e, err := tx.Lookup("b", "k"); err != nil || !reflect.DeepEqual(e, res.Entry) {
				return fmt.Errorf("lookup %+v %v", e, err)
			}
			n := 0
			for e, err := range tx.Entries("b", 1) {
				if err != nil || !reflect.DeepEqual(e, res.Entry) {
					return fmt.Errorf("entries %+v %v", e, err)
				}
				n++
			}
			var chains []string
			for h, err := range tx.Chains("") {
				if err != nil {
					return err
				}
				chains = append(chains, h.Chain)
			}
			if n != 1 || !reflect.DeepEqual(chains, []string{"a", "b"}) {
				return fmt.Errorf("%d entries, chains %v", n, chains)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// Verify of selected chains: only those are read, duplicates once, unknown
// chains are not counted.
func TestVerifySelectedChains(t *testing.T) {
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		for _, ch := range []string{"a", "b", "c"} {
			for range 3 {
				mustAppend(t, db, chain.Request{Chain: ch, Type: "t"})
			}
		}
		report, err := verifyEachWay(t, db, context.Background(), chain.VerifyOptions{Chains: []string{"b", "a", "b", "nope"}})
		if err != nil || !report.OK() || report.Chains != 2 || report.Entries != 6 {
			t.Fatalf("report %+v %v", report, err)
		}
	})
}
