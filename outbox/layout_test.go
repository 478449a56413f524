package outbox_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/outbox"
)

// An outbox written before ready keys carried their message's record holds
// the id alone as a ready key's value. Such state still checks, its
// messages are claimed and delivered (the records read by their keys), and
// rebuild-state rewrites the values in full.
func TestReadyKeysOfThePreviousLayout(t *testing.T) {
	clock := newTestClock()
	forEachBackend(t, clock.Now, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		for i := range 5 {
			enqueue(t, db, outbox.EnqueueRequest{Tenant: "acme", Topic: "email", IdempotencyKey: fmt.Sprint("inv-", i),
				Payload: []byte(fmt.Sprint(`{"invoice":`, i, `}`))})
		}
		ready := []byte("outbox/acme/r/email/")
		readyValues := func() (full, idOnly int) {
			t.Helper()
			err := db.View(ctx, func(tx *chain.Tx) error {
				for kv, err := range tx.StateScan(ready, append(bytes.Clone(ready[:len(ready)-1]), '0'), false) {
					if err != nil {
						return err
					}
					if len(kv.Value) == outbox.IDSize {
						idOnly++
					} else {
						full++
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			return full, idOnly
		}
		if full, idOnly := readyValues(); full != 5 || idOnly != 0 {
			t.Fatalf("after the enqueues: %d ready values with records, %d without; want 5 and 0", full, idOnly)
		}
		// Write the previous layout: each ready key valued its id alone.
		err := db.Update(ctx, func(tx *chain.Tx) error {
			var keys, ids [][]byte
			for kv, err := range tx.StateScan(ready, append(bytes.Clone(ready[:len(ready)-1]), '0'), false) {
				if err != nil {
					return err
				}
				keys, ids = append(keys, bytes.Clone(kv.Key)), append(ids, bytes.Clone(kv.Value[:outbox.IDSize]))
			}
			for i := range keys {
				if err := tx.StatePut(keys[i], ids[i]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if full, idOnly := readyValues(); full != 0 || idOnly != 5 {
			t.Fatalf("rewritten: %d ready values with records, %d without; want 0 and 5", full, idOnly)
		}
		mustCheck(t, db)
		c := claim(t, db, "acme", "email", outbox.ClaimOptions{Worker: "w1", Max: 2, Now: clock.Now()})
		if len(c.Leases) != 2 || string(c.Leases[0].Message.Payload) != `{"invoice":0}` || c.Leases[1].Message.IdempotencyKey != "inv-1" {
			t.Fatalf("claim of the previous layout: %+v", c)
		}
		if errs := record(t, db, "acme", "email", outbox.RecordOptions{Worker: "w1", Now: clock.Now()},
			outcomeOf(c.Leases[0], nil), outcomeOf(c.Leases[1], fmt.Errorf("503"))); errs[0] != nil || errs[1] != nil {
			t.Fatalf("record: %v", errs)
		}
		mustCheck(t, db) // the failed one's ready key is new: it carries its record
		if full, idOnly := readyValues(); full != 1 || idOnly != 3 {
			t.Fatalf("after a delivery and a failure: %d ready values with records, %d without; want 1 and 3", full, idOnly)
		}
		if _, err := outbox.Rebuild(ctx, db); err != nil {
			t.Fatal(err)
		}
		if full, idOnly := readyValues(); full != 4 || idOnly != 0 {
			t.Fatalf("rebuilt: %d ready values with records, %d without; want 4 and 0", full, idOnly)
		}
		mustCheck(t, db)
		c = claim(t, db, "acme", "email", outbox.ClaimOptions{Worker: "w1", Max: 10, Now: clock.Now()})
		if len(c.Leases) != 3 || c.Leases[0].Message.IdempotencyKey != "inv-2" {
			t.Fatalf("claim after the rebuild: %+v", c)
		}
		mustCheck(t, db)
	})
}
