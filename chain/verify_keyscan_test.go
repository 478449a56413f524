package chain_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// keyedLedger is a bbolt ledger whose idempotency index has several runs
// (merged and not) and recent keys, built once and copied per test.
type keyedLedger struct {
	path string
	// unkeyed are seqs of chain "big" without a key; runKey and recentKey
	// name keys of "big" in a run and in the recent keys, with their seqs.
	unkeyed           []uint64
	runKey, recentKey string
	runSeq, recentSeq uint64
	last              uint64 // the last seq of "big"
	transactions      int    // one entry of "small" each
}

const (
	keyedLedgerBig   = "big"
	keyedLedgerSmall = "small"
)

// keyedLedgerTemplate is the built ledger's file, kept in memory so that
// each test starts from a copy.
var keyedLedgerTemplate struct {
	data []byte
	l    keyedLedger
}

// newKeyedLedger copies the template ledger into a test folder.
func newKeyedLedger(t *testing.T) keyedLedger {
	t.Helper()
	if keyedLedgerTemplate.data == nil {
		l := buildKeyedLedger(t, filepath.Join(t.TempDir(), "template.db"))
		data, err := os.ReadFile(l.path)
		if err != nil {
			t.Fatal(err)
		}
		keyedLedgerTemplate.data, keyedLedgerTemplate.l = data, l
	}
	l := keyedLedgerTemplate.l
	l.path = filepath.Join(t.TempDir(), "ledger.db")
	if err := os.WriteFile(l.path, keyedLedgerTemplate.data, 0o600); err != nil {
		t.Fatal(err)
	}
	return l
}

// buildKeyedLedger writes the ledger at path.
func buildKeyedLedger(t *testing.T, path string) keyedLedger {
	t.Helper()
	// Committed straight to the file: the ledger must hold the index as
	// many small commits lay it out (recent keys and runs of several
	// levels), where a checkpoint of the log writes a table's keys as one run.
	backend, err := bolt.Open(path, bolt.Options{Log: bolt.LogOff})
	if err != nil {
		t.Fatal(err)
	}
	db, err := chain.OpenBackend(backend, chain.Options{Clock: testClock()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	l := keyedLedger{path: path}
	next := uint64(1)
	appendBig := func(tx *chain.Tx, n int) error {
		for range n {
			key := ""
			if next%10 != 0 {
				key = fmt.Sprintf("op-%d", next)
			} else {
				l.unkeyed = append(l.unkeyed, next)
			}
			if _, err := tx.Append(chain.Request{Chain: keyedLedgerBig, IdempotencyKey: key, Type: "t/v1", Payload: fmt.Appendf(nil, "%d", next)}); err != nil {
				return err
			}
			next++
		}
		return nil
	}
	// Nine large transactions write nine runs of their own, eight of them
	// merged; small ones (too few keys for a run of their own, with the
	// small chain's key) fill the recent keys past their capacity once; the
	// last few stay recent.
	small := bolt.KeyRunDirectMin - 2
	smallTransactions := bolt.KeyRecentMax/(small*9/10+1) + 2
	for _, batch := range []struct{ transactions, entries int }{{9, 400}, {smallTransactions, small}, {4, small}} {
		for range batch.transactions {
			err := db.Update(ctx, func(tx *chain.Tx) error {
				if err := appendBig(tx, batch.entries); err != nil {
					return err
				}
				_, err := tx.Append(chain.Request{Chain: keyedLedgerSmall, IdempotencyKey: fmt.Sprintf("s-%d", next), Type: "t/v1"})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	l.last = next - 1
	l.transactions = 9 + smallTransactions + 4
	l.runSeq, l.recentSeq = 1001, l.last-3
	l.runKey, l.recentKey = fmt.Sprintf("op-%d", l.runSeq), fmt.Sprintf("op-%d", l.recentSeq)
	return l
}

func (l keyedLedger) tamper(t *testing.T, edit func(btx *bbolt.Tx) error) {
	t.Helper()
	bdb, err := bbolt.Open(l.path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	if err := bdb.Update(edit); err != nil {
		t.Fatal(err)
	}
}

func (l keyedLedger) verify(t *testing.T) chain.Report {
	t.Helper()
	return tamperLedger{path: l.path}.verify(t, chain.VerifyOptions{})
}

// TestVerifyKeyedLedgerIsClean: thousands of keys in merged runs, unmerged
// runs and recent keys verify without a failure, and the ledger does hold
// its keys in all of these places.
func TestVerifyKeyedLedgerIsClean(t *testing.T) {
	l := newKeyedLedger(t)
	report := l.verify(t)
	assertFailures(t, report.Failures)
	if report.Entries != int64(l.last)+int64(l.transactions) || l.last < 5000 {
		t.Fatalf("verified %d entries; big ends at %d", report.Entries, l.last)
	}
	l.tamper(t, func(btx *bbolt.Tx) error {
		runs, levels := 0, map[byte]int{}
		err := btx.Bucket(bolt.BucketKeyRuns).ForEach(func(name, v []byte) error {
			if v == nil {
				runs++
				levels[name[0]]++
			}
			return nil
		})
		if err != nil {
			return err
		}
		if runs < 3 || len(levels) < 2 {
			t.Errorf("%d key runs in %d levels, want runs of several levels", runs, len(levels))
		}
		if seq, err := bolt.KeySeq(btx, keyedLedgerBig, l.recentKey); err != nil || seq != l.recentSeq {
			t.Errorf("recent key: seq %d, %v", seq, err)
		}
		id, err := bolt.ChainID(btx, keyedLedgerBig)
		if err != nil {
			return err
		}
		if btx.Bucket(bolt.BucketKeys).Get(append(binary.BigEndian.AppendUint64(nil, id), l.recentKey...)) == nil {
			t.Errorf("key %q is not among the recent keys", l.recentKey)
		}
		if btx.Bucket(bolt.BucketKeys).Get(append(binary.BigEndian.AppendUint64(nil, id), l.runKey...)) != nil {
			t.Errorf("key %q is among the recent keys, want it in a run", l.runKey)
		}
		return nil
	})
}

// TestVerifyKeyRecordNamingAnEntryWithoutTheKey: records that name entries
// without a key, in the recent keys and in a run, and a record that names
// seq 0, are reported at the seq they name.
func TestVerifyKeyRecordNamingAnEntryWithoutTheKey(t *testing.T) {
	l := newKeyedLedger(t)
	first, second, third := l.unkeyed[3], l.unkeyed[5], l.unkeyed[len(l.unkeyed)-1]
	l.tamper(t, func(btx *bbolt.Tx) error {
		if err := bolt.AddKeyRecord(btx, keyedLedgerBig, "ghost", first); err != nil { // a new recent key
			return err
		}
		// A key added twice: to the recent keys, then to a run.
		if err := bolt.AddKeyRecord(btx, keyedLedgerBig, "ghost-twice", second); err != nil {
			return err
		}
		if err := bolt.AddKeyRecord(btx, keyedLedgerBig, "ghost-twice", third); err != nil {
			return err
		}
		return bolt.AddKeyRecord(btx, keyedLedgerSmall, "nowhere", 0)
	})
	report := l.verify(t)
	assertFailures(t, report.Failures,
		failureKey{keyedLedgerBig, first, chain.ReasonKeyIndexMismatch},
		failureKey{keyedLedgerBig, second, chain.ReasonKeyIndexMismatch},
		failureKey{keyedLedgerBig, third, chain.ReasonKeyIndexMismatch},
		failureKey{keyedLedgerSmall, 0, chain.ReasonKeyIndexMismatch})
	for _, f := range report.Failures[:3] {
		if !strings.Contains(f.Detail, "which the entry does not hold") {
			t.Errorf("detail %q does not say the entry lacks the key", f.Detail)
		}
	}
}

// TestVerifyKeyRecordMovedToAnotherSeq: a record of a run and a recent one
// pointed at other keyed entries are reported once each, at the entry whose
// key they hold, not again at the seq they name.
func TestVerifyKeyRecordMovedToAnotherSeq(t *testing.T) {
	l := newKeyedLedger(t)
	l.tamper(t, func(btx *bbolt.Tx) error {
		if err := bolt.SetKeySeq(btx, keyedLedgerBig, l.runKey, l.runSeq+1); err != nil {
			return err
		}
		return bolt.SetKeySeq(btx, keyedLedgerBig, l.recentKey, l.unkeyed[0])
	})
	report := l.verify(t)
	assertFailures(t, report.Failures,
		failureKey{keyedLedgerBig, l.runSeq, chain.ReasonKeyIndexMismatch},
		failureKey{keyedLedgerBig, l.recentSeq, chain.ReasonKeyIndexMismatch})
	if want := fmt.Sprintf("the key index maps key %q to seq %d", l.runKey, l.runSeq+1); report.Failures[0].Detail != want {
		t.Errorf("detail %q, want %q", report.Failures[0].Detail, want)
	}
}

// TestVerifyKeyRecordMissing: records removed from a run and from the
// recent keys are reported at their entries.
func TestVerifyKeyRecordMissing(t *testing.T) {
	l := newKeyedLedger(t)
	l.tamper(t, func(btx *bbolt.Tx) error {
		if err := bolt.DeleteKeyRecord(btx, keyedLedgerBig, l.runKey); err != nil {
			return err
		}
		return bolt.DeleteKeyRecord(btx, keyedLedgerBig, l.recentKey)
	})
	report := l.verify(t)
	assertFailures(t, report.Failures,
		failureKey{keyedLedgerBig, l.runSeq, chain.ReasonKeyIndexMismatch},
		failureKey{keyedLedgerBig, l.recentSeq, chain.ReasonKeyIndexMismatch})
	if want := fmt.Sprintf("key %q is not in the key index", l.recentKey); report.Failures[1].Detail != want {
		t.Errorf("detail %q, want %q", report.Failures[1].Detail, want)
	}
}

// TestVerifyKeyRecordRepeated: a record repeated exactly (a run's in the
// recent keys, a recent one in a run) names the right entry every time, so
// only the count differs: the chain is reported as a whole, at seq 0.
func TestVerifyKeyRecordRepeated(t *testing.T) {
	for _, c := range []struct {
		name string
		key  func(l keyedLedger) (string, uint64)
	}{
		{"RunRecordInRecentKeys", func(l keyedLedger) (string, uint64) { return l.runKey, l.runSeq }},
		{"RecentKeyInARun", func(l keyedLedger) (string, uint64) { return l.recentKey, l.recentSeq }},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newKeyedLedger(t)
			key, seq := c.key(l)
			l.tamper(t, func(btx *bbolt.Tx) error { return bolt.AddKeyRecord(btx, keyedLedgerBig, key, seq) })
			report := l.verify(t)
			assertFailures(t, report.Failures, failureKey{keyedLedgerBig, 0, chain.ReasonKeyIndexMismatch})
			if !strings.Contains(report.Failures[0].Detail, "a record is repeated") {
				t.Errorf("detail %q", report.Failures[0].Detail)
			}
		})
	}
}

// TestVerifyKeyRecordPastTheEnd: a record naming a seq past the chain's end
// is what a chain truncated together with its stored head leaves behind; it
// is reported at that seq, not mistaken for a repeated record.
func TestVerifyKeyRecordPastTheEnd(t *testing.T) {
	l := newKeyedLedger(t)
	l.tamper(t, func(btx *bbolt.Tx) error { return bolt.AddKeyRecord(btx, keyedLedgerBig, "later", l.last+1) })
	report := l.verify(t)
	assertFailures(t, report.Failures, failureKey{keyedLedgerBig, l.last + 1, chain.ReasonKeyIndexMismatch})
	if !strings.Contains(report.Failures[0].Detail, "past the chain's end") {
		t.Errorf("detail %q", report.Failures[0].Detail)
	}
}

// TestVerifyManyKeysOnEveryBackend: keys written by large and small
// transactions, with unkeyed entries between them, verify clean on every
// backend.
func TestVerifyManyKeysOnEveryBackend(t *testing.T) {
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		seq := 0
		for _, batch := range []struct{ transactions, entries int }{{3, 600}, {10, 90}, {3, 5}} {
			for range batch.transactions {
				err := db.Update(ctx, func(tx *chain.Tx) error {
					for range batch.entries {
						seq++
						key := fmt.Sprintf("k%d", seq)
						if seq%5 == 0 {
							key = ""
						}
						for _, c := range []string{"x", "y"} {
							if _, err := tx.Append(chain.Request{Chain: c, IdempotencyKey: key, Type: "t/v1"}); err != nil {
								return err
							}
						}
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		if report := assertVerifies(t, db); report.Entries != int64(2*seq) || report.Chains != 2 {
			t.Fatalf("verified %d entries of %d chains, want %d of 2", report.Entries, report.Chains, 2*seq)
		}
	})
}

// TestVerifyKeyRunChunkDamaged: a run chunk whose size is not a whole
// number of records cannot be read; verify stops with an error matching
// ErrCorrupt instead of a report.
func TestVerifyKeyRunChunkDamaged(t *testing.T) {
	l := newKeyedLedger(t)
	l.tamper(t, func(btx *bbolt.Tx) error {
		runs := btx.Bucket(bolt.BucketKeyRuns)
		name, _ := runs.Cursor().First()
		if name == nil {
			return fmt.Errorf("no key runs")
		}
		run := runs.Bucket(name)
		k, v := run.Cursor().First()
		if len(k) != 8+bolt.KeyDigestSize {
			return fmt.Errorf("first key of run %x is %x, not a chunk", name, k)
		}
		return run.Put(bytes.Clone(k), append(bytes.Clone(v), 0))
	})
	db, err := chain.Open(l.path, chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	report, err := verifyEachWay(t, db, context.Background(), chain.VerifyOptions{})
	if !errors.Is(err, chain.ErrCorrupt) {
		t.Fatalf("verify: %v (failures %v), want an error matching ErrCorrupt", err, report.Failures)
	}
}
