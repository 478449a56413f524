package outbox_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/outbox"
)

// ListDeadPage, page by page, lists what ListDead lists, in its order,
// each dead letter once, whatever the page size; a page's From that was
// requeued since still marks its place.
func TestListDeadPages(t *testing.T) {
	clock := newTestClock()
	forEachBackend(t, clock.Now, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		policy := outbox.Policy{MaxAttempts: 1}
		for _, topic := range []string{"b", "a"} {
			for i := range 5 {
				enqueue(t, db, outbox.EnqueueRequest{Tenant: "acme", Topic: topic, IdempotencyKey: fmt.Sprint(topic, i)})
			}
			c := claim(t, db, "acme", topic, outbox.ClaimOptions{Worker: "w", Max: 10, Now: clock.Now(), Policy: policy})
			var outs []outbox.Outcome
			for _, l := range c.Leases {
				outs = append(outs, outcomeOf(l, fmt.Errorf("refused: %w", outbox.ErrPermanent)))
			}
			record(t, db, "acme", topic, outbox.RecordOptions{Worker: "w", Now: clock.Now(), Policy: policy}, outs...)
		}
		all, err := outbox.ListDead(ctx, db, "acme", "")
		if err != nil || len(all) != 10 {
			t.Fatalf("ListDead: %d letters, %v", len(all), err)
		}
		for _, per := range []int{1, 3, 4, 10, 11} {
			var got []outbox.ID
			var from outbox.ID
			for pages := 0; ; pages++ {
				n := 0
				page, next, err := outbox.ListDeadPage(ctx, db, "acme", outbox.DeadOptions{From: from,
					Fits: func(outbox.Info) bool { n++; return n <= per }})
				if err != nil || len(page) == 0 || len(page) > per || pages > 10 {
					t.Fatalf("%d a page, page %d: %d letters, %v", per, pages, len(page), err)
				}
				for _, i := range page {
					got = append(got, i.Message.ID)
				}
				if next == (outbox.ID{}) {
					break
				}
				from = next
			}
			if len(got) != len(all) {
				t.Fatalf("%d a page: %d letters, want %d", per, len(got), len(all))
			}
			for i := range got {
				if got[i] != all[i].Message.ID {
					t.Fatalf("%d a page: letter %d is %s, want %s", per, i, got[i], all[i].Message.ID)
				}
			}
		}
		// The next page's first is requeued: the page from it starts where it was.
		_, next, err := outbox.ListDeadPage(ctx, db, "acme", outbox.DeadOptions{Fits: func(outbox.Info) bool { return false }})
		if err != nil || next != all[1].Message.ID {
			t.Fatalf("next %s %v, want %s", next, err, all[1].Message.ID)
		}
		if err := outbox.Requeue(ctx, db, "acme", []outbox.ID{next}, outbox.RequeueOptions{Operator: "ops"}); err != nil {
			t.Fatal(err)
		}
		page, _, err := outbox.ListDeadPage(ctx, db, "acme", outbox.DeadOptions{From: next})
		if err != nil || len(page) != 8 || page[0].Message.ID != all[2].Message.ID {
			t.Fatalf("from a requeued letter: %d letters, %v", len(page), err)
		}
		mustCheck(t, db)
	})
}
