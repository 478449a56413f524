package financial

import (
	"fmt"
	"sync"
	"testing"

	"github.com/ledgerworks/ledger/chain"
)

// TestConcurrentPostsAndRetries has 64 callers post 4 postings each, every
// posting sent twice, through group commit: each key is written once, the
// balances are exact and Check finds nothing.
func TestConcurrentPostsAndRetries(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *chain.DB) {
		b := mustBook(t, db, "acme", "main")
		chart(t, b)
		const callers, each = 64, 4
		seqs := make([][2 * each]uint64, callers)
		var wg sync.WaitGroup
		for c := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 2 * each {
					key := fmt.Sprintf("c%d-p%d", c, i%each) // the second half retries the first
					res, err := b.Post(ctx, posting(key, "2026-03-01", dr("1400", "1.25", "EUR"), cr("2100", "1.00", "EUR"), cr("3000", "0.25", "EUR")))
					if err != nil {
						t.Error(err)
						return
					}
					if res.Replayed != (i >= each) {
						t.Errorf("%s: replayed %v", key, res.Replayed)
					}
					seqs[c][i] = res.Seq
				}
			}()
		}
		wg.Wait()
		for c := range callers {
			for i := range each {
				if seqs[c][i] != seqs[c][i+each] {
					t.Fatalf("caller %d posting %d: seq %d, retry seq %d", c, i, seqs[c][i], seqs[c][i+each])
				}
			}
		}
		if bal := mustBalance(t, b, "1400", "EUR"); bal.Amount.String() != "320.00" || bal.Postings != callers*each {
			t.Fatalf("balance %+v", bal)
		}
		if h, err := db.Head(ctx, b.Journal()); err != nil || h.Seq != 10+callers*each {
			t.Fatalf("journal head %+v %v", h, err)
		}
		mustCheckClean(t, db)
	})
}
