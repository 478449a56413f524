package chain

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/ledgerworks/ledger/storage/storagetest"
)

// hashAheadPart is a part of n requests over chains a and b, which hold an
// entry each, and c, which is new.
func hashAheadPart(t *testing.T, n int) (*DB, []Request) {
	t.Helper()
	old := runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0)))
	t.Cleanup(func() { runtime.GOMAXPROCS(old) })
	db, err := OpenBackend(storagetest.Factories(t)[0].Open(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, c := range []string{"a", "b"} {
		if _, err := db.Append(context.Background(), Request{Chain: c, IdempotencyKey: "old", Type: "t/v1"}); err != nil {
			t.Fatal(err)
		}
	}
	part := make([]Request, n)
	for i := range part {
		part[i] = Request{Chain: string(rune('a' + i%3)), IdempotencyKey: fmt.Sprint("k", i), Type: "t/v1", Payload: fmt.Appendf(nil, "p%d", i)}
	}
	return db, part
}

// TestHashAheadSlots checks every slot of a part hashed ahead against the
// entry the request becomes when all before it became new entries, and
// that a slot which assumed another entry is refused and marks the part
// diverged.
func TestHashAheadSlots(t *testing.T) {
	db, part := hashAheadPart(t, hashAheadEntriesMin+44)
	err := db.Update(context.Background(), func(tx *Tx) error {
		h := tx.startHashAhead(part)
		if h == nil {
			return fmt.Errorf("a part of %d requests on 3 chains is not hashed ahead", len(part))
		}
		defer h.finish()
		heads := map[string]Head{}
		for i, r := range part {
			head, ok := heads[r.Chain]
			if !ok {
				var err error
				if head, err = tx.head(r.Chain); err != nil {
					return err
				}
			}
			e := Entry{Chain: r.Chain, Seq: head.Seq + 1, PrevHash: head.Hash, TimeUnixNano: h.now,
				IdempotencyKey: r.IdempotencyKey, Type: r.Type, Payload: r.Payload}
			if head.Seq > 0 {
				e.TimeUnixNano = max(e.TimeUnixNano, head.TimeUnixNano)
			}
			hash, ok := h.hashOf(i, &e)
			if want := e.ComputeHash(); !ok || hash != want {
				return fmt.Errorf("slot %d: %v, %v; want %v, true", i, hash, ok, want)
			}
			e.Hash = hash
			heads[r.Chain] = e.Head()
		}
		last := len(part) - 1
		other := Entry{Chain: part[last].Chain, Seq: heads[part[last].Chain].Seq + 1}
		if _, ok := h.hashOf(last, &other); ok || !h.diverged {
			return fmt.Errorf("slot %d taken for another entry (ok %v, diverged %v)", last, ok, h.diverged)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestHashAheadFinishes stops parts at every stage of the helper (before
// it starts, while it hashes, after it is done) while the committer
// hashes some slots itself; with -race, no access of the helper may
// follow finish.
func TestHashAheadFinishes(t *testing.T) {
	db, part := hashAheadPart(t, hashAheadEntriesMin)
	for round := range 200 {
		err := db.Update(context.Background(), func(tx *Tx) error {
			h := tx.startHashAhead(part)
			if h == nil {
				return fmt.Errorf("round %d: not hashed ahead", round)
			}
			for i := range round % 4 {
				head, err := tx.head(part[i].Chain)
				if err != nil {
					return err
				}
				e := Entry{Seq: head.Seq + 1, PrevHash: head.Hash, TimeUnixNano: max(h.now, head.TimeUnixNano)}
				if _, ok := h.hashOf(i, &e); !ok {
					return fmt.Errorf("round %d: slot %d refused", round, i)
				}
			}
			if round%8 == 7 {
				runtime.Gosched() // give the helper time to finish
			}
			h.finish()
			h.finish()
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
