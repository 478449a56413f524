package financial

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"pgregory.net/rapid"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/chain/chaintest"
)

// rebuildChecks is how many rapid checks the rebuild test runs unless
// -rapid.checks says otherwise, and rebuildRounds how often each check
// damages and rebuilds the state: every round checks and rebuilds the
// whole ledger twice, so they are fewer than the state machine's.
const (
	rebuildChecks = "5"
	rebuildRounds = 2
)

// corruptState damages the state under prefix in one of the ways Rebuild
// repairs, and says how: a stray key (an existing key with a byte more),
// a changed value, a longer value, a deleted key, or all of it deleted.
func corruptState(t *rapid.T, db *chain.DB, prefix string) string {
	return chaintest.CorruptState(t, db, prefix, prefix+"ghost/bal/x")
}

// TestRebuildRestoresModelState runs the book model, then damages its
// state twice (rebuildRounds): each time Check sees the damage, and Rebuild restores
// the state byte for byte as the operations wrote it, so every balance,
// point-in-time balance and trial balance answers as before. A second
// Rebuild changes nothing.
func TestRebuildRestoresModelState(t *testing.T) {
	for _, f := range storagetestFactories(t) {
		t.Run(f.name, func(t *testing.T) {
			if !rapidChecksExplicit() {
				setRapidChecks(t, rebuildChecks)
			}
			db, err := chain.OpenBackend(f.open(t), chain.Options{Clock: testClock()})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			checks := 0
			rapid.Check(t, func(rt *rapid.T) {
				checks++
				tenant := fmt.Sprintf("r%d", checks)
				b := runModel(rt, db, tenant)
				before := snapshot(t, db)
				for range rebuildRounds {
					how := corruptState(rt, db, Domain+"/"+tenant+"/")
					if failures, err := Check(ctx, db); err == nil && len(failures) == 0 {
						rt.Fatalf("%s: check found nothing", how)
					}
					stats, err := Rebuild(ctx, db)
					if err != nil || len(stats.Failures) > 0 {
						rt.Fatalf("%s: rebuild %+v %v", how, stats, err)
					}
					if failures, err := Check(ctx, db); err != nil || len(failures) > 0 {
						rt.Fatalf("%s: check after rebuild: %v %v", how, failures, err)
					}
					if after := snapshot(t, db); after != before {
						rt.Fatalf("%s: state differs after rebuild:\n%s\nwant\n%s", how, after, before)
					}
					again, err := b.Rebuild(ctx)
					if err != nil || again.Transactions != 1 || len(again.Failures) > 0 {
						rt.Fatalf("book rebuild %+v %v", again, err)
					}
					if after := snapshot(t, db); after != before {
						rt.Fatalf("%s: state differs after a second rebuild", how)
					}
				}
			})
		})
	}
}

// TestRebuildWipedBook deletes every state key of a book with closed
// accounts, reversals and postings on several dates, adds stray keys, and
// rebuilds: the state is byte for byte the one the operations wrote.
func TestRebuildWipedBook(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *chain.DB) {
		b := mustBook(t, db, "acme", "main")
		chart(t, b)
		if _, err := b.AddAccount(ctx, Account{Code: "9000", Name: "Suspense", Type: Liability}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.CloseAccount(ctx, "9000"); err != nil {
			t.Fatal(err)
		}
		first, err := b.Post(ctx, posting("p1", "2026-03-10", dr("1400", "100.00", "EUR"), cr("2100", "100.00", "EUR")))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Post(ctx, posting("p2", "2026-01-02", dr("1400", "1.00", "EUR"), cr("2100", "1.00", "EUR"))); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Reverse(ctx, Reversal{Seq: first.Seq, Date: MustParseDate("2026-04-01")}); err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, db)
		wantBalance := mustBalance(t, b, "1400", "EUR")
		err = db.Update(ctx, func(tx *chain.Tx) error {
			var keys [][]byte
			for kv, err := range tx.StateScan(nil, nil, false) {
				if err != nil {
					return err
				}
				keys = append(keys, slices.Clone(kv.Key))
			}
			for _, k := range keys {
				if err := tx.StateDelete(k); err != nil {
					return err
				}
			}
			for _, k := range []string{"fin/acme/ghost/bal/1400/EUR", "fin/x"} {
				if err := tx.StatePut([]byte(k), []byte{1}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		stats, err := Rebuild(ctx, db)
		if err != nil || len(stats.Failures) > 0 || stats.Deleted != 2 || stats.Transactions != 3 {
			t.Fatalf("stats %+v %v", stats, err)
		}
		mustCheckClean(t, db)
		if after := snapshot(t, db); after != before {
			t.Fatalf("state after rebuild:\n%s\nwant\n%s", after, before)
		}
		if got := mustBalance(t, b, "1400", "EUR"); got != wantBalance {
			t.Fatalf("balance %+v, before %+v", got, wantBalance)
		}
	})
}

// TestRebuildWhileOthersPost rebuilds over and over while 16 goroutines
// post to one book: each book's rebuild is one transaction that locks its
// journal, as every posting does, so no posting interleaves with it and the
// state ends as the postings wrote it. On PostgreSQL the rebuild runs
// through a second ledger on the same schema, as another process would.
func TestRebuildWhileOthersPost(t *testing.T) {
	t.Run("bolt", func(t *testing.T) {
		db, err := chain.OpenBackend(openBoltInMemoryFolder(t), chain.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		rebuildWhilePosting(t, db, db)
	})
	t.Run("postgres", func(t *testing.T) {
		writer, rebuilder := openShared(t)
		rebuildWhilePosting(t, writer, rebuilder)
	})
}

func rebuildWhilePosting(t *testing.T, writer, rebuilder *chain.DB) {
	b := mustBook(t, writer, "acme", "main")
	chart(t, b)
	const goroutines, each = 16, 4
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				p := posting(fmt.Sprintf("g%d-%d", g, i), fmt.Sprintf("2026-03-%02d", 1+(g+i)%28),
					dr("1400", "1.25", "EUR"), cr("2100", "1.00", "EUR"), cr("3000", "0.25", "EUR"))
				if err := chaintest.RetryRolledBack(func() error { _, err := b.Post(ctx, p); return err }); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	rebuilds := 0
	for done := false; !done; rebuilds++ {
		select {
		case <-finished:
			done = true
		default:
		}
		if err := chaintest.RetryRolledBack(func() error { _, err := Rebuild(ctx, rebuilder); return err }); err != nil {
			t.Fatal(err)
		}
	}
	mustCheckClean(t, writer)
	want := int64(goroutines * each * 125)
	if got := mustBalance(t, mustBook(t, rebuilder, "acme", "main"), "1400", "EUR"); got.Amount.Units() != want || got.Postings != goroutines*each {
		t.Fatalf("balance %+v after %d rebuilds, want %d minor units over %d postings", got, rebuilds, want, goroutines*each)
	}
}
