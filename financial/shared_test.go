package financial

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/chain/chaintest"
)

// openShared opens two ledgers on one PostgreSQL schema (chaintest.OpenShared).
var openShared = chaintest.OpenShared

// TestSharedBackendPostings has two ledgers on one PostgreSQL schema post to
// the same accounts of one book, 32 goroutines each, every posting sent
// twice (the retry through the other ledger) and every other one reversed
// through the other ledger. Each write first looks its key up in the
// journal, which on PostgreSQL locks the journal's head before any balance
// is read: each key is written once, every balance equals the sum of the
// journal's lines, the trial balance nets to zero, Check and Verify are
// clean.
func TestSharedBackendPostings(t *testing.T) {
	t.Parallel()
	db1, db2 := openShared(t)
	books := [2]*Book{mustBook(t, db1, "acme", "main"), mustBook(t, db2, "acme", "main")}
	chart(t, books[0])
	const goroutines, each = 32, 2
	var wg sync.WaitGroup
	for p := range books {
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					key := fmt.Sprintf("p%d-g%d-%d", p, g, i)
					want := posting(key, fmt.Sprintf("2026-03-%02d", 1+(g+i)%28),
						dr("1400", "1.25", "EUR"), cr("2100", "1.00", "EUR"), cr("3000", "0.25", "EUR"))
					first, err := books[p].Post(ctx, want)
					if err != nil {
						t.Error(err)
						return
					}
					again, err := books[1-p].Post(ctx, want)
					if err != nil || !again.Replayed || again.Seq != first.Seq {
						t.Errorf("%s: retry through the other ledger: %+v %v", key, again, err)
						return
					}
					if i%2 == 1 {
						if _, err := books[1-p].Reverse(ctx, Reversal{Key: key, Date: MustParseDate("2026-04-01")}); err != nil {
							t.Error(err)
							return
						}
					}
				}
			}()
		}
	}
	wg.Wait()
	const postings, reversals = 2 * goroutines * each, 2 * goroutines * each / 2
	sums := journalSums(t, db1, books[0].Journal())
	for _, account := range []string{"1400", "2100", "3000"} {
		for _, b := range books {
			bal := mustBalance(t, b, account, "EUR")
			if bal.Amount.Units() != sums[account] || bal.Postings != postings+reversals {
				t.Fatalf("account %s: balance %s over %d postings, journal lines sum to %d units over %d",
					account, bal.Amount, bal.Postings, sums[account], postings+reversals)
			}
		}
	}
	if want := int64(125 * (postings - reversals)); sums["1400"] != want {
		t.Fatalf("inventory lines sum to %d units, want %d", sums["1400"], want)
	}
	tb, err := books[1].TrialBalance(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, total := range tb.Totals {
		if !total.Net.IsZero() || total.Debit != total.Credit {
			t.Fatalf("trial balance %+v", total)
		}
	}
	for _, db := range []*chain.DB{db1, db2} {
		mustCheckClean(t, db)
		report, err := db.Verify(ctx, chain.VerifyOptions{})
		if err != nil || !report.OK() || report.Entries < postings+reversals {
			t.Fatalf("verify: %d entries, %v %v", report.Entries, report.Failures, err)
		}
	}
}

// TestSharedBackendCloseRacesPostings closes an account through one ledger
// while the other posts to it: a posting either precedes the closing in the
// journal or is refused with ErrAccountClosed, never follows it.
func TestSharedBackendCloseRacesPostings(t *testing.T) {
	t.Parallel()
	db1, db2 := openShared(t)
	poster, closer := mustBook(t, db1, "acme", "main"), mustBook(t, db2, "acme", "main")
	chart(t, poster)
	var wg sync.WaitGroup
	var closedSeq uint64
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 4 {
				_, err := poster.Post(ctx, posting(fmt.Sprintf("g%d-%d", g, i), "2026-05-01",
					dr("5000", "3", "JPY"), cr("1000", "3", "JPY")))
				if err != nil && !errors.Is(err, ErrAccountClosed) {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(5 * time.Millisecond)
		res, err := closer.CloseAccount(ctx, "5000")
		if err != nil {
			t.Error(err)
		}
		closedSeq = res.Seq
	}()
	wg.Wait()
	if closedSeq == 0 {
		t.Fatal("the account was not closed")
	}
	for e, err := range db1.Entries(ctx, poster.Journal(), closedSeq+1) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == TypePosting {
			t.Fatalf("seq %d: a posting after the closing at seq %d", e.Seq, closedSeq)
		}
	}
	mustCheckClean(t, db2)
}

// journalSums adds up the signed lines of every posting of a journal, in
// EUR minor units, per account.
func journalSums(t *testing.T, db *chain.DB, journal string) map[string]int64 {
	t.Helper()
	sums := map[string]int64{}
	for e, err := range db.Entries(ctx, journal, 1) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Type != TypePosting {
			continue
		}
		p, err := DecodePosting(e.Payload)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range p.Lines {
			sum, ok := addInt64(sums[l.Account], l.signedAmount())
			if !ok {
				t.Fatalf("seq %d: sum overflows", e.Seq)
			}
			sums[l.Account] = sum
		}
	}
	return sums
}
