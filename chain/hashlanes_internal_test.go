package chain

import (
	"context"
	"fmt"
	"testing"

	"github.com/ledgerworks/ledger/internal/blake3batch"
	"github.com/ledgerworks/ledger/storage/storagetest"
)

// TestHashGroupInLanes checks the slots of a group against the entries its
// Appends become: the first Append on each chain (one of them new) gets the
// hash of the entry after the chain's head, at the group's time; a second
// Append on a chain, an Update's function, and a payload too long for one
// BLAKE3 chunk get no slot (seq 0, which no entry matches).
func TestHashGroupInLanes(t *testing.T) {
	if blake3batch.Lanes() < 2 {
		t.Skip("no lane path on this machine")
	}
	for _, f := range storagetest.Factories(t) {
		t.Run(f.Name, func(t *testing.T) {
			ctx := context.Background()
			db, err := OpenBackend(f.Open(t), Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for _, c := range []string{"a", "b", "c", "d"} {
				if _, err := db.Append(ctx, Request{Chain: c, IdempotencyKey: "old", Type: "t/v1"}); err != nil {
					t.Fatal(err)
				}
			}
			appendOf := func(chainID, key string, payload []byte) *request {
				return &request{appendReq: Request{Chain: chainID, IdempotencyKey: key, Type: "t/v1", Payload: payload}}
			}
			group := []*request{
				appendOf("a", "k1", []byte("x")),
				appendOf("b", "", nil),
				{fn: func(*Tx) error { return nil }},
				appendOf("a", "k2", []byte("y")), // a's second: no slot
				appendOf("new", "k1", []byte("z")),
				appendOf("c", "k1", make([]byte, blake3batch.ChunkSize+1)), // too long for the lanes
				appendOf("d", "k1", []byte("w")),
			}
			hashed := map[int]bool{0: true, 1: true, 4: true, 6: true}
			stx, err := db.backend.Begin(ctx, true)
			if err != nil {
				t.Fatal(err)
			}
			defer stx.Rollback()
			var s laneScratch
			h := db.hashGroupInLanes(stx, group, &s)
			if h == nil {
				t.Fatal("a group with four first Appends on distinct chains is not hashed in the lanes")
			}
			defer h.finish()
			tx := &Tx{db: db, ctx: ctx, stx: stx}
			for i, r := range group {
				slot := h.slots[i]
				if !hashed[i] {
					if slot.seq != 0 {
						t.Errorf("request %d: slot %+v, want none", i, slot)
					}
					continue
				}
				head, err := tx.head(r.appendReq.Chain)
				if err != nil {
					t.Fatal(err)
				}
				e := Entry{Chain: r.appendReq.Chain, Seq: head.Seq + 1, PrevHash: head.Hash, TimeUnixNano: h.now,
					IdempotencyKey: r.appendReq.IdempotencyKey, Type: r.appendReq.Type, Payload: r.appendReq.Payload}
				if head.Seq > 0 {
					e.TimeUnixNano = max(e.TimeUnixNano, head.TimeUnixNano)
				}
				if got, ok := h.hashOf(i, &e); !ok || got != e.ComputeHash() {
					t.Errorf("request %d: slot hash %v (ok %v), want %v", i, got, ok, e.ComputeHash())
				}
			}
		})
	}
}

// TestHashGroupInLanesTooFew: fewer first Appends than laneGroupMin are
// hashed one at a time.
func TestHashGroupInLanesTooFew(t *testing.T) {
	db, err := OpenBackend(storagetest.Factories(t)[0].Open(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var group []*request
	for i := range laneGroupMin {
		chainID := fmt.Sprint("c", min(i, laneGroupMin-2)) // one chain twice
		group = append(group, &request{appendReq: Request{Chain: chainID, Type: "t/v1"}})
	}
	stx, err := db.backend.Begin(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer stx.Rollback()
	if h := db.hashGroupInLanes(stx, group, &laneScratch{}); h != nil {
		h.finish()
		t.Fatalf("%d first Appends hashed in the lanes, want at least %d", laneGroupMin-1, laneGroupMin)
	}
}
