package apikey

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ledgerworks/ledger/chain"
)

// Check replays the system chain into memory and compares the keys it
// gives with the stored state, in one snapshot: every difference, and
// every entry that does not fit the keys before it, is a failure with
// chain.ReasonStateMismatch. The chain's own hashes are checked by
// chain.DB.Verify; `ledgerctl verify` runs both.
func Check(ctx context.Context, db *chain.DB) ([]chain.Failure, error) {
	var failures []chain.Failure
	err := db.View(ctx, func(tx *chain.Tx) error {
		var err error
		failures, _, err = checkTx(tx, false)
		return err
	})
	return failures, err
}

// RebuildStats is what Rebuild did.
type RebuildStats struct {
	Entries int64 // entries replayed
	Written int64 // state keys written
	Deleted int64 // state keys deleted (the previous state, and stray keys)
	// Failures are entries that do not fit the keys before them; the
	// state is rebuilt without them and Check keeps reporting them.
	Failures []chain.Failure
}

// Rebuild replays the system chain, as Check does, and writes the state it
// gives in place of the stored state, in one write transaction that locks
// the system chain first.
func Rebuild(ctx context.Context, db *chain.DB) (RebuildStats, error) {
	var stats RebuildStats
	err := db.Update(ctx, func(tx *chain.Tx) error {
		if err := lockSystemChain(tx); err != nil {
			return err
		}
		var err error
		_, stats, err = checkTx(tx, true)
		return err
	})
	return stats, err
}

// checkTx replays the system chain and compares (or, with rebuild,
// replaces) the stored state.
func checkTx(tx *chain.Tx, rebuild bool) ([]chain.Failure, RebuildStats, error) {
	var stats RebuildStats
	var failures []chain.Failure
	set := newKeySet()
	for e, err := range tx.Entries(SystemChain, 1) {
		if err != nil {
			return nil, stats, err
		}
		stats.Entries++
		if _, err := set.apply(&e); err != nil {
			failures = append(failures, chain.Failure{Chain: e.Chain, Seq: e.Seq, Reason: chain.ReasonStateMismatch,
				Detail: fmt.Sprintf("apikey entry %s does not fit: %v", e.Type, err)})
		}
		set.advance(&e)
	}
	want := set.state()
	stored := map[string][]byte{}
	for kv, err := range tx.StateScan(statePrefix, prefixEnd(statePrefix), false) {
		if err != nil {
			return nil, stats, err
		}
		stored[string(kv.Key)] = bytes.Clone(kv.Value)
	}
	if rebuild {
		for _, k := range slices.Sorted(maps.Keys(stored)) {
			if err := tx.StateDelete([]byte(k)); err != nil {
				return nil, stats, err
			}
			stats.Deleted++
		}
		for _, k := range slices.Sorted(maps.Keys(want)) {
			if err := tx.StatePut([]byte(k), want[k]); err != nil {
				return nil, stats, err
			}
			stats.Written++
		}
		stats.Failures = failures
		return failures, stats, nil
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		v, ok := stored[k]
		switch {
		case !ok:
			failures = append(failures, stateFailure(k, "missing"))
		case !bytes.Equal(v, want[k]):
			failures = append(failures, stateFailure(k, "differs from the system chain"))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(stored)) {
		if _, ok := want[k]; !ok {
			failures = append(failures, stateFailure(k, "is not derived from any entry"))
		}
	}
	return failures, stats, nil
}

func stateFailure(key, what string) chain.Failure {
	return chain.Failure{Chain: SystemChain, Reason: chain.ReasonStateMismatch,
		Detail: fmt.Sprintf("apikey state key %q %s", printable(key), what)}
}

// printable shows a state key with any byte outside printable ASCII in hex.
func printable(key string) string {
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		if c := key[i]; c >= 0x20 && c < 0x7f {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "\\x%02x", c)
		}
	}
	return b.String()
}
