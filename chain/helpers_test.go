package chain_test

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/chain/chaintest"
	"github.com/ledgerworks/ledger/storage/storagetest"
)

// clockStart is the first time a test clock returns.
var clockStart = time.Unix(1_764_000_000, 0).UTC()

// testClock returns a clock that starts at clockStart and advances one
// millisecond per reading, so entry times are distinct and reproducible.
func testClock() func() time.Time {
	var readings atomic.Int64
	return func() time.Time {
		return clockStart.Add(time.Duration(readings.Add(1)) * time.Millisecond)
	}
}

// forEachBackend runs fn once per registered storage backend with a fresh,
// empty DB that is closed at cleanup.
func forEachBackend(t *testing.T, opts chain.Options, fn func(t *testing.T, db *chain.DB)) {
	t.Helper()
	for _, f := range storagetest.Factories(t) {
		t.Run(f.Name, func(t *testing.T) {
			if opts.Clock == nil {
				opts.Clock = testClock()
			}
			db, err := chain.OpenBackend(f.Open(t), opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			fn(t, db)
		})
	}
}

// openFile opens a fresh bbolt ledger in a temporary folder and returns it
// with its path; it is closed at cleanup.
func openFile(t testing.TB, opts chain.Options) (*chain.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger.db")
	if opts.Clock == nil {
		opts.Clock = testClock()
	}
	db, err := chain.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, path
}

// mustAppend appends and fails the test on error.
func mustAppend(t testing.TB, db *chain.DB, req chain.Request) chain.Result {
	t.Helper()
	res, err := db.Append(context.Background(), req)
	if err != nil {
		t.Fatalf("append %+v: %v", req, err)
	}
	return res
}

// snapshot is everything a DB holds, read back through the public API.
type snapshot = chaintest.Snapshot

// takeSnapshot reads every chain, entry and state pair.
func takeSnapshot(t testing.TB, db *chain.DB) snapshot { return chaintest.TakeSnapshot(t, db) }

// assertUnchanged fails when db no longer holds exactly what before holds.
func assertUnchanged(t testing.TB, db *chain.DB, before snapshot) {
	t.Helper()
	if after := takeSnapshot(t, db); !reflect.DeepEqual(before, after) {
		t.Fatalf("ledger changed:\nbefore %+v\nafter  %+v", before, after)
	}
}

// assertVerifies fails unless Verify finds nothing.
func assertVerifies(t testing.TB, db *chain.DB) chain.Report {
	t.Helper()
	report, err := verifyEachWay(t, db, context.Background(), chain.VerifyOptions{Trees: true})
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if !report.OK() {
		t.Fatalf("verify: %v", report.Failures)
	}
	return report
}

// assertInvalid checks that err is the typed refusal of a request: the
// specific sentinel, ErrInvalid, and an *InvalidError naming the field.
func assertInvalid(t testing.TB, err, sentinel error, field string) {
	t.Helper()
	var invalid *chain.InvalidError
	switch {
	case err == nil:
		t.Fatalf("no error, want %v", sentinel)
	case !errors.Is(err, sentinel):
		t.Fatalf("error %v does not match %v", err, sentinel)
	case !errors.Is(err, chain.ErrInvalid):
		t.Fatalf("error %v does not match ErrInvalid", err)
	case !errors.As(err, &invalid):
		t.Fatalf("error %v is not an *InvalidError", err)
	case invalid.Field != field:
		t.Fatalf("error %v names field %q, want %q", err, invalid.Field, field)
	}
}

// failureKey is the part of a Failure that tests compare exactly.
type failureKey struct {
	Chain  string
	Seq    uint64
	Reason chain.Reason
}

func failureKeys(failures []chain.Failure) []failureKey {
	keys := make([]failureKey, 0, len(failures))
	for _, f := range failures {
		keys = append(keys, failureKey{f.Chain, f.Seq, f.Reason})
	}
	return keys
}

// assertFailures compares failures with want exactly, in order.
func assertFailures(t testing.TB, failures []chain.Failure, want ...failureKey) {
	t.Helper()
	if want == nil {
		want = []failureKey{}
	}
	if got := failureKeys(failures); !reflect.DeepEqual(got, want) {
		t.Fatalf("failures\n got  %v\n want %v\n(%v)", got, want, failures)
	}
}

// appendBigAndSmall appends entries unkeyed entries in one Update: every
// smallEvery-th to chain "small", the others to chain "big".
func appendBigAndSmall(t testing.TB, db *chain.DB, entries, smallEvery int) {
	t.Helper()
	err := db.Update(context.Background(), func(tx *chain.Tx) error {
		for i := range entries {
			ch := "big"
			if i%smallEvery == 0 {
				ch = "small"
			}
			if _, err := tx.Append(chain.Request{Chain: ch, Type: "t"}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
