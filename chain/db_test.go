package chain_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage/bolt"
)

func TestAppendBuildsALinkedChain(t *testing.T) {
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		prev := chain.Genesis("c")
		var prevTime int64
		for i := range 5 {
			req := chain.Request{Chain: "c", IdempotencyKey: fmt.Sprintf("k%d", i), Type: "t/v1", Payload: []byte{byte(i)}}
			res := mustAppend(t, db, req)
			e := res.Entry
			if e.Chain != "c" || e.Seq != uint64(i+1) || e.PrevHash != prev || e.IdempotencyKey != req.IdempotencyKey ||
				e.Type != req.Type || !bytes.Equal(e.Payload, req.Payload) || e.Hash != e.ComputeHash() || e.TimeUnixNano <= prevTime {
				t.Fatalf("entry %d: %+v", i, e)
			}
			got, err := db.Get(ctx, "c", e.Seq)
			if err != nil || !reflect.DeepEqual(got, e) {
				t.Fatalf("get %d: %+v %v", e.Seq, got, err)
			}
			head, err := db.Head(ctx, "c")
			if err != nil || head != e.Head() {
				t.Fatalf("head %+v %v, want %+v", head, err, e.Head())
			}
			prev, prevTime = e.Hash, e.TimeUnixNano
		}
	})
}

func TestAppendCopiesThePayload(t *testing.T) {
	db, _ := openFile(t, chain.Options{})
	payload := []byte("abc")
	res := mustAppend(t, db, chain.Request{Chain: "c", Type: "t", Payload: payload})
	payload[0] = 'X'
	if string(res.Entry.Payload) != "abc" {
		t.Fatalf("result aliases the caller's payload: %q", res.Entry.Payload)
	}
	assertVerifies(t, db)
}

func TestEntryTimesNeverDecrease(t *testing.T) {
	now := clockStart
	db, _ := openFile(t, chain.Options{Clock: func() time.Time { return now }})
	first := mustAppend(t, db, chain.Request{Chain: "c", Type: "t"}).Entry
	now = now.Add(-time.Hour)
	second := mustAppend(t, db, chain.Request{Chain: "c", Type: "t"}).Entry
	if second.TimeUnixNano != first.TimeUnixNano {
		t.Fatalf("time went from %d to %d", first.TimeUnixNano, second.TimeUnixNano)
	}
	other := mustAppend(t, db, chain.Request{Chain: "other", Type: "t"}).Entry
	if other.TimeUnixNano != now.UnixNano() {
		t.Fatalf("a new chain takes the clock's time: %d, want %d", other.TimeUnixNano, now.UnixNano())
	}
	now = now.Add(2 * time.Hour)
	third := mustAppend(t, db, chain.Request{Chain: "c", Type: "t"}).Entry
	if third.TimeUnixNano != now.UnixNano() {
		t.Fatalf("time %d, want the clock's %d", third.TimeUnixNano, now.UnixNano())
	}
	assertVerifies(t, db)
}

func TestReadsOfMissingThings(t *testing.T) {
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		mustAppend(t, db, chain.Request{Chain: "c", IdempotencyKey: "k", Type: "t"})
		for name, err := range map[string]error{
			"head of unknown chain":   func() error { _, err := db.Head(ctx, "nope"); return err }(),
			"get of unknown chain":    func() error { _, err := db.Get(ctx, "nope", 1); return err }(),
			"get of seq 0":            func() error { _, err := db.Get(ctx, "c", 0); return err }(),
			"get past the head":       func() error { _, err := db.Get(ctx, "c", 2); return err }(),
			"lookup of unknown key":   func() error { _, err := db.Lookup(ctx, "c", "other"); return err }(),
			"lookup of empty key":     func() error { _, err := db.Lookup(ctx, "c", ""); return err }(),
			"lookup on unknown chain": func() error { _, err := db.Lookup(ctx, "nope", "k"); return err }(),
		} {
			if !errors.Is(err, chain.ErrNotFound) {
				t.Errorf("%s: %v, want ErrNotFound", name, err)
			}
		}
		for e, err := range db.Entries(ctx, "nope", 1) {
			t.Fatalf("entries of an unknown chain yielded %+v %v", e, err)
		}
		for e, err := range db.Entries(ctx, "c", 2) {
			t.Fatalf("entries past the head yielded %+v %v", e, err)
		}
		err := db.View(ctx, func(tx *chain.Tx) error {
			head, err := tx.Head("nope")
			if !errors.Is(err, chain.ErrNotFound) {
				return fmt.Errorf("tx head: %v", err)
			}
			if want := (chain.Head{Chain: "nope", Hash: chain.Genesis("nope")}); head != want {
				return fmt.Errorf("empty head %+v, want %+v", head, want)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// Entries and Chains read in pages of 1024; more than two pages check that
// they resume where they stopped.
func TestEntriesAndChainsAcrossPages(t *testing.T) {
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		const entries, chains = 2049, 1025
		err := db.Update(ctx, func(tx *chain.Tx) error {
			for i := range entries {
				if _, err := tx.Append(chain.Request{Chain: "long", Type: "t", Payload: []byte(fmt.Sprint(i))}); err != nil {
					return err
				}
			}
			for i := range chains {
				if _, err := tx.Append(chain.Request{Chain: fmt.Sprintf("m%05d", i), Type: "t"}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, from := range []uint64{0, 1, 1024, 1025, 2048, 2049, 2050} {
			next := max(from, 1)
			for e, err := range db.Entries(ctx, "long", from) {
				if err != nil || e.Seq != next || string(e.Payload) != fmt.Sprint(next-1) {
					t.Fatalf("from %d: entry %+v %v, want seq %d", from, e, err, next)
				}
				next++
			}
			if next != entries+1 {
				t.Fatalf("from %d: ended before seq %d", from, next)
			}
		}
		// Stopping early is honoured.
		n := 0
		for range db.Entries(ctx, "long", 1) {
			if n++; n == 1500 {
				break
			}
		}
		var names []string
		for h, err := range db.Chains(ctx, "") {
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, h.Chain)
		}
		if len(names) != chains+1 || names[0] != "long" || names[1] != "m00000" || names[chains] != fmt.Sprintf("m%05d", chains-1) {
			t.Fatalf("%d chains, first %q last %q", len(names), names[0], names[len(names)-1])
		}
		var from []string
		for h, err := range db.Chains(ctx, "m01000") {
			if err != nil {
				t.Fatal(err)
			}
			from = append(from, h.Chain)
		}
		if len(from) != 25 || from[0] != "m01000" {
			t.Fatalf("chains from m01000: %d, first %v", len(from), from[:1])
		}
		stats, err := db.Stats(ctx)
		if err != nil || stats.Chains != chains+1 || stats.Entries != entries+chains || stats.SizeBytes <= 0 {
			t.Fatalf("stats %+v %v", stats, err)
		}
		report := assertVerifies(t, db)
		if report.Chains != chains+1 || report.Entries != entries+chains {
			t.Fatalf("verify counted %d chains %d entries", report.Chains, report.Entries)
		}
	})
}

func TestUpdateIsAllOrNothing(t *testing.T) {
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		mustAppend(t, db, chain.Request{Chain: "a", IdempotencyKey: "k", Type: "t"})
		err := db.Update(ctx, func(tx *chain.Tx) error {
			return tx.StatePut([]byte("s/1"), []byte("v1"))
		})
		if err != nil {
			t.Fatal(err)
		}
		before := takeSnapshot(t, db)
		errStop := errors.New("business rule refused")
		err = db.Update(ctx, func(tx *chain.Tx) error {
			for _, ch := range []string{"a", "b", "c"} {
				if _, err := tx.Append(chain.Request{Chain: ch, IdempotencyKey: "new", Type: "t"}); err != nil {
					return err
				}
			}
			if err := tx.StatePut([]byte("s/1"), []byte("changed")); err != nil {
				return err
			}
			if err := tx.StatePut([]byte("s/2"), []byte("v2")); err != nil {
				return err
			}
			return fmt.Errorf("halfway: %w", errStop)
		})
		if !errors.Is(err, errStop) {
			t.Fatalf("update: %v, want the function's error", err)
		}
		assertUnchanged(t, db, before)

		// The same Update without the error commits everything at once.
		var results []chain.Result
		err = db.Update(ctx, func(tx *chain.Tx) error {
			results = results[:0]
			for _, ch := range []string{"a", "b", "c"} {
				res, err := tx.Append(chain.Request{Chain: ch, IdempotencyKey: "new", Type: "t"})
				if err != nil {
					return err
				}
				results = append(results, res)
			}
			return tx.StatePut([]byte("s/2"), []byte("v2"))
		})
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range []uint64{2, 1, 1} {
			if results[i].Entry.Seq != want {
				t.Fatalf("result %d: %+v", i, results[i])
			}
			got, err := db.Get(ctx, results[i].Entry.Chain, want)
			if err != nil || !reflect.DeepEqual(got, results[i].Entry) {
				t.Fatalf("stored %+v %v", got, err)
			}
		}
		assertVerifies(t, db)
	})
}

func TestUpdatePanicLeavesNothingAndPanicsAgain(t *testing.T) {
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		mustAppend(t, db, chain.Request{Chain: "a", Type: "t"})
		before := takeSnapshot(t, db)
		type boom struct{ n int }
		recovered := func() (p any) {
			defer func() { p = recover() }()
			db.Update(ctx, func(tx *chain.Tx) error {
				tx.Append(chain.Request{Chain: "a", Type: "t"})
				tx.Append(chain.Request{Chain: "b", Type: "t"})
				tx.StatePut([]byte("k"), []byte("v"))
				panic(boom{7})
			})
			return nil
		}()
		if recovered != (boom{7}) {
			t.Fatalf("recovered %v, want the function's panic value", recovered)
		}
		assertUnchanged(t, db, before)
		// A panic before anything is written is raised again too.
		recovered = func() (p any) {
			defer func() { p = recover() }()
			db.Update(ctx, func(tx *chain.Tx) error { panic("early") })
			return nil
		}()
		if recovered != "early" {
			t.Fatalf("recovered %v", recovered)
		}
		assertUnchanged(t, db, before)
		// The committer survived.
		if res := mustAppend(t, db, chain.Request{Chain: "a", Type: "t"}); res.Entry.Seq != 2 {
			t.Fatalf("append after panics: %+v", res)
		}
	})
}

func TestStateIsWrittenWithTheEntries(t *testing.T) {
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		err := db.Update(ctx, func(tx *chain.Tx) error {
			if !tx.Writable() || tx.Context() != ctx {
				return errors.New("update tx is not writable or lost its context")
			}
			for _, k := range []string{"p/a", "p/b", "p/c", "q/a"} {
				if err := tx.StatePut([]byte(k), []byte("v-"+k)); err != nil {
					return err
				}
			}
			if err := tx.StateDelete([]byte("p/b")); err != nil {
				return err
			}
			if err := tx.StateDelete([]byte("p/missing")); err != nil {
				return fmt.Errorf("deleting a missing key: %w", err)
			}
			v, err := tx.StateGet([]byte("p/a"))
			if err != nil || string(v) != "v-p/a" {
				return fmt.Errorf("own write not visible: %q %v", v, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		err = db.View(ctx, func(tx *chain.Tx) error {
			if tx.Writable() {
				return errors.New("view tx is writable")
			}
			if _, err := tx.StateGet([]byte("p/b")); !errors.Is(err, chain.ErrNotFound) {
				return fmt.Errorf("deleted key: %v", err)
			}
			var keys []string
			for kv, err := range tx.StateScan([]byte("p/"), []byte("p0"), false) {
				if err != nil {
					return err
				}
				keys = append(keys, string(kv.Key)+"="+string(kv.Value))
			}
			if strings.Join(keys, ",") != "p/a=v-p/a,p/c=v-p/c" {
				return fmt.Errorf("scan %v", keys)
			}
			keys = keys[:0]
			for kv, err := range tx.StateScan([]byte("p/"), nil, true) {
				if err != nil {
					return err
				}
				keys = append(keys, string(kv.Key))
			}
			if strings.Join(keys, ",") != "q/a,p/c,p/a" {
				return fmt.Errorf("reverse scan %v", keys)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

func TestViewRefusesWrites(t *testing.T) {
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		mustAppend(t, db, chain.Request{Chain: "c", Type: "t"})
		before := takeSnapshot(t, db)
		err := db.View(ctx, func(tx *chain.Tx) error {
			if _, err := tx.Append(chain.Request{Chain: "c", Type: "t"}); !errors.Is(err, chain.ErrReadOnly) {
				return fmt.Errorf("append in view: %v", err)
			}
			if err := tx.StatePut([]byte("k"), []byte("v")); !errors.Is(err, chain.ErrReadOnly) {
				return fmt.Errorf("state put in view: %v", err)
			}
			if err := tx.StateDelete([]byte("k")); !errors.Is(err, chain.ErrReadOnly) {
				return fmt.Errorf("state delete in view: %v", err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		assertUnchanged(t, db, before)
	})
}

func TestReadOnlyDBRefusesWrites(t *testing.T) {
	db, path := openFile(t, chain.Options{})
	mustAppend(t, db, chain.Request{Chain: "c", Type: "t"})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := chain.Open(path, chain.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	before := takeSnapshot(t, ro)
	ctx := context.Background()
	if _, err := ro.Append(ctx, chain.Request{Chain: "c", Type: "t"}); !errors.Is(err, chain.ErrReadOnly) {
		t.Fatalf("append: %v", err)
	}
	if err := ro.Update(ctx, func(tx *chain.Tx) error { return nil }); !errors.Is(err, chain.ErrReadOnly) {
		t.Fatalf("update: %v", err)
	}
	assertUnchanged(t, ro, before)
	assertVerifies(t, ro)

	if _, err := chain.Open(filepath.Join(t.TempDir(), "missing.db"), chain.Options{ReadOnly: true}); !errors.Is(err, chain.ErrNotFound) {
		t.Fatalf("read-only open of a missing file: %v", err)
	}
}

func TestSecondOpenIsLocked(t *testing.T) {
	_, path := openFile(t, chain.Options{})
	_, err := chain.Open(path, chain.Options{LockTimeout: 50 * time.Millisecond})
	if !errors.Is(err, chain.ErrLocked) || !strings.Contains(err.Error(), path) {
		t.Fatalf("second open: %v, want ErrLocked naming %s", err, path)
	}
}

func TestOpenRefusesAFileThatIsNotALedger(t *testing.T) {
	path := filepath.Join(t.TempDir(), "garbage.db")
	db, err := chain.Open(path, chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	for name, content := range map[string][]byte{
		"zeros": make([]byte, 8192),
		"text":  []byte(strings.Repeat("not a ledger\n", 1000)),
	} {
		bad := filepath.Join(t.TempDir(), name+".db")
		if err := os.WriteFile(bad, content, 0o600); err != nil {
			t.Fatal(err)
		}
		if db, err := chain.Open(bad, chain.Options{LockTimeout: -1}); err == nil {
			db.Close()
			t.Fatalf("%s: opened", name)
		} else if errors.Is(err, chain.ErrLocked) {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

func TestClosedDBRefusesEverything(t *testing.T) {
	db, _ := openFile(t, chain.Options{})
	mustAppend(t, db, chain.Request{Chain: "c", IdempotencyKey: "k", Type: "t"})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	ctx := context.Background()
	checks := map[string]error{
		"append": func() error { _, err := db.Append(ctx, chain.Request{Chain: "c", Type: "t"}); return err }(),
		"replay": func() error {
			_, err := db.Append(ctx, chain.Request{Chain: "c", IdempotencyKey: "k", Type: "t"})
			return err
		}(),
		"update":  db.Update(ctx, func(*chain.Tx) error { return nil }),
		"view":    db.View(ctx, func(*chain.Tx) error { return nil }),
		"get":     func() error { _, err := db.Get(ctx, "c", 1); return err }(),
		"head":    func() error { _, err := db.Head(ctx, "c"); return err }(),
		"lookup":  func() error { _, err := db.Lookup(ctx, "c", "k"); return err }(),
		"verify":  func() error { _, err := db.Verify(ctx, chain.VerifyOptions{}); return err }(),
		"stats":   func() error { _, err := db.Stats(ctx); return err }(),
		"export":  func() error { _, err := db.Export(ctx, &bytes.Buffer{}, []string{"c"}, nil); return err }(),
		"entries": func() error { return firstError(db.Entries(ctx, "c", 1)) }(),
		"chains":  func() error { return firstError(db.Chains(ctx, "")) }(),
	}
	for name, err := range checks {
		if !errors.Is(err, chain.ErrClosed) {
			t.Errorf("%s after close: %v, want ErrClosed", name, err)
		}
	}
}

func firstError[T any](seq func(yield func(T, error) bool)) error {
	var first error
	seq(func(_ T, err error) bool { first = err; return false })
	return first
}

func TestCloseWaitsForQueuedUpdates(t *testing.T) {
	db, path := openFile(t, chain.Options{})
	ctx := context.Background()
	const writers = 16
	errs := make(chan error, writers)
	for i := range writers {
		go func() {
			_, err := db.Append(ctx, chain.Request{Chain: "c", IdempotencyKey: fmt.Sprint(i), Type: "t"})
			errs <- err
		}()
	}
	ok := 0
	for range writers {
		if err := <-errs; err == nil {
			ok++
		} else if !errors.Is(err, chain.ErrClosed) {
			t.Fatalf("append during close: %v", err)
		}
		if ok == writers/2 {
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	reopened, err := chain.Open(path, chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	head, _ := reopened.Head(ctx, "c")
	if head.Seq != uint64(ok) {
		t.Fatalf("%d appends succeeded, chain holds %d", ok, head.Seq)
	}
	assertVerifies(t, reopened)
}

func TestBackendIsTheOneGiven(t *testing.T) {
	backend, err := bolt.Open(filepath.Join(t.TempDir(), "l.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db, err := chain.OpenBackend(backend, chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if db.Backend() != backend {
		t.Fatal("Backend returned another store")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := backend.Begin(context.Background(), false); err == nil {
		t.Fatal("Close left the backend open")
	}
}

// A chain's first entry has no predecessor, so it takes the clock's time
// as it is, even before 1970 (historical data loaded with an injected
// clock).
func TestFirstEntryKeepsAClockBefore1970(t *testing.T) {
	before1970 := time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC)
	db, _ := openFile(t, chain.Options{Clock: func() time.Time { return before1970 }})
	e := mustAppend(t, db, chain.Request{Chain: "c", Type: "t"}).Entry
	if e.TimeUnixNano != before1970.UnixNano() {
		t.Fatalf("first entry time %d, want the clock's %d", e.TimeUnixNano, before1970.UnixNano())
	}
	assertVerifies(t, db)
}
